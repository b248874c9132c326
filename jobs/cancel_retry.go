package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/deferred"
	"asterion/jobs/provider"
	"asterion/jobs/registry"
)

// How a cancel landed, recorded on the job as cancel_outcome.
const (
	// CancelBeforeStart: the job was queued and never reached the provider.
	CancelBeforeStart = "before_start"
	// CancelAborted: the provider call was in flight and was cut.
	CancelAborted = "aborted"
)

// lockVisible locks a job the viewer may see, or returns ErrNotFound (also for another org's
// id, so existence never leaks).
func lockVisible(ctx context.Context, tx bun.Tx, v Viewer, id uuid.UUID) (db.Job, error) {
	var job db.Job
	err := tx.NewSelect().Model(&job).Where("id = ?", id).For("UPDATE").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Sees(job.OrgID, job.CreatedBy)) {
		return db.Job{}, fmt.Errorf("job %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return db.Job{}, fmt.Errorf("lock job %s: %w", id, err)
	}
	return job, nil
}

// Cancel ends a queued or running job as cancelled. A queued job never runs; a running job's
// adapter call is abandoned through River's job cancellation, whichever process runs it, and
// its late result is dropped because finalising requires state running. A terminal job gives
// ErrConflict.
func (s *Service) Cancel(ctx context.Context, v Viewer, id uuid.UUID, actor Actor) (db.Job, error) {
	var out db.Job
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		job, err := lockVisible(ctx, tx, v, id)
		if err != nil {
			return err
		}
		out, err = s.cancelTx(ctx, tx, job, "", actor)
		return err
	})
	return out, err
}

// cancelTx cancels a locked job; errorKind marks why (KindExpired for an expired operation).
func (s *Service) cancelTx(ctx context.Context, tx bun.Tx, job db.Job, errorKind string, actor Actor) (db.Job, error) {
	if State(job.State).Terminal() {
		return db.Job{}, fmt.Errorf("cancel job %s: it is %s: %w", job.ID, job.State, ErrConflict)
	}
	// A running job's provider call is cut by River's cancellation; a queued one never reached
	// the provider. The job row says which, in the cancel's own transaction.
	outcome := CancelBeforeStart
	if State(job.State) == StateRunning {
		outcome = CancelAborted
	}
	w := db.NewWrites(tx)
	out, err := s.apply(ctx, w, change{jobID: job.ID, from: []State{StateQueued, StateRunning}, to: StateCancelled,
		set: append(cancelledSet(errorKind), is("cancel_outcome = ?", outcome))})
	if errors.Is(err, errNoChange) {
		return db.Job{}, fmt.Errorf("cancel job %s: %w", job.ID, ErrConflict)
	}
	if err == nil {
		err = w.Send(ctx)
	}
	if err != nil {
		return db.Job{}, err
	}
	if job.RiverJobID != nil {
		if _, err := s.insert.JobCancelTx(ctx, tx.Tx, *job.RiverJobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return db.Job{}, fmt.Errorf("cancel river job of %s: %w", job.ID, err)
		}
	}
	return out, audit(ctx, tx, job.OrgID, actor.UserID, actor.Name, "job.cancelled", "job", job.ID.String(),
		map[string]any{"from": job.State, "error_kind": errorKind})
}

// cancelledSet is what a cancel writes besides the state: an expiry also names itself.
func cancelledSet(errorKind string) []clause {
	if errorKind == "" {
		return []clause{is("finished_at = now()")}
	}
	return []clause{is("finished_at = now()"), is("error_kind = ?", errorKind),
		is("error_message = ?", "the operation expired before the work finished")}
}

// Retried is the answer to a retry: the new job and its operation.
type Retried struct {
	Job       db.Job
	Operation deferred.Handle
}

// Retry supersedes a succeeded, failed or cancelled job with a new job for the same prompt
// (attempt 1, supersedes the old), which becomes superseded.
// A queued, running or already superseded job gives ErrConflict.
func (s *Service) Retry(ctx context.Context, v Viewer, id uuid.UUID, actor Actor) (Retried, error) {
	var out Retried
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		old, err := lockVisible(ctx, tx, v, id)
		if err != nil {
			return err
		}
		switch State(old.State) {
		case StateSucceeded, StateFailed, StateCancelled:
		default:
			return fmt.Errorf("retry job %s: it is %s: %w", id, old.State, ErrConflict)
		}
		var prompt db.Entity
		if err := tx.NewSelect().Model(&prompt).Where("id = ?", old.PromptID).Scan(ctx); err != nil {
			return fmt.Errorf("load prompt %s: %w", old.PromptID, err)
		}
		// A retry is new work: the org's budget, quota and the caller's rate apply to it as
		// to a submit, and the model must still be one the deployment lists. It reserves what
		// its submit did: the tokens of all the provider reads and the job's max_tokens.
		input, err := promptInput(prompt)
		if err != nil {
			return err
		}
		opts := optionsOf(old)
		ask := admit.Request{Door: admit.DoorRetry, OrgID: old.OrgID, UserID: v.UserID, Text: prompt.Body,
			Input: input, Model: opts.Model}
		if opts.MaxTokens != nil {
			ask.MaxTokens = *opts.MaxTokens
		}
		ticket, err := s.door.Admit(ctx, tx, &ask)
		if err != nil {
			return fmt.Errorf("retry job %s: %w", id, err)
		}
		w := db.NewWrites(tx)
		job, handle, err := s.enqueueTx(ctx, w, newJob{promptID: old.PromptID, priority: old.Priority,
			maxAttempts: old.MaxAttempts, options: old.ExecutionOptions, orgID: old.OrgID, userID: old.CreatedBy,
			correlation: prompt.CorrelationID, supersedes: &old.ID, model: ask.Model,
			tokens: provider.EstimateTokens(input), ticket: ticket})
		if err != nil {
			return err
		}
		if _, err := s.apply(ctx, w, change{jobID: old.ID, from: []State{State(old.State)}, to: StateSuperseded}); err != nil {
			return err
		}
		if old.OperationID != nil {
			if _, err := registry.UpdateOperation(ctx, w, *old.OperationID, func(op *db.Operation) {
				op.SuccessorID = &handle.OperationID
			}); err != nil {
				return err
			}
		}
		if err := w.Send(ctx); err != nil {
			return err
		}
		out = Retried{Job: job, Operation: handle}
		return audit(ctx, tx, old.OrgID, actor.UserID, actor.Name, "job.retried", "job", old.ID.String(),
			map[string]any{"new_job_id": job.ID})
	})
	return out, err
}
