package jobs

import (
	"time"
)

// MaxScheduleAhead is the furthest ahead a prompt may be scheduled (CONTRACT.md).
const MaxScheduleAhead = 30 * 24 * time.Hour

// scheduleSlack is how far in the past a scheduled_for may lie: a clock a little behind, or a
// request a little slow, is "now".
const scheduleSlack = time.Minute

// checkSchedule applies the scheduling rules: at most 30 days ahead, at most a minute in the
// past; a time already past (within the minute) runs at once.
func (s *admission) checkSchedule(r *SubmitRequest) error {
	if r.ScheduledFor == nil {
		return nil
	}
	now := s.cfg.Now()
	at := r.ScheduledFor.UTC()
	switch {
	case at.After(now.Add(MaxScheduleAhead)):
		return &ValidationError{Fields: map[string]string{"scheduled_for": "must be at most 30 days ahead"}}
	case at.Before(now.Add(-scheduleSlack)):
		return &ValidationError{Fields: map[string]string{"scheduled_for": "must not be more than a minute in the past"}}
	case !at.After(now):
		r.ScheduledFor = nil
		return nil
	}
	r.ScheduledFor = &at
	return nil
}
