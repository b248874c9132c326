package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/feed"
)

// change is one conditional state change of a job. Every state write goes through apply, which
// checks it against the state machine, makes it only if the row is still in an expected state
// (and, for a worker, still under its claim), mirrors it onto the operation and publishes the
// change-feed event, all in the caller's transaction.
type change struct {
	jobID uuid.UUID
	from  []State
	to    State
	// claim, when set, also requires worker_claim = claim.
	claim string
	// set adds column assignments to the UPDATE.
	set func(q *bun.UpdateQuery) *bun.UpdateQuery
	// result is stored on the operation when the job succeeds.
	result json.RawMessage
	// batch, when set, takes the writes that follow the job's own UPDATE (registry row,
	// history, event); the caller runs it. Without one, apply runs them before returning.
	batch *db.Batch
}

// errNoChange means the row was not in an expected state (or not under the claim): the caller
// decides whether that is a conflict or a result to drop.
var errNoChange = errors.New("job not in an expected state")

// apply performs ch in tx and returns the job as written.
func (s *Service) apply(ctx context.Context, tx bun.IDB, ch change) (db.Job, error) {
	if err := checkTransition(ch.to, ch.from...); err != nil {
		return db.Job{}, err
	}
	froms := make([]string, len(ch.from))
	for i, f := range ch.from {
		froms[i] = string(f)
	}
	q := tx.NewUpdate().Model((*db.Job)(nil)).Set("state = ?", string(ch.to)).
		Where("id = ?", ch.jobID).Where("state IN (?)", bun.In(froms))
	if ch.claim != "" {
		q = q.Where("worker_claim = ?", ch.claim)
	}
	if ch.set != nil {
		q = ch.set(q)
	}
	var job db.Job
	if err := q.Returning("*").Scan(ctx, &job); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return db.Job{}, errNoChange
		}
		return db.Job{}, fmt.Errorf("move job %s to %s: %w", ch.jobID, ch.to, err)
	}
	// The registry row, its history entry, the event and whatever the caller batched travel
	// to the database together, after the one read (the registry lock) they depend on.
	w := writesTo(tx, ch.batch)
	b := w.b
	opStatus := ""
	if job.OperationID != nil {
		var was string
		op, err := updateOperation(ctx, tx, b, *job.OperationID, func(op *db.Operation) {
			was = op.Status
			op.Status = operationStatusOf(job, op.Status)
			if ch.to == StateSucceeded {
				op.Result = ch.result
			}
			if job.ErrorKind != nil && ch.to != StateSucceeded {
				op.LastErrorKind, op.LastErrorMessage = job.ErrorKind, job.ErrorMessage
			}
		})
		if err != nil {
			return db.Job{}, err
		}
		if err := s.afterOperationChange(ctx, tx, b, was, op); err != nil {
			return db.Job{}, err
		}
		opStatus = op.Status
	}
	if err := publishJob(ctx, tx, b, job, opStatus); err != nil {
		return db.Job{}, err
	}
	if err := w.flush(ctx); err != nil {
		return db.Job{}, fmt.Errorf("move job %s to %s: %w", ch.jobID, ch.to, err)
	}
	return job, nil
}

// JobEvent is the data of a job.state_changed event (CONTRACT.md), plus the operation's status.
type JobEvent struct {
	PromptID        uuid.UUID  `json:"prompt_id"`
	JobID           uuid.UUID  `json:"job_id"`
	State           string     `json:"state"`
	Attempt         int        `json:"attempt"`
	ErrorKind       *string    `json:"error_kind"`
	ResponseID      *uuid.UUID `json:"response_id"`
	UpdatedAt       time.Time  `json:"updated_at"`
	OperationID     *uuid.UUID `json:"operation_id,omitempty"`
	OperationStatus string     `json:"operation_status,omitempty"`
	Priority        int        `json:"priority"`
}

// publishJob writes the job's change-feed event through b, or at once when b is nil.
func publishJob(ctx context.Context, tx bun.IDB, b *db.Batch, job db.Job, opStatus string) error {
	payload, err := json.Marshal(JobEvent{PromptID: job.PromptID, JobID: job.ID, State: job.State, Attempt: job.Attempt,
		ErrorKind: job.ErrorKind, ResponseID: job.ResponseID, UpdatedAt: job.UpdatedAt.UTC(),
		OperationID: job.OperationID, OperationStatus: opStatus, Priority: job.Priority})
	if err != nil {
		return err
	}
	w := writesTo(tx, b)
	if err := w.add(feed.Insert(tx, feed.Event{Topic: feed.TopicJob, OrgID: job.OrgID, UserID: job.CreatedBy,
		PromptID: &job.PromptID, JobID: &job.ID, OperationID: job.OperationID, Payload: payload})); err != nil {
		return fmt.Errorf("publish job event: %w", err)
	}
	return w.flush(ctx)
}

// audit writes one structural audit row.
func audit(ctx context.Context, tx bun.IDB, orgID int64, actorID *int64, actor, action, subjectType, subjectID string, detail any) error {
	q, err := auditEntry(tx, orgID, actorID, actor, action, subjectType, subjectID, detail)
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("audit %s on %s %s: %w", action, subjectType, subjectID, err)
	}
	return nil
}

// auditEntry is the statement audit runs, for a caller that batches it.
func auditEntry(tx bun.IDB, orgID int64, actorID *int64, actor, action, subjectType, subjectID string, detail any) (*bun.InsertQuery, error) {
	raw, err := json.Marshal(detail)
	if err != nil {
		return nil, fmt.Errorf("audit %s on %s %s: %w", action, subjectType, subjectID, err)
	}
	row := db.AuditEntry{OrgID: orgID, ActorID: actorID, Actor: actor, Action: action, SubjectType: subjectType,
		SubjectID: subjectID, Detail: raw}
	return tx.NewInsert().Model(&row), nil
}
