package usage

import (
	"fmt"
	"time"
)

// Period is the span a budget covers.
type Period string

// The budget periods, in UTC.
const (
	Day   Period = "day"
	Month Period = "month"
)

// ParsePeriod reads "day" or "month".
func ParsePeriod(s string) (Period, error) {
	switch Period(s) {
	case Day, Month:
		return Period(s), nil
	}
	return "", fmt.Errorf("budget period %q: want day or month", s)
}

// Bounds returns the period holding t: its start and its end (the next period's start), UTC.
func (p Period) Bounds(t time.Time) (start, end time.Time) {
	t = t.UTC()
	if p == Month {
		start = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	start = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
	return start, start.AddDate(0, 0, 1)
}

// Budget is an org's token budget per period.
type Budget struct {
	Tokens int64
	Period Period
}

// Status is where an org stands against its budget.
type Status struct {
	// Budget is the org's budget; Tokens zero means none.
	Budget Budget
	// Used is what the org recorded in the current period.
	Used int64
	// Resets is when the current period ends.
	Resets time.Time
}

// Exhausted reports whether the budget is spent.
func (s Status) Exhausted() bool { return s.Budget.Tokens > 0 && s.Used >= s.Budget.Tokens }

// RetryAfter is the whole seconds from now until the period resets, at least one.
func (s Status) RetryAfter(now time.Time) int {
	secs := int(s.Resets.Sub(now).Seconds() + 0.999)
	return max(secs, 1)
}
