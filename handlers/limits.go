package handlers

import (
	"errors"
	"fmt"
	"time"
)

// Limits are the transport limits that protect the service (docs/guarantees.md). The zero
// value of each field means its default.
type Limits struct {
	// MaxConnsPerIP caps the open connections of one client address
	// (ASTERION_MAX_CONNS_PER_IP, default 256); the next is answered 429 and closed.
	MaxConnsPerIP int
	// RequestTimeout is the deadline of every request that is not a stream (default 10 s): its
	// context, and so every query it runs, ends then.
	RequestTimeout time.Duration
	// WriteTimeout is every connection's write deadline (default 30 s): a write the client
	// does not take within it fails and the connection is closed. It is moved before every
	// write (at most 64 KiB), never set for a whole answer. An SSE stream uses
	// StreamConfig.WriteTimeout instead while it runs.
	WriteTimeout time.Duration
	// TrustedProxies are the reverse proxies whose X-Forwarded-For gives the client's address
	// for the sign-in limits (ASTERION_TRUSTED_PROXIES; none by default). The connection cap
	// counts TCP peers whatever this says.
	TrustedProxies TrustedProxies
}

// Default limits.
const (
	DefaultMaxConnsPerIP  = 256
	DefaultRequestTimeout = 10 * time.Second
	DefaultWriteTimeout   = 30 * time.Second
)

// Validate rejects negative values and a request or write deadline under 100 ms.
func (l Limits) Validate() error {
	var errs []error
	if l.MaxConnsPerIP < 0 {
		errs = append(errs, fmt.Errorf("max connections per address: want a positive number, got %d", l.MaxConnsPerIP))
	}
	if l.RequestTimeout < 0 || l.RequestTimeout > 0 && l.RequestTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("request timeout: want at least 100ms, got %s", l.RequestTimeout))
	}
	if l.WriteTimeout < 0 || l.WriteTimeout > 0 && l.WriteTimeout < 100*time.Millisecond {
		errs = append(errs, fmt.Errorf("write timeout: want at least 100ms, got %s", l.WriteTimeout))
	}
	return errors.Join(errs...)
}

func (l Limits) withDefaults() Limits {
	if l.MaxConnsPerIP == 0 {
		l.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if l.RequestTimeout == 0 {
		l.RequestTimeout = DefaultRequestTimeout
	}
	if l.WriteTimeout == 0 {
		l.WriteTimeout = DefaultWriteTimeout
	}
	return l
}
