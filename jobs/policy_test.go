package jobs_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/governor"
	"asterion/jobs/provider"
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
		if got := jobs.Backoff(c.next, constRand(c.rnd)); got != c.want {
			t.Errorf("Backoff(%d, %v) = %s, want %s", c.next, c.rnd, got, c.want)
		}
	}
	// The backoff ranges hold for every jitter in [0, 1).
	for r := 0.0; r < 1; r += 0.01 {
		if d := jobs.Backoff(2, constRand(r)); d < 5*time.Second || d >= 10*time.Second {
			t.Errorf("Backoff(2, %v) = %s, outside [5s, 10s)", r, d)
		}
		if d := jobs.Backoff(3, constRand(r)); d < 25*time.Second || d >= 40*time.Second {
			t.Errorf("Backoff(3, %v) = %s, outside [25s, 40s)", r, d)
		}
	}
	// Growing attempts never shrink the delay.
	prev := time.Duration(0)
	for n := 2; n < 20; n++ {
		d := jobs.Backoff(n, constRand(0))
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
			d := jobs.Decide(&provider.Error{Kind: k}, attempt, 3, governor.DefaultMaxPause, zero)
			if attempt < 3 && !d.Retry {
				t.Errorf("%s at attempt %d/3: no retry, want a retry", k, attempt)
			}
			if attempt == 3 && (d.Retry || d.Delay != 0) {
				t.Errorf("%s at attempt 3/3: %+v, want fail", k, d)
			}
			if attempt < 3 && k != provider.KindRateLimit && d.Delay != jobs.Backoff(attempt+1, zero) {
				t.Errorf("%s at attempt %d: delay %s, want %s", k, attempt, d.Delay, jobs.Backoff(attempt+1, zero))
			}
		}
		// An attempt past the budget (max lowered) never retries.
		if d := jobs.Decide(&provider.Error{Kind: k}, 5, 3, governor.DefaultMaxPause, zero); d.Retry {
			t.Errorf("%s at attempt 5/3 retries", k)
		}
	}
	for _, k := range []provider.ErrorKind{provider.KindProvider4xx, provider.KindParse, provider.KindAuth} {
		if d := jobs.Decide(&provider.Error{Kind: k}, 1, 10, governor.DefaultMaxPause, zero); d.Retry {
			t.Errorf("%s retries: %+v", k, d)
		}
	}
	// Rate limits: Retry-After is respected exactly, else at least a minute.
	if d := jobs.Decide(&provider.Error{Kind: provider.KindRateLimit, HasRetryAfter: true, RetryAfter: 7 * time.Second}, 1, 3, governor.DefaultMaxPause, zero); !d.Retry || d.Delay != 7*time.Second {
		t.Errorf("rate limit with Retry-After 7s: %+v", d)
	}
	for _, r := range []float64{0, 0.5, 0.999} {
		for attempt := 1; attempt <= 2; attempt++ {
			d := jobs.Decide(&provider.Error{Kind: provider.KindRateLimit}, attempt, 5, governor.DefaultMaxPause, constRand(r))
			if !d.Retry || d.Delay < jobs.RateLimitFloor {
				t.Errorf("rate limit without Retry-After (attempt %d, rand %v): %+v, want ≥ %s", attempt, r, d, jobs.RateLimitFloor)
			}
		}
	}
	if jobs.RateLimitFloor < time.Minute {
		t.Errorf("RateLimitFloor = %s, want at least 60 s", jobs.RateLimitFloor)
	}
	// A Retry-After of centuries waits at most the longest pause one answer may cause.
	for _, maxPause := range []time.Duration{governor.DefaultMaxPause, 30 * time.Second} {
		huge := &provider.Error{Kind: provider.KindRateLimit, HasRetryAfter: true, RetryAfter: 9000000000 * time.Second}
		if d := jobs.Decide(huge, 1, 3, maxPause, zero); !d.Retry || d.Delay != maxPause {
			t.Errorf("rate limit with Retry-After 9000000000s, MaxPause %v: %+v, want a retry after %v", maxPause, d, maxPause)
		}
	}
	// A rate limit with Retry-After on the last attempt still fails.
	if d := jobs.Decide(&provider.Error{Kind: provider.KindRateLimit, HasRetryAfter: true, RetryAfter: time.Second}, 3, 3, governor.DefaultMaxPause, zero); d.Retry {
		t.Errorf("rate limit at attempt 3/3 retries")
	}
}

