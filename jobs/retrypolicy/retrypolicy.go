package retrypolicy

import (
	"math"
	"time"

	"asterion/jobs/provider"
)

// RateLimitFloor is the least wait after a rate limit without Retry-After.
const RateLimitFloor = 60 * time.Second

// maxBackoff caps the exponential backoff for large max_attempts.
const maxBackoff = time.Hour

// Backoff is the delay before attempt next (2, 3, …): 5 s + random 0–5 s before attempt
// 2, 25 s + random 0–15 s before attempt 3, and so on (base ×5, jitter ×3), capped at an hour.
// rnd returns a number in [0, 1).
func Backoff(next int, rnd func() float64) time.Duration {
	if next < 2 {
		return 0
	}
	n := float64(next - 2)
	base := 5 * math.Pow(5, n)
	jitter := 5 * math.Pow(3, n) * rnd()
	// Cap in seconds before converting: past about 2^63 ns the conversion overflows to a
	// negative duration.
	secs := base + jitter
	if secs >= maxBackoff.Seconds() {
		return maxBackoff
	}
	return time.Duration(secs * float64(time.Second))
}

// Decision is what to do after a failed attempt.
type Decision struct {
	// Retry re-queues the job for attempt+1 after Delay; otherwise it fails.
	Retry bool
	Delay time.Duration
}

// Decide applies the retry rules (docs/architecture.md, "Retries"): retryable kinds re-queue while attempts remain (rate limits wait for
// Retry-After, but at most maxPause, the longest one provider answer may hold anything; or at
// least a minute without one); non-retryable kinds and an exhausted budget fail.
func Decide(e *provider.Error, attempt, maxAttempts int, maxPause time.Duration, rnd func() float64) Decision {
	if !e.Kind.Retryable() || attempt >= maxAttempts {
		return Decision{}
	}
	if e.Kind == provider.KindRateLimit {
		if e.HasRetryAfter {
			return Decision{Retry: true, Delay: min(max(e.RetryAfter, 0), max(maxPause, 0))}
		}
		return Decision{Retry: true, Delay: max(RateLimitFloor, Backoff(attempt+1, rnd))}
	}
	return Decision{Retry: true, Delay: Backoff(attempt+1, rnd)}
}
