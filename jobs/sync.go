package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/deferred"
	"asterion/jobs/fairshare"
	"asterion/jobs/provider"
)

// SyncResult is the outcome of RunSync.
type SyncResult struct {
	Job      db.Job
	Response *db.Entity
}

// RunSync runs one prompt in-process, the synchronous path of design phase 1: the prompt and
// its job row are written, the provider is called once (max_attempts 1, no queue), and the job
// ends succeeded or failed like any other, with its registry row and change-feed events.
//
// Flow control holds it as it holds a worker's claim: it waits for its call's slot of the
// provider governor, and an org that is paused or at its cap of running jobs, or a model an
// operator paused, refuses it (ErrHeld) rather than leave a terminal waiting without end.
func (s *Service) RunSync(ctx context.Context, v Viewer, text string) (SyncResult, error) {
	one := 1
	req := SubmitRequest{Viewer: v, Prompt: text, MaxAttempts: &one}
	if err := req.validate(s.door); err != nil {
		return SyncResult{}, err
	}
	if err := s.door.Check(ctx, &req.adm); err != nil {
		return SyncResult{}, err
	}
	req.Options.Model = req.adm.Model
	if err := s.calls.awaitSyncSlot(ctx, req.Options.Model, provider.EstimateTokens(req.Prompt)); err != nil {
		return SyncResult{}, err
	}
	var job db.Job
	claim := newClaim("sync")
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		paused, err := orgPaused(ctx, tx, v.OrgID)
		if err != nil {
			return err
		}
		if paused {
			return fmt.Errorf("run prompt now: an operator paused the work of org %d: %w", v.OrgID, ErrHeld)
		}
		if err := s.share.UnderRunningCap(ctx, tx, v.OrgID); errors.Is(err, fairshare.ErrAtCap) {
			return fmt.Errorf("run prompt now: org %d runs its most jobs at once: %w", v.OrgID, ErrHeld)
		} else if err != nil {
			return err
		}
		grants, err := s.door.Reserve(ctx, tx, []*admit.Request{&req.adm})
		if err != nil {
			return err
		}
		if grants[0].Err != nil {
			return grants[0].Err
		}
		// The job starts at once: the budget's start rule applies to it as to a claim.
		if err := s.door.Start(ctx, tx, v.OrgID); err != nil {
			return fmt.Errorf("run prompt now: %w", err)
		}
		promptID, jobID := uuid.New(), uuid.New()
		prompt := db.Entity{ID: promptID, Kind: "prompt", Body: req.Prompt, CorrelationID: promptID, TruthClass: "authored",
			StateClass: "open", OrgID: v.OrgID, CreatedBy: v.UserID}
		if _, err := tx.NewInsert().Model(&prompt).Exec(ctx); err != nil {
			return fmt.Errorf("insert prompt: %w", err)
		}
		now, err := txNow(ctx, tx)
		if err != nil {
			return err
		}
		handle, err := deferred.NewHandle(deferred.HandleRequest{Kind: KindPromptExecute, Owner: OwnerPromptRuntime,
			Subject: map[string]string{"prompt_id": promptID.String(), "job_id": jobID.String()}, CorrelationID: promptID.String(),
			RetryAfterSeconds: DefaultRetryAfterSeconds}, s.cfg.Policy, now)
		if err != nil {
			return err
		}
		w := db.NewWrites(tx)
		if _, err := s.reg.RecordAccepted(w, handle, v.OrgID, v.UserID, promptID); err != nil {
			return err
		}
		opts, _ := json.Marshal(req.Options)
		queued := db.Job{ID: jobID, PromptID: promptID, State: string(StateQueued), Priority: *req.Priority, Attempt: 1,
			MaxAttempts: 1, ExecutionOptions: opts, OrgID: v.OrgID, CreatedBy: v.UserID, OperationID: &handle.OperationID,
			BudgetTokens: grants[0].Ticket.Tokens()}
		w.Insert(queued.InsertStatement())
		// The job's UPDATE sends the registry row and the job before it runs.
		job, err = s.apply(ctx, w, change{jobID: jobID, from: []State{StateQueued}, to: StateRunning,
			set: []clause{is("worker_claim = ?", claim), is("claimed_at = now()"), is("started_at = now()"),
				is("running_heartbeat_at = now()")}})
		if err != nil {
			return err
		}
		return w.Send(ctx)
	})
	if err != nil {
		return SyncResult{}, err
	}
	out := s.runClaimed(ctx, job, claim, nil)
	if out.err != nil {
		return SyncResult{}, out.err
	}
	var final db.Job
	if err := s.db.NewSelect().Model(&final).Where("id = ?", job.ID).Scan(ctx); err != nil {
		return SyncResult{}, fmt.Errorf("reload job %s: %w", job.ID, err)
	}
	res := SyncResult{Job: final}
	if final.ResponseID != nil {
		var r db.Entity
		if err := s.db.NewSelect().Model(&r).Where("id = ?", *final.ResponseID).Scan(ctx); err != nil {
			return res, fmt.Errorf("load response: %w", err)
		}
		res.Response = &r
	}
	return res, nil
}

// awaitSyncSlot waits for the provider governor's slot of a synchronous call to model: as a
// worker's call, it starts no sooner than its slot. A model an operator paused is ErrHeld.
func (s *calls) awaitSyncSlot(ctx context.Context, model string, tokens int) error {
	g := s.cfg.Governor
	if g == nil {
		return nil
	}
	model = s.modelOf(model)
	for {
		grant, err := g.Reserve(ctx, model, tokens)
		if err != nil {
			return fmt.Errorf("run prompt now: %w", err)
		}
		if grant.Paused {
			return fmt.Errorf("run prompt now: an operator paused model %s: %w", model, ErrHeld)
		}
		if grant.Wait > 0 {
			t := time.NewTimer(grant.Wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
		}
		if grant.Granted {
			return nil
		}
	}
}
