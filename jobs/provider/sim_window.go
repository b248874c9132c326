package provider

import (
	"fmt"
	"sync"
	"time"
)

// simWindow is the sim's imitation of a rate-limited account: at most limit calls in any
// sliding minute, in this process.
type simWindow struct {
	limit int
	now   func() time.Time

	mu sync.Mutex
	// calls are the start times of the calls answered in the last minute, oldest first.
	calls []time.Time
}

// simWindowSpan is the window of ASTERION_SIM_RPM.
const simWindowSpan = time.Minute

func newSimWindow(limit int, now func() time.Time) *simWindow {
	return &simWindow{limit: limit, now: now}
}

// take counts a call in the window, or refuses it with a rate_limit failure whose
// Retry-After is the time until the oldest call leaves the window (whole seconds, rounded
// up, as the header carries them). Either way it returns the figures a provider's
// x-ratelimit-* headers would carry.
func (w *simWindow) take() (Limits, *Error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	cut := 0
	for cut < len(w.calls) && !w.calls[cut].After(now.Add(-simWindowSpan)) {
		cut++
	}
	w.calls = w.calls[cut:]
	l := Limits{LimitRequests: w.limit, HasLimitRequests: true, HasRemainingRequests: true}
	if len(w.calls) >= w.limit {
		wait := w.calls[0].Add(simWindowSpan).Sub(now)
		secs := (wait + time.Second - 1) / time.Second
		l.ResetRequests = wait
		return l, &Error{Kind: KindRateLimit, StatusCode: 429, Limits: l, RetryAfter: secs * time.Second, HasRetryAfter: true,
			Message: fmt.Sprintf("simulated rate limit: %d requests per minute reached", w.limit), Err: ErrSimulated}
	}
	w.calls = append(w.calls, now)
	l.RemainingRequests = w.limit - len(w.calls)
	l.ResetRequests = w.calls[0].Add(simWindowSpan).Sub(now)
	return l, nil
}
