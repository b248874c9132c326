package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// Operations is the registry's API as the server reaches it through the service (which
// embeds it): status, poll-now and cancel of a visible operation, its history, the poller's
// counters, owner registration.
type Operations struct{ reg *registry.Registry }

// RegisterOwner adds the owner of another operation kind to the service's registry.
func (s *Operations) RegisterOwner(o Owner) { s.reg.Register(o) }

// History returns an operation's status history, oldest first.
func (s *Operations) History(ctx context.Context, id uuid.UUID) ([]deferred.HistoryEntry, error) {
	return s.reg.History(ctx, id)
}

// StatusAndSuccessor returns the status document of a visible operation and the id of the
// operation that superseded it, if any, from one read.
func (s *Operations) StatusAndSuccessor(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, *uuid.UUID, error) {
	return s.reg.StatusAndSuccessor(ctx, v, id)
}

// OperationStatus returns the status document of a visible operation.
func (s *Operations) OperationStatus(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, error) {
	return s.reg.OperationStatus(ctx, v, id)
}

// Stats returns the poller's counters.
func (s *Operations) Stats() *PollerStats { return s.reg.Stats() }

// PollOperation polls the owning runtime now and returns the resulting status document.
func (s *Operations) PollOperation(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, error) {
	return s.reg.PollOperation(ctx, v, id)
}

// CancelOperation cancels through the owner; a terminal operation is ErrConflict and a
// non-cancelable one *ErrNotCancelable with its reason.
func (s *Operations) CancelOperation(ctx context.Context, v Viewer, id uuid.UUID, actor Actor) (deferred.StatusDoc, error) {
	return s.reg.CancelOperation(ctx, v, id, actor)
}

// PollDue polls every due, non-terminal operation once through its owner.
func (s *Operations) PollDue(ctx context.Context) (int, error) { return s.reg.PollDue(ctx) }

// KindPromptExecute is the deferred-operation kind of a prompt job.
const KindPromptExecute = "prompt.execute"

// OwnerPromptRuntime is the component that owns prompt jobs.
const OwnerPromptRuntime = "asterion.jobs"

// StatusDocOf builds the deferred-operation-status.v1 document of a registry row.
func StatusDocOf(op db.Operation) (deferred.StatusDoc, error) { return registry.StatusDocOf(op) }

// The registry's types as the service's callers name them.
type (
	// Owner is an owning runtime of deferred operations (registry.Owner).
	Owner = registry.Owner
	// Report is an owner's view of one operation (registry.Report).
	Report = registry.Report
	// ErrNotCancelable means the operation's owner cannot cancel it now.
	ErrNotCancelable = registry.ErrNotCancelable
	// Actor names who acts, for the audit trail.
	Actor = registry.Actor
	// PollerStats counts what the poller did, for /metrics.
	PollerStats = registry.PollerStats
)

// operationStatusOf maps a prompt job onto its operation's status: the one table of that
// mapping. A superseded job leaves the operation's terminal status alone.
//
//	queued → pending, running → running, succeeded → completed,
//	failed → timed-out when error_kind is stuck or timeout, else failed,
//	cancelled → expired when error_kind is expired, else cancelled.
func operationStatusOf(j db.Job, current string) string {
	switch State(j.State) {
	case StateQueued:
		return string(deferred.StatusPending)
	case StateRunning:
		return string(deferred.StatusRunning)
	case StateSucceeded:
		return string(deferred.StatusCompleted)
	case StateFailed:
		if k := deref(j.ErrorKind); k == KindStuck || k == "timeout" {
			return string(deferred.StatusTimedOut)
		}
		return string(deferred.StatusFailed)
	case StateCancelled:
		if deref(j.ErrorKind) == KindExpired {
			return string(deferred.StatusExpired)
		}
		return string(deferred.StatusCancelled)
	}
	return current
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// promptOwner owns prompt.execute: the prompt jobs.
type promptOwner struct{ s *Service }

func (promptOwner) Kind() string { return KindPromptExecute }

// MirrorsStatus: every job transition updates the registry row in its own transaction (apply).
func (promptOwner) MirrorsStatus() bool { return true }

// job reads the job of op, locked FOR UPDATE when lock. A job's operation is written with it,
// and the operation's subject names it, so the read goes by primary key: sa_job has no index
// on operation_id, which is only the way for a subject that names no job.
func (o promptOwner) job(ctx context.Context, tx bun.IDB, op db.Operation, lock bool) (db.Job, error) {
	var job db.Job
	q := tx.NewSelect().Model(&job).Where("operation_id = ?", op.ID)
	var subject struct {
		JobID uuid.UUID `json:"job_id"`
	}
	if json.Unmarshal(op.Subject, &subject) == nil && subject.JobID != uuid.Nil {
		q = q.Where("id = ?", subject.JobID)
	}
	if lock {
		q = q.For("UPDATE")
	}
	err := q.Scan(ctx)
	return job, err
}

func (o promptOwner) Report(ctx context.Context, tx bun.Tx, op db.Operation) (Report, error) {
	job, err := o.job(ctx, tx, op, false)
	if errors.Is(err, sql.ErrNoRows) {
		return Report{Status: deferred.StatusUnknown, ErrorKind: "unknown", ErrorMessage: "the job of this operation no longer exists"}, nil
	}
	if err != nil {
		return Report{}, err
	}
	r := Report{Status: deferred.Status(operationStatusOf(job, op.Status)), ErrorKind: deref(job.ErrorKind), ErrorMessage: deref(job.ErrorMessage)}
	if job.ResponseID != nil {
		r.Result, _ = json.Marshal(map[string]string{"prompt_id": job.PromptID.String(), "job_id": job.ID.String(), "response_id": job.ResponseID.String()})
	}
	return r, nil
}

func (o promptOwner) Cancel(ctx context.Context, tx bun.Tx, op db.Operation, errorKind string, actor Actor) error {
	job, err := o.job(ctx, tx, op, true)
	if err != nil {
		return fmt.Errorf("lock job of operation %s: %w", op.ID, err)
	}
	_, err = o.s.cancelTx(ctx, tx, job, errorKind, actor)
	return err
}

func (promptOwner) Consume(context.Context, bun.Tx, db.Operation) error { return nil }
