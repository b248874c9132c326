package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"asterion/db"
	"asterion/jobs/fairshare"
	"asterion/jobs/intake"
)

// Worker is the River worker of prompt jobs.
//
// How River's attempt counting and retry scheduling agree with sa_job: every fetch of a
// vehicle runs at most one sa_job attempt. A retryable failure re-queues the job row
// (attempt+1, backoff in scheduled_at) and returns river.JobSnooze with the same backoff;
// River does not count a snooze as an attempt and never schedules a retry of its own for it.
// A final outcome (succeeded, failed, dropped) ends the vehicle: nil for success, JobCancel
// otherwise, so River never retries a job the row considers finished. Only an infrastructure
// error (the database unreachable while claiming or finalising) is returned as a plain error;
// River's retry of that vehicle then meets the row still running under the dead claim and
// reclaims it by the heartbeat rule. So sa_job.attempt is the one attempt counter.
type Worker struct {
	river.WorkerDefaults[PromptArgs]
	svc      *Service
	workerID string
	ceiling  int
	timeout  time.Duration
	// budget, when non-nil, is decremented per claim; at zero further jobs are declined.
	budget   *atomic.Int64
	inFlight atomic.Int64
	done     atomic.Int64
	// middleware wraps every job's work (tracing; nil when off).
	middleware []rivertype.WorkerMiddleware
	// cuts is the pool's graceful stop: no claim once it drains, every call cut after the grace.
	cuts shutdownCuts
}

// Middleware is the worker middleware of prompt jobs: their spans, when tracing is on.
func (w *Worker) Middleware(*rivertype.JobRow) []rivertype.WorkerMiddleware { return w.middleware }

// Timeout overrides River's default one-minute JobTimeout: the adapter may take 180 s. A job
// may first wait for a provider slot, up to the governor's horizon, which must not eat into its
// execution's time (Work gives the execution its own deadline).
func (w *Worker) Timeout(*river.Job[PromptArgs]) time.Duration {
	if g := w.svc.cfg.Governor; g != nil {
		return w.timeout + g.Horizon()
	}
	return w.timeout
}

// Work claims, runs and finalises one job, translating the outcome for River.
func (w *Worker) Work(ctx context.Context, rj *river.Job[PromptArgs]) error {
	if w.budget != nil && w.budget.Add(-1) < 0 {
		return river.JobSnooze(0)
	}
	w.inFlight.Add(1)
	worked := true
	defer func() {
		w.inFlight.Add(-1)
		if worked {
			w.done.Add(1)
		}
	}()
	ctx, untrack := w.cuts.track(ctx)
	defer untrack()
	// Which job rides this vehicle first (fair share between orgs), then the provider's
	// capacity for it: a job that must wait stays queued and spends nothing.
	d, args, err := w.dispatch(ctx, rj, w.ceiling)
	if err != nil {
		return w.unclaimed(ctx, err)
	}
	switch d.Outcome {
	case fairshare.Decline:
		// Not ours to run (above the worker's priority ceiling): give the vehicle straight back
		// for an unrestricted worker. The vehicle's arguments cannot tell beforehand: a
		// fair-share swap may have put a job of another priority on it.
		worked = false
		if w.budget != nil {
			w.budget.Add(1)
		}
		return river.JobSnooze(0)
	case fairshare.Wait:
		w.svc.calls.markWaiting(ctx, args.JobID, d.WaitingFor)
		return river.JobSnooze(d.Wait)
	}
	if err := w.svc.calls.awaitProviderSlot(ctx, args); err != nil {
		return w.unclaimed(ctx, err)
	}
	// The execution gets the whole job timeout, however long the slot took.
	ctx, cancelExec := context.WithTimeout(ctx, w.timeout)
	defer cancelExec()
	// Submits of this process first (package intake): an accepted job loses nothing by waiting.
	w.svc.intake.Yield(ctx)
	if w.cuts.isDraining() {
		// A stopping process claims nothing new: the vehicle goes back for another process.
		return river.JobSnooze(0)
	}
	admitted := w.svc.intake.Transaction(ctx, intake.Claim)
	res, err := w.svc.claim(ctx, args.JobID, args.OrgID, rj.ID, w.workerID)
	admitted()
	if err != nil {
		return fmt.Errorf("claim job %s: %w", args.JobID, err)
	}
	switch res.outcome {
	case claimDrop:
		return river.JobCancel(errors.New(res.reason))
	case claimWait:
		return river.JobSnooze(res.wait)
	}
	out := w.svc.runClaimed(ctx, res.job, res.claim, res.prompt)
	// The running slot this execution held goes to its org's next refused job at once.
	pctx, cancelPass := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	w.svc.share.PassOn(pctx, res.job.OrgID)
	cancelPass()
	switch {
	case out.err != nil:
		return out.err
	case out.handedBack:
		return river.JobCancel(errHandedBack)
	case out.dropped:
		return w.dropped(ctx, res.job, rj.ID)
	case out.state == StateSucceeded:
		return nil
	case out.state == StateQueued:
		return river.JobSnooze(max(w.svc.cfg.Wait(out.retryIn), 0))
	}
	return river.JobCancel(fmt.Errorf("job %s ended %s", args.JobID, out.state))
}

// unclaimed is what the work of a vehicle returns for err, met before any claim: a shutdown's
// cut gives the vehicle back for another process, anything else is River's to retry.
func (w *Worker) unclaimed(ctx context.Context, err error) error {
	if cutByShutdown(ctx) {
		return river.JobSnooze(0)
	}
	return err
}

// dropped is what a worker returns for a vehicle whose job's result it dropped. A job queued
// again on this very vehicle lost its claim to a database crash (the claim's commit did not
// wait for the disk): snoozing the vehicle runs it again; anything else ends the vehicle.
func (w *Worker) dropped(ctx context.Context, job db.Job, vehicle int64) error {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	var state string
	err := w.svc.db.NewSelect().Model((*db.Job)(nil)).Column("state").
		Where("id = ? AND river_job_id = ?", job.ID, vehicle).Scan(qctx, &state)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		// The database cannot say: River retries the vehicle, whose claim then decides.
		return fmt.Errorf("look at job %s after its result was dropped: %w", job.ID, err)
	case State(state) == StateQueued:
		w.svc.log.Warn("lost claim: the job is queued again on the vehicle its worker holds (a database crash undid the claim); running it again",
			"job_id", job.ID, "river_job_id", vehicle, "attempt", job.Attempt)
		return river.JobSnooze(0)
	}
	return river.JobCancel(errClaimLost)
}

// RiverPriority maps a job priority 0..100 (lower runs first) onto River's four levels by the
// bands of job priorities (docs/architecture.md): 0–10 → 1, 11–40 → 2, 41–59 → 3, 60–100 → 4. Within a band River runs
// the oldest first.
func RiverPriority(p int) int {
	switch {
	case p <= 10:
		return 1
	case p <= 40:
		return 2
	case p <= 59:
		return 3
	}
	return 4
}
