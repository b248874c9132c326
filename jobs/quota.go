package jobs

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"
)

// ErrQuotaExceeded is matched by a QuotaExceededError.
var ErrQuotaExceeded = errors.New("the org's queue quota is full")

// QuotaExceededError refuses a submit of an org that already has its quota of queued and
// running jobs.
type QuotaExceededError struct {
	Active, Max int64
	// RetryAfter is a hint, in seconds, for when a slot may be free.
	RetryAfter int
}

func (e *QuotaExceededError) Error() string {
	return fmt.Sprintf("the org has %d queued or running jobs, its quota is %d", e.Active, e.Max)
}

// Unwrap lets errors.Is(err, ErrQuotaExceeded) match.
func (e *QuotaExceededError) Unwrap() error { return ErrQuotaExceeded }

// ErrSubmitRate is matched by a SubmitRateError.
var ErrSubmitRate = errors.New("too many submits")

// SubmitRateError refuses a submit beyond the user's submit rate.
type SubmitRateError struct {
	// RetryAfter is the whole seconds until the next submit is allowed, at least one.
	RetryAfter int
}

func (e *SubmitRateError) Error() string {
	return fmt.Sprintf("too many submits; the next is allowed in %d s", e.RetryAfter)
}

// Unwrap lets errors.Is(err, ErrSubmitRate) match.
func (e *SubmitRateError) Unwrap() error { return ErrSubmitRate }

// quotaRetryAfter is the Retry-After of a full queue quota: a slot frees when a job ends.
const quotaRetryAfter = 5

// checkModel applies the deployment's model list: no model means the first, another model
// than those listed is a field error.
func (s *admission) checkModel(r *SubmitRequest) error {
	models := s.cfg.Models
	if len(models) == 0 {
		return nil
	}
	if r.Options.Model == "" {
		r.Options.Model = models[0]
		return nil
	}
	if !slices.Contains(models, r.Options.Model) {
		return &ValidationError{Fields: map[string]string{"options.model": "must be one of " + strings.Join(models, ", ")}}
	}
	return nil
}

// checkQuota refuses a submit of an org that holds OrgMaxQueued queued and running jobs,
// counted from the trigger-kept counters (one indexed read).
func (s *admission) checkQuota(ctx context.Context, orgID int64) error {
	max := int64(s.cfg.OrgMaxQueued)
	if max <= 0 {
		return nil
	}
	var active int64
	if err := s.db.NewSelect().Table("sa_job_count").ColumnExpr("coalesce(sum(n), 0)").
		Where("org_id = ? AND state IN ('queued', 'running')", orgID).Scan(ctx, &active); err != nil {
		return fmt.Errorf("count the active jobs of org %d: %w", orgID, err)
	}
	if active >= max {
		return &QuotaExceededError{Active: active, Max: max, RetryAfter: quotaRetryAfter}
	}
	return nil
}

// submitRate is a token bucket per user: SubmitRate submits a second with a burst of ten
// times that. It is this process's: several server processes each allow the rate.
type submitRate struct {
	rate  float64
	burst float64
	now   func() time.Time

	mu      sync.Mutex
	buckets map[int64]*bucket
	pruned  time.Time
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newSubmitRate(rate float64, now func() time.Time) *submitRate {
	if rate <= 0 {
		return nil
	}
	return &submitRate{rate: rate, burst: 10 * rate, now: now, buckets: map[int64]*bucket{}}
}

// take spends one submit of user, or says how long until one is allowed.
func (r *submitRate) take(user int64) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.pruned) > time.Minute {
		// A bucket full again holds nothing a new one would not.
		for id, b := range r.buckets {
			if b.tokens+now.Sub(b.at).Seconds()*r.rate >= r.burst {
				delete(r.buckets, id)
			}
		}
		r.pruned = now
	}
	b, ok := r.buckets[user]
	if !ok {
		b = &bucket{tokens: r.burst, at: now}
		r.buckets[user] = b
	}
	b.tokens = math.Min(r.burst, b.tokens+now.Sub(b.at).Seconds()*r.rate)
	b.at = now
	if b.tokens < 1 {
		return &SubmitRateError{RetryAfter: max(1, int(math.Ceil((1-b.tokens)/r.rate)))}
	}
	b.tokens--
	return nil
}
