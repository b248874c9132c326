package handlers

import (
	"context"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs/feed"
	"asterion/jobs/readmodel"
)

// eventOperation loads the operation an event is about, once per event for every stream of
// this server, as the event reports it.
func (s *Server) eventOperation(ctx context.Context, e feed.Event) (db.Operation, bool, error) {
	if e.OperationID == nil {
		return db.Operation{}, false, nil
	}
	id := *e.OperationID
	rows, err := s.dashboard.eventOps.get(ctx, dashEventKey{e.Seq, id}, func(ctx context.Context) (map[uuid.UUID]db.Operation, error) {
		return s.deps.Reads.OperationRows(ctx, dashAllOrgs, []uuid.UUID{id})
	})
	if err != nil {
		return db.Operation{}, false, err
	}
	op, ok := rows[id]
	if !ok {
		return db.Operation{}, false, nil
	}
	return readmodel.OperationAsOf(op, e), true, nil
}

// eventJob loads the job an event is about, once per event for every stream of this server,
// as the event reports it.
func (s *Server) eventJob(ctx context.Context, e feed.Event) (db.Job, bool, error) {
	if e.JobID == nil || e.Topic != feed.TopicJob {
		return db.Job{}, false, nil
	}
	id := *e.JobID
	rows, err := s.dashboard.eventJobs.get(ctx, dashEventKey{e.Seq, id}, func(ctx context.Context) (map[uuid.UUID]db.Job, error) {
		return s.deps.Reads.JobRows(ctx, dashAllOrgs, []uuid.UUID{id})
	})
	if err != nil {
		return db.Job{}, false, err
	}
	j, ok := rows[id]
	if !ok {
		return db.Job{}, false, nil
	}
	return readmodel.JobAsOf(j, e), true, nil
}