func TestRiverPriorityBands(t *testing.T) {
	t.Parallel()
	want := map[int]int{0: 1, 10: 1, 11: 2, 40: 2, 41: 3, 59: 3, 60: 4, 100: 4, 5: 1, 25: 2, 50: 3, 90: 4}
	for p, w := range want {
		if got := jobs.RiverPriority(p); got != w {
			t.Errorf("RiverPriority(%d) = %d, want %d", p, got, w)
		}
	}
	// Monotone over the whole range and always a River priority.
	prev := 1
	for p := 0; p <= 100; p++ {
		got := jobs.RiverPriority(p)
		if got < prev || got < 1 || got > 4 {
			t.Fatalf("RiverPriority(%d) = %d after %d", p, got, prev)
		}
		prev = got
	}
}

// TestCanTransitionTable checks every pair of the six states against the table of legal changes.
func TestCanTransitionTable(t *testing.T) {
	t.Parallel()
	all := []jobs.State{jobs.StateQueued, jobs.StateRunning, jobs.StateSucceeded, jobs.StateFailed, jobs.StateCancelled, jobs.StateSuperseded}
	legal := map[[2]jobs.State]bool{
		{jobs.StateQueued, jobs.StateRunning}:       true,
		{jobs.StateQueued, jobs.StateCancelled}:     true,
		{jobs.StateRunning, jobs.StateSucceeded}:    true,
		{jobs.StateRunning, jobs.StateQueued}:       true,
		{jobs.StateRunning, jobs.StateFailed}:       true,
		{jobs.StateRunning, jobs.StateCancelled}:    true,
		{jobs.StateSucceeded, jobs.StateSuperseded}: true,
		{jobs.StateFailed, jobs.StateSuperseded}:    true,
		{jobs.StateCancelled, jobs.StateSuperseded}: true,
	}
	n := 0
	for _, from := range all {
		for _, to := range all {
			n++
			want := legal[[2]jobs.State{from, to}]
			if got := jobs.CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
		// Unknown states never transition.
		if jobs.CanTransition(from, "paused") || jobs.CanTransition("paused", from) {
			t.Errorf("a transition with an unknown state is allowed for %s", from)
		}
	}
	if n != 36 {
		t.Fatalf("checked %d pairs, want 36", n)
	}
	for _, s := range all {
		got, err := jobs.ParseState(string(s))
		if err != nil || got != s {
			t.Errorf("ParseState(%q) = %q, %v", s, got, err)
		}
		wantTerminal := s != jobs.StateQueued && s != jobs.StateRunning
		if s.Terminal() != wantTerminal {
			t.Errorf("%s.Terminal() = %v", s, s.Terminal())
		}
		// A terminal state changes only into superseded.
		if s.Terminal() {
			for _, to := range all {
				if jobs.CanTransition(s, to) && to != jobs.StateSuperseded {
					t.Errorf("terminal %s may become %s", s, to)
				}
			}
		}
	}
	for _, bad := range []string{"", "QUEUED", "done", "queued "} {
		if _, err := jobs.ParseState(bad); err == nil {
			t.Errorf("ParseState(%q) accepted", bad)
		}
	}
}

func TestValidationErrorUnwrap(t *testing.T) {
	t.Parallel()
	var err error = &jobs.ValidationError{Fields: map[string]string{"prompt": "x"}}
	if !errors.Is(fmt.Errorf("wrapped: %w", err), jobs.ErrInvalid) {
		t.Fatal("a ValidationError does not match ErrInvalid")
	}
}
