package admit

import "time"

// MaxScheduleAhead is the furthest ahead work may be scheduled.
const MaxScheduleAhead = 30 * 24 * time.Hour

// scheduleSlack is how far in the past a scheduled time may lie: a clock a little behind, or
// a request a little slow, is "now".
const scheduleSlack = time.Minute

// schedule applies the scheduling rules to at (nil: at once): at most 30 days ahead, at most a
// minute in the past. It returns the time to schedule for, nil for a time already past (within
// the minute), or a field message.
func schedule(at *time.Time, now time.Time) (*time.Time, string) {
	if at == nil {
		return nil, ""
	}
	t := at.UTC()
	switch {
	case t.After(now.Add(MaxScheduleAhead)):
		return nil, "must be at most 30 days ahead"
	case t.Before(now.Add(-scheduleSlack)):
		return nil, "must not be more than a minute in the past"
	case !t.After(now):
		return nil, ""
	}
	return &t, ""
}
