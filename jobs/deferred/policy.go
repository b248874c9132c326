package deferred

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalidPolicy is returned by Policy.Validate for a policy that cannot be
// applied.
var ErrInvalidPolicy = errors.New("deferred: invalid policy")

// Bounds of the contract that no policy may widen.
const (
	// DefaultMaxTTL is the host maximum TTL unless a deployment configures
	// another maximum.
	DefaultMaxTTL = 15 * time.Minute
	// MinRetryAfterSeconds is the smallest retry_after_seconds on the wire.
	MinRetryAfterSeconds = 1
	// MaxRetryAfterSeconds is the largest retry_after_seconds on the wire.
	MaxRetryAfterSeconds = 60
)

// Policy is the host policy that clamps what a kind or caller asks for. A
// zero field means its default, so the zero Policy behaves as DefaultPolicy.
type Policy struct {
	// MaxTTL is the longest time an operation may live before it expires;
	// DefaultMaxTTL (15 minutes) when zero.
	MaxTTL time.Duration
	// DefaultTTL is the TTL of an operation whose kind asks for none; MaxTTL
	// when zero.
	DefaultTTL time.Duration
	// MinRetryAfter is the smallest retry hint in seconds;
	// MinRetryAfterSeconds (1) when zero.
	MinRetryAfter int
	// MaxRetryAfter is the largest retry hint in seconds;
	// MaxRetryAfterSeconds (60) when zero.
	MaxRetryAfter int
}

// DefaultPolicy returns the host default: TTL at most and by default 15
// minutes, retry hints between 1 and 60 seconds.
func DefaultPolicy() Policy {
	return Policy{
		MaxTTL:        DefaultMaxTTL,
		DefaultTTL:    DefaultMaxTTL,
		MinRetryAfter: MinRetryAfterSeconds,
		MaxRetryAfter: MaxRetryAfterSeconds,
	}
}

// effective returns p with every zero field replaced by its default.
func (p Policy) effective() Policy {
	if p.MaxTTL == 0 {
		p.MaxTTL = DefaultMaxTTL
	}
	if p.DefaultTTL == 0 {
		p.DefaultTTL = p.MaxTTL
	}
	if p.MinRetryAfter == 0 {
		p.MinRetryAfter = MinRetryAfterSeconds
	}
	if p.MaxRetryAfter == 0 {
		p.MaxRetryAfter = MaxRetryAfterSeconds
	}
	return p
}

// Validate returns nil when p, with zero fields read as their defaults, has a
// positive MaxTTL, a DefaultTTL in (0, MaxTTL], and retry bounds with
// 1 <= MinRetryAfter <= MaxRetryAfter <= 60; otherwise an error wrapping
// ErrInvalidPolicy.
func (p Policy) Validate() error {
	e := p.effective()
	switch {
	case e.MaxTTL < 0:
		return fmt.Errorf("%w: MaxTTL %v is negative", ErrInvalidPolicy, e.MaxTTL)
	case e.DefaultTTL < 0:
		return fmt.Errorf("%w: DefaultTTL %v is negative", ErrInvalidPolicy, e.DefaultTTL)
	case e.DefaultTTL > e.MaxTTL:
		return fmt.Errorf("%w: DefaultTTL %v is above MaxTTL %v", ErrInvalidPolicy, e.DefaultTTL, e.MaxTTL)
	case e.MinRetryAfter < MinRetryAfterSeconds || e.MinRetryAfter > MaxRetryAfterSeconds:
		return fmt.Errorf("%w: MinRetryAfter %d is outside %d..%d", ErrInvalidPolicy, e.MinRetryAfter, MinRetryAfterSeconds, MaxRetryAfterSeconds)
	case e.MaxRetryAfter < MinRetryAfterSeconds || e.MaxRetryAfter > MaxRetryAfterSeconds:
		return fmt.Errorf("%w: MaxRetryAfter %d is outside %d..%d", ErrInvalidPolicy, e.MaxRetryAfter, MinRetryAfterSeconds, MaxRetryAfterSeconds)
	case e.MinRetryAfter > e.MaxRetryAfter:
		return fmt.Errorf("%w: MinRetryAfter %d is above MaxRetryAfter %d", ErrInvalidPolicy, e.MinRetryAfter, e.MaxRetryAfter)
	}
	return nil
}

// ClampTTL returns the TTL an operation gets when requested is asked for: the
// default TTL for zero or a negative request, never more than the maximum,
// and the request itself when it is shorter (a kind may ask for less). The
// result is at most MaxTTL even when DefaultTTL is misconfigured above it.
func (p Policy) ClampTTL(requested time.Duration) time.Duration {
	e := p.effective()
	ttl := requested
	if ttl <= 0 {
		ttl = e.DefaultTTL
	}
	if ttl > e.MaxTTL {
		ttl = e.MaxTTL
	}
	return ttl
}

// ClampRetryAfter returns the retry hint in seconds for a requested one:
// MinRetryAfter for zero or a negative request, otherwise the request held
// within MinRetryAfter..MaxRetryAfter and always within the contract's 1..60.
func (p Policy) ClampRetryAfter(requested int) int {
	e := p.effective()
	r := requested
	if r < e.MinRetryAfter {
		r = e.MinRetryAfter
	}
	if r > e.MaxRetryAfter {
		r = e.MaxRetryAfter
	}
	return min(max(r, MinRetryAfterSeconds), MaxRetryAfterSeconds)
}
