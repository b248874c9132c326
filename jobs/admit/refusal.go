package admit

import (
	"errors"
	"fmt"
	"time"
)

// Refusal is an admission's answer to work beyond a limit: which limit (the last part of the
// problem type a door answers with, such as "budget-exhausted") and how many whole seconds to
// wait before asking again (at least one). Every refusal error satisfies it.
type Refusal interface {
	error
	Kind() string
	RetryAfter() int
}

// Sentinel errors matched by the refusals, for callers that branch on one limit.
var (
	ErrBudgetExhausted = errors.New("the org's token budget is spent")
	ErrQuotaExceeded   = errors.New("the org's queue quota is full")
	ErrSubmitRate      = errors.New("too many submits")
)

// BudgetExhaustedError refuses work of an org whose period's recorded usage plus the
// reservations of its accepted, unfinished jobs reached its budget.
type BudgetExhaustedError struct {
	Budget   int64
	Period   string
	Used     int64
	Reserved int64
	// Resets is when the period ends.
	Resets time.Time
	// Seconds is the whole seconds until Resets, at least one.
	Seconds int
}

func (e *BudgetExhaustedError) Error() string {
	return fmt.Sprintf("the org used %d and holds %d more for accepted work of its %d tokens this %s; the budget resets in %d s",
		e.Used, e.Reserved, e.Budget, e.Period, e.Seconds)
}

// Kind is the problem type of the refusal.
func (e *BudgetExhaustedError) Kind() string { return "budget-exhausted" }

// RetryAfter is the seconds until the period resets.
func (e *BudgetExhaustedError) RetryAfter() int { return e.Seconds }

// Unwrap lets errors.Is(err, ErrBudgetExhausted) match.
func (e *BudgetExhaustedError) Unwrap() error { return ErrBudgetExhausted }

// QuotaExceededError refuses work of an org that already has its quota of queued and running
// jobs.
type QuotaExceededError struct {
	Active, Max int64
	// Seconds is a hint for when a slot may be free.
	Seconds int
}

func (e *QuotaExceededError) Error() string {
	return fmt.Sprintf("the org has %d queued or running jobs, its quota is %d", e.Active, e.Max)
}

// Kind is the problem type of the refusal.
func (e *QuotaExceededError) Kind() string { return "quota-exceeded" }

// RetryAfter is a hint for when a slot may be free.
func (e *QuotaExceededError) RetryAfter() int { return e.Seconds }

// Unwrap lets errors.Is(err, ErrQuotaExceeded) match.
func (e *QuotaExceededError) Unwrap() error { return ErrQuotaExceeded }

// SubmitRateError refuses work beyond the user's submit rate.
type SubmitRateError struct {
	// Seconds is the whole seconds until the next submit is allowed, at least one.
	Seconds int
}

func (e *SubmitRateError) Error() string {
	return fmt.Sprintf("too many submits; the next is allowed in %d s", e.Seconds)
}

// Kind is the problem type of the refusal.
func (e *SubmitRateError) Kind() string { return "submit-rate" }

// RetryAfter is the seconds until the next submit is allowed.
func (e *SubmitRateError) RetryAfter() int { return e.Seconds }

// Unwrap lets errors.Is(err, ErrSubmitRate) match.
func (e *SubmitRateError) Unwrap() error { return ErrSubmitRate }

// AsRefusal returns the refusal err holds, if any.
func AsRefusal(err error) (Refusal, bool) {
	var r Refusal
	if errors.As(err, &r) {
		return r, true
	}
	return nil, false
}

// secondsUntil is the whole seconds from now until t, at least one.
func secondsUntil(now, t time.Time) int {
	s := int(t.Sub(now).Seconds() + 0.999)
	return max(s, 1)
}
