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
)

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
