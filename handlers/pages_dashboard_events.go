package handlers

import (
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/feed"
)

// eventStatus is the part of an event's payload a row shows as of that event: rendering the
// state each event reports (rather than the row's state when it is read) shows every step in
// order, and the last event of a burst leaves the row as it now is.
type eventStatus struct {
	// Job events (jobs.JobEvent).
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

// eventOperation loads the operation an event is about, once per event for every stream of
// this server.
func (s *Server) eventOperation(ctx context.Context, e feed.Event) (db.Operation, bool, error) {
	if e.OperationID == nil {
		return db.Operation{}, false, nil
	}
	id := *e.OperationID
	rows, err := s.dashboard.eventOps.get(ctx, dashEventKey{e.Seq, id}, func(ctx context.Context) (map[uuid.UUID]db.Operation, error) {
		return s.deps.Jobs.OperationRows(ctx, dashAllOrgs, []uuid.UUID{id})
	})
	if err != nil {
		return db.Operation{}, false, err
	}
	op, ok := rows[id]
	if !ok {
		return db.Operation{}, false, nil
	}
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
	return op, true, nil
}

// eventJob loads the job an event is about, once per event for every stream of this server.
func (s *Server) eventJob(ctx context.Context, e feed.Event) (db.Job, bool, error) {
	if e.JobID == nil || e.Topic != feed.TopicJob {
		return db.Job{}, false, nil
	}
	id := *e.JobID
	rows, err := s.dashboard.eventJobs.get(ctx, dashEventKey{e.Seq, id}, func(ctx context.Context) (map[uuid.UUID]db.Job, error) {
		return s.deps.Jobs.JobRows(ctx, dashAllOrgs, []uuid.UUID{id})
	})
	if err != nil {
		return db.Job{}, false, err
	}
	j, ok := rows[id]
	if !ok {
		return db.Job{}, false, nil
	}
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
	return j, true, nil
}

// sees reports whether the dashboard viewer v may see an object of org (operators see their
// org, admins every org; the hub's scope already filters, this is the second check).
func sees(v jobs.Viewer, orgID int64) bool { return v.AllOrgs || orgID == v.OrgID }
