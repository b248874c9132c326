package chain

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// Kind is the operation kind the chain owner registers.
func (*Chains) Kind() string { return Kind }

// Report maps the chain row onto the registry (the status mapping in the package comment).
func (c *Chains) Report(ctx context.Context, tx bun.Tx, op db.Operation) (registry.Report, error) {
	var ch Chain
	err := tx.NewSelect().Model(&ch).Where("operation_id = ?", op.ID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return registry.Report{Status: deferred.StatusUnknown, ErrorKind: "unknown", ErrorMessage: "no chain belongs to this operation"}, nil
	}
	if err != nil {
		return registry.Report{}, fmt.Errorf("read chain of operation %s: %w", op.ID, err)
	}
	switch ch.State {
	case Running:
		return registry.Report{Status: deferred.StatusRunning}, nil
	case Completed:
		return registry.Report{Status: deferred.StatusCompleted, Result: ch.Result}, nil
	case Cancelled:
		return registry.Report{Status: deferred.StatusCancelled}, nil
	case Expired:
		return registry.Report{Status: deferred.StatusExpired, ErrorKind: jobs.KindExpired, ErrorMessage: "the chain expired before its last step finished"}, nil
	}
	var diag Diagnostic
	_ = json.Unmarshal(ch.Diagnostic, &diag)
	kind := deref(op.LastErrorKind)
	if kind == "" {
		kind = "step_" + diag.Status
	}
	msg := diag.Message
	if msg == "" {
		msg = "the chain failed"
	}
	return registry.Report{Status: deferred.StatusFailed, ErrorKind: kind, ErrorMessage: msg}, nil
}

// Cancel ends a running chain (cancelled, or expired for errorKind expired) and cancels the
// job of the step it waits for. Lock order: the chain row, the step's job, its operation; the
// caller then records the chain operation's terminal status.
func (c *Chains) Cancel(ctx context.Context, tx bun.Tx, op db.Operation, errorKind string, actor registry.Actor) error {
	var ch Chain
	if err := tx.NewSelect().Model(&ch).Where("operation_id = ?", op.ID).For("UPDATE").Scan(ctx); err != nil {
		return fmt.Errorf("lock chain of operation %s: %w", op.ID, err)
	}
	if ch.State != Running {
		return fmt.Errorf("cancel chain %s: it is %s: %w", ch.ID, ch.State, jobs.ErrConflict)
	}
	var cur StepRow
	err := tx.NewSelect().Model(&cur).Where("chain_id = ? AND step = ?", ch.ID, ch.CurrentStep).Scan(ctx)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("current step of chain %s: %w", ch.ID, err)
	}
	var job *db.Job
	if err == nil && cur.JobID != nil && cur.State == "suspended" {
		// A step that settles locks job → its operation → the chain row; this side holds the
		// chain row already, so it never waits for the job: a job locked right now is being
		// finalised or heartbeated, and the attempt is refused as busy; CancelOperation
		// retries it in a fresh transaction, after the other side let go.
		var jobs []db.Job
		if err := tx.NewSelect().Model(&jobs).Where("id = ?", *cur.JobID).For("UPDATE SKIP LOCKED").Scan(ctx); err != nil {
			return fmt.Errorf("lock job of chain %s step %d: %w", ch.ID, cur.Step, err)
		}
		if len(jobs) == 0 {
			return &registry.ErrNotCancelable{Reason: fmt.Sprintf("step %d is being finalised right now; try again", cur.Step), Busy: true}
		}
		job = &jobs[0]
	}
	to := Cancelled
	if errorKind == jobs.KindExpired {
		to = Expired
	}
	if _, err := tx.NewUpdate().Model((*Chain)(nil)).Set("state = ?", to).Set("finished_at = now()").
		Where("id = ?", ch.ID).Exec(ctx); err != nil {
		return fmt.Errorf("cancel chain %s: %w", ch.ID, err)
	}
	if err := skipRemainingSteps(ctx, tx, ch.ID); err != nil {
		return err
	}
	if job != nil && !jobs.State(job.State).Terminal() {
		// The chain is no longer running, so the step's settlement resumes nothing.
		if _, err := c.jobs.CancelJobTx(ctx, tx, *job, errorKind, actor); err != nil && !errors.Is(err, jobs.ErrConflict) {
			return err
		}
		stepState := string(deferred.StatusCancelled)
		if errorKind == jobs.KindExpired {
			stepState = string(deferred.StatusExpired)
		}
		if _, err := tx.NewUpdate().Model((*StepRow)(nil)).Set("state = ?", stepState).
			Where("chain_id = ? AND step = ?", ch.ID, cur.Step).Exec(ctx); err != nil {
			return fmt.Errorf("record chain %s step %d: %w", ch.ID, cur.Step, err)
		}
	}
	return jobs.Audit(ctx, tx, ch.OrgID, actor.UserID, actor.Name, "chain."+to, "chain", ch.ID.String(),
		map[string]any{"step": ch.CurrentStep})
}

// Consume ends the chain row when the registry settles the chain operation itself (expired by
// the poller while a step was being finalised, unknown): a chain never outlives its operation.
func (c *Chains) Consume(ctx context.Context, tx bun.Tx, op db.Operation) error {
	to := Failed
	switch deferred.Status(op.Status) {
	case deferred.StatusCompleted:
		return nil
	case deferred.StatusCancelled:
		to = Cancelled
	case deferred.StatusExpired:
		to = Expired
	}
	res, err := tx.NewUpdate().Model((*Chain)(nil)).Set("state = ?", to).Set("finished_at = now()").
		Where("operation_id = ? AND state = ?", op.ID, Running).Exec(ctx)
	if err != nil {
		return fmt.Errorf("end chain of operation %s: %w", op.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		var id uuid.UUID
		if err := tx.NewSelect().Model((*Chain)(nil)).Column("id").Where("operation_id = ?", op.ID).Scan(ctx, &id); err != nil {
			return err
		}
		return skipRemainingSteps(ctx, tx, id)
	}
	return nil
}
