package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/fairshare"
	"asterion/jobs/governor"
	"asterion/jobs/provider"
)

// What a queued job waits for, recorded on the job as waiting_for.
const (
	// WaitingProviderCapacity: the provider's limits (or an operator's pause of its model)
	// leave no call slot yet.
	WaitingProviderCapacity = "provider_capacity"
	// WaitingOrgShare: the job's org already runs its share of the workers.
	WaitingOrgShare = fairshare.WaitingOrgShare
	// WaitingOrgPaused: an operator paused the job's org.
	WaitingOrgPaused = fairshare.WaitingOrgPaused
)

// pausedModelRecheck is how often a worker looks again at a model an operator paused.
const pausedModelRecheck = 5 * time.Second

// showWaitAfter is the shortest wait worth saying on the job: a slot a moment away is not.
const showWaitAfter = 250 * time.Millisecond

// optionsOf reads a job's execution options; unreadable options are the defaults.
func optionsOf(j db.Job) ExecutionOptions {
	var o ExecutionOptions
	_ = json.Unmarshal(j.ExecutionOptions, &o)
	return o
}

// modelOf is the model a call asks for: the prompt's, or the provider's default.
func (s *calls) modelOf(asked string) string {
	if asked != "" {
		return asked
	}
	if m, ok := s.cfg.Provider.(defaultModeler); ok {
		return m.DefaultModel()
	}
	return s.cfg.Provider.Name()
}

// awaitProviderSlot asks the governor for a call slot for the job a vehicle carries, before
// the job is claimed: a slot soon is waited for here, the job still queued; a slot beyond the
// governor's horizon, or a paused model, gives the vehicle back for later with the job saying
// why (river.JobSnooze: no attempt spent). A slot waited for is held against the model's
// pauses again when it comes. nil means the call may start now.
func (s *calls) awaitProviderSlot(ctx context.Context, args PromptArgs) error {
	g := s.cfg.Governor
	if g == nil {
		return nil
	}
	model := s.modelOf(args.Model)
	grant, err := g.Reserve(ctx, model, args.Tokens)
	if err != nil {
		return fmt.Errorf("provider slot for job %s: %w", args.JobID, err)
	}
	if grant.Granted {
		// The slot, on the database's clock, is what the governor promises about: a call
		// starts at it or, on a loaded machine, later. The line lets an operator (and a test
		// of several processes) hold the calls' starts against the slots they were given.
		s.log.Debug("provider call slot granted", "job_id", args.JobID, "model", model, "slot", grant.At, "wait", grant.Wait)
	}
	switch {
	case grant.Paused:
		s.markWaiting(ctx, args.JobID, WaitingProviderCapacity)
		return river.JobSnooze(pausedModelRecheck)
	case !grant.Granted:
		// The slot is never later than the pause that holds the model ends, and that pause
		// is at most MaxPause away; bounding the sleep by both keeps a vehicle from outliving
		// its reason even if the row said otherwise. A resume wakes it sooner.
		s.markWaiting(ctx, args.JobID, WaitingProviderCapacity)
		return river.JobSnooze(min(grant.Wait, g.MaxPause()))
	case grant.Wait <= 0:
		return nil
	}
	if grant.Wait >= showWaitAfter {
		s.markWaiting(ctx, args.JobID, WaitingProviderCapacity)
	}
	t := time.NewTimer(grant.Wait)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return ctx.Err()
	}
	// A 429 or an operator's pause that arrived while the slot was waited for holds this
	// call too. A call granted at once skips the read: whatever held the model then is in
	// its slot, and one arriving since is as much in flight as the call itself.
	hold, err := g.Held(ctx, model)
	switch {
	case err != nil:
		return fmt.Errorf("provider slot for job %s: %w", args.JobID, err)
	case hold.Paused:
		s.markWaiting(ctx, args.JobID, WaitingProviderCapacity)
		return river.JobSnooze(pausedModelRecheck)
	case hold.Wait > 0:
		s.markWaiting(ctx, args.JobID, WaitingProviderCapacity)
		return river.JobSnooze(min(hold.Wait, g.MaxPause()))
	}
	return nil
}

// maxPause is the longest one provider answer may hold anything: the governor's MaxPause, or
// its default without a governor.
func maxPauseOf(g *governor.Governor) time.Duration {
	if g != nil {
		return g.MaxPause()
	}
	return governor.DefaultMaxPause
}

// markWaiting records why a queued job waits. A failure to say so changes nothing of the
// job's fate, so it is logged, not returned.
func (s *calls) markWaiting(ctx context.Context, jobID uuid.UUID, why string) {
	if _, err := s.db.DB.ExecContext(ctx, markWaitingSQL, jobID, why); err != nil && ctx.Err() == nil {
		s.log.Warn("recording what a job waits for failed", "job_id", jobID, "waiting_for", why, "err", err)
	}
}

// observeProvider tells the governor what the provider said of a call: its rate-limit
// figures, a 429 and its Retry-After, and the tokens used against those reserved.
func (s *calls) observeProvider(ctx context.Context, model string, reserved int, resp provider.Response, callErr error) {
	g := s.cfg.Governor
	if g == nil {
		return
	}
	o := governor.Observation{ReservedTokens: reserved}
	if callErr == nil {
		o.Limits = resp.Limits
		o.UsedTokens = resp.PromptTokens + resp.CompletionTokens
	} else {
		perr := provider.Classify(callErr)
		o.Limits = perr.Limits
		o.RateLimited = perr.Kind == provider.KindRateLimit
		o.RetryAfter, o.HasRetryAfter = perr.RetryAfter, perr.HasRetryAfter
		o.UsedTokens = perr.Partial.PromptTokens + perr.Partial.CompletionTokens
	}
	if err := g.Observe(ctx, model, o); err != nil {
		s.log.Warn("telling the provider governor what a call said failed", "model", model, "err", err)
	}
}

// WaitingBudget: the job's org has its budget held by its period's usage and its running
// jobs; the job starts once the period ends or the budget is raised or cleared.
const WaitingBudget = "budget"

// budgetRecheck is the longest a vehicle of a job waiting for its org's budget sleeps before
// it looks again: a budget raised or cleared is seen within it.
const budgetRecheck = 15 * time.Second

// budgetWaitOf is the claim's answer to a start admission refused: wait until the period
// resets, or budgetRecheck, whichever comes first.
func budgetWaitOf(err error) claimResult {
	wait := budgetRecheck
	var bw *admit.BudgetWaitError
	if errors.As(err, &bw) {
		wait = min(wait, max(time.Until(bw.Resets), time.Second))
	}
	return claimResult{outcome: claimWait, wait: wait, reason: "the org's budget is held by its usage and running jobs"}
}
