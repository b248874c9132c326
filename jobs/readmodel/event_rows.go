package readmodel

import (
	"encoding/json"
	"time"

	"asterion/db"
	"asterion/jobs/feed"
)

// eventStatus is the part of an event's payload a list row shows as of that event.
type eventStatus struct {
	// Job events (JobEvent).
	State           string     `json:"state"`
	Attempt         *int       `json:"attempt"`
	ErrorKind       *string    `json:"error_kind"`
	Priority        *int       `json:"priority"`
	OperationStatus string     `json:"operation_status"`
	UpdatedAt       *time.Time `json:"updated_at"`
	// Operation events.
	Status string `json:"status"`
}

func parseEventStatus(e feed.Event) eventStatus {
	var st eventStatus
	_ = json.Unmarshal(e.Payload, &st)
	return st
}

// JobAsOf returns j (the job an event is about, as read after it) as job event e reports it.
// A live list renders the state each event reports rather than the row as it is when read, so
// it shows every step in order, and the last event of a burst leaves the row as it now is.
func JobAsOf(j db.Job, e feed.Event) db.Job {
	st := parseEventStatus(e)
	if st.State != "" {
		j.State = st.State
	}
	if st.Attempt != nil {
		j.Attempt = *st.Attempt
	}
	if st.Priority != nil {
		j.Priority = *st.Priority
	}
	if st.UpdatedAt != nil && !st.UpdatedAt.IsZero() {
		j.UpdatedAt = *st.UpdatedAt
	}
	j.ErrorKind = st.ErrorKind
	return j
}

// OperationAsOf returns op as event e (a job event carrying its operation's status, or an
// operation event) reports it, for the same reason as JobAsOf.
func OperationAsOf(op db.Operation, e feed.Event) db.Operation {
	st := parseEventStatus(e)
	switch {
	case e.Topic == feed.TopicJob && st.OperationStatus != "":
		op.Status = st.OperationStatus
	case e.Topic == feed.TopicOperation && st.Status != "":
		op.Status = st.Status
	}
	if st.UpdatedAt != nil && !st.UpdatedAt.IsZero() {
		op.UpdatedAt = *st.UpdatedAt
	}
	return op
}
