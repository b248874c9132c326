package admit

import (
	"math"
	"sync"
	"time"
)

// submitRate is a token bucket per user: SubmitRate admissions a second with a burst of ten
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

// take spends one admission of user, or says how long until one is allowed.
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
		return &SubmitRateError{Seconds: max(1, int(math.Ceil((1-b.tokens)/r.rate)))}
	}
	b.tokens--
	return nil
}
