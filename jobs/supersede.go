package jobs

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/deferred"
	"asterion/jobs/provider"
	"asterion/jobs/registry"
)

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
		// to a submit, and the model must still be one the deployment lists.
		ask := admit.Request{Door: admit.DoorRetry, OrgID: old.OrgID, UserID: v.UserID, Text: prompt.Body,
			Model: optionsOf(old).Model}
		ticket, err := s.door.Admit(ctx, tx, &ask)
		if err != nil {
			return fmt.Errorf("retry job %s: %w", id, err)
		}
		w := db.NewWrites(tx)
		job, handle, err := s.enqueueTx(ctx, w, newJob{promptID: old.PromptID, priority: old.Priority,
			maxAttempts: old.MaxAttempts, options: old.ExecutionOptions, orgID: old.OrgID, userID: old.CreatedBy,
			correlation: prompt.CorrelationID, supersedes: &old.ID, model: ask.Model,
			tokens: provider.EstimateTokens(prompt.Body), ticket: ticket})
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
