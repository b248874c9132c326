package retrypolicy_test

import (
	"testing"
	"time"

	"asterion/jobs/governor"
	"asterion/jobs/provider"
	"asterion/jobs/retrypolicy"
)

func constRand(r float64) func() float64 { return func() float64 { return r } }

func TestBackoff(t *testing.T) {
	t.Parallel()
	cases := []struct {
		next int
		rnd  float64
		want time.Duration
	}{
		{0, 0.5, 0},
		{1, 0.5, 0},
		{2, 0, 5 * time.Second},
		{2, 0.5, 7500 * time.Millisecond},
		{2, 0.999, 9995 * time.Millisecond},
		{3, 0, 25 * time.Second},
		{3, 0.5, 32500 * time.Millisecond},
		{3, 0.999, 39985 * time.Millisecond},
		{4, 0, 125 * time.Second},
		{12, 0.999, time.Hour}, // capped
		{40, 0.999, time.Hour}, // no overflow past the cap
	}
	for _, c := range cases {
		if got := retrypolicy.Backoff(c.next, constRand(c.rnd)); got != c.want {
			t.Errorf("Backoff(%d, %v) = %s, want %s", c.next, c.rnd, got, c.want)
		}
	}
	// The backoff ranges hold for every jitter in [0, 1).
	for r := 0.0; r < 1; r += 0.01 {
		if d := retrypolicy.Backoff(2, constRand(r)); d < 5*time.Second || d >= 10*time.Second {
			t.Errorf("Backoff(2, %v) = %s, outside [5s, 10s)", r, d)
		}
		if d := retrypolicy.Backoff(3, constRand(r)); d < 25*time.Second || d >= 40*time.Second {
			t.Errorf("Backoff(3, %v) = %s, outside [25s, 40s)", r, d)
		}
	}
	// Growing attempts never shrink the delay.
	prev := time.Duration(0)
	for n := 2; n < 20; n++ {
		d := retrypolicy.Backoff(n, constRand(0))
		if d < prev {
			t.Errorf("Backoff(%d) = %s < Backoff(%d) = %s", n, d, n-1, prev)
		}
		prev = d
	}
}

func TestDecide(t *testing.T) {
	t.Parallel()
	zero := constRand(0)
	retryable := []provider.ErrorKind{provider.KindTimeout, provider.KindRateLimit, provider.KindProvider5xx, provider.KindUnknown}
	for _, k := range retryable {
		for attempt := 1; attempt <= 3; attempt++ {
			d := retrypolicy.Decide(&provider.Error{Kind: k}, attempt, 3, governor.DefaultMaxPause, zero)
			if attempt < 3 && !d.Retry {
				t.Errorf("%s at attempt %d/3: no retry, want a retry", k, attempt)
			}
			if attempt == 3 && (d.Retry || d.Delay != 0) {
				t.Errorf("%s at attempt 3/3: %+v, want fail", k, d)
			}
			if attempt < 3 && k != provider.KindRateLimit && d.Delay != retrypolicy.Backoff(attempt+1, zero) {
				t.Errorf("%s at attempt %d: delay %s, want %s", k, attempt, d.Delay, retrypolicy.Backoff(attempt+1, zero))
			}
		}
		// An attempt past the budget (max lowered) never retries.
		if d := retrypolicy.Decide(&provider.Error{Kind: k}, 5, 3, governor.DefaultMaxPause, zero); d.Retry {
			t.Errorf("%s at attempt 5/3 retries", k)
		}
	}
	for _, k := range []provider.ErrorKind{provider.KindProvider4xx, provider.KindParse, provider.KindAuth} {
		if d := retrypolicy.Decide(&provider.Error{Kind: k}, 1, 10, governor.DefaultMaxPause, zero); d.Retry {
			t.Errorf("%s retries: %+v", k, d)
		}
	}
	// Rate limits: Retry-After is respected exactly, else at least a minute.
	if d := retrypolicy.Decide(&provider.Error{Kind: provider.KindRateLimit, HasRetryAfter: true, RetryAfter: 7 * time.Second}, 1, 3, governor.DefaultMaxPause, zero); !d.Retry || d.Delay != 7*time.Second {
		t.Errorf("rate limit with Retry-After 7s: %+v", d)
	}
	for _, r := range []float64{0, 0.5, 0.999} {
		for attempt := 1; attempt <= 2; attempt++ {
			d := retrypolicy.Decide(&provider.Error{Kind: provider.KindRateLimit}, attempt, 5, governor.DefaultMaxPause, constRand(r))
			if !d.Retry || d.Delay < retrypolicy.RateLimitFloor {
				t.Errorf("rate limit without Retry-After (attempt %d, rand %v): %+v, want ≥ %s", attempt, r, d, retrypolicy.RateLimitFloor)
			}
		}
	}
	if retrypolicy.RateLimitFloor < time.Minute {
		t.Errorf("RateLimitFloor = %s, want at least 60 s", retrypolicy.RateLimitFloor)
	}
	// A Retry-After of centuries waits at most the longest pause one answer may cause.
	for _, maxPause := range []time.Duration{governor.DefaultMaxPause, 30 * time.Second} {
		huge := &provider.Error{Kind: provider.KindRateLimit, HasRetryAfter: true, RetryAfter: 9000000000 * time.Second}
		if d := retrypolicy.Decide(huge, 1, 3, maxPause, zero); !d.Retry || d.Delay != maxPause {
			t.Errorf("rate limit with Retry-After 9000000000s, MaxPause %v: %+v, want a retry after %v", maxPause, d, maxPause)
		}
	}
	// A rate limit with Retry-After on the last attempt still fails.
	if d := retrypolicy.Decide(&provider.Error{Kind: provider.KindRateLimit, HasRetryAfter: true, RetryAfter: time.Second}, 3, 3, governor.DefaultMaxPause, zero); d.Retry {
		t.Errorf("rate limit at attempt 3/3 retries")
	}
}
