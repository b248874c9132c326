package jobs

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/db"
)

// KindShutdown is the error kind of a run cut by a graceful stop of its process: the job was
// handed back queued and the run does not count against its max_attempts.
const KindShutdown = "shutdown"

// errShutdown is the cause of the cancellation of every execution still running when its
// process's shutdown grace ends. It tells that cancellation apart from a user's cancel (the
// claim is gone: errClaimLost) and from the execution's own timeout (a deadline).
var errShutdown = errors.New("the process stopped: its shutdown grace ended while the call ran")

// errHandedBack ends the vehicle of a job a shutdown handed back on a vehicle of its own.
var errHandedBack = errors.New("handed back by a graceful stop: the job rides a new vehicle")

// shutdownCuts is what a worker pool's graceful stop does to the executions it holds: from
// drain on, no vehicle is claimed any more; cutAll cancels every execution with errShutdown.
type shutdownCuts struct {
	mu       sync.Mutex
	draining bool
	cut      bool
	running  map[*context.CancelCauseFunc]struct{}
}

// track returns ctx as the context of one vehicle's work, which cutAll cancels, and the
// function that forgets it when the work ends.
func (c *shutdownCuts) track(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cut {
		cancel(errShutdown)
		return ctx, func() {}
	}
	if c.running == nil {
		c.running = map[*context.CancelCauseFunc]struct{}{}
	}
	key := &cancel
	c.running[key] = struct{}{}
	return ctx, func() {
		c.mu.Lock()
		delete(c.running, key)
		c.mu.Unlock()
		cancel(nil)
	}
}

// drain makes every later claim decline its vehicle.
func (c *shutdownCuts) drain() {
	c.mu.Lock()
	c.draining = true
	c.mu.Unlock()
}

// isDraining reports whether the pool is stopping.
func (c *shutdownCuts) isDraining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.draining
}

// cutAll cancels every execution, now and from now on, with errShutdown.
func (c *shutdownCuts) cutAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.draining, c.cut = true, true
	for cancel := range c.running {
		(*cancel)(errShutdown)
	}
}

// cutByShutdown reports whether ctx ended because its pool's shutdown grace ran out.
func cutByShutdown(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), errShutdown)
}

// handBack re-queues a job whose run a graceful stop cut, on a new vehicle any process may
// take, only while it still runs under claim. The run keeps its own attempt number (its output,
// usage and error detail are filed under it, and readers follow the next run as a new attempt),
// and max_attempts grows by one with it: the cut run costs the job nothing of its attempts.
func (s *Service) handBack(ctx context.Context, job db.Job, claim string) outcome {
	var final db.Job
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		vehicle, err := s.replaceVehicle(ctx, tx, job)
		if err != nil {
			return err
		}
		w := db.NewWrites(tx)
		final, err = s.apply(ctx, w, change{jobID: job.ID, from: []State{StateRunning}, to: StateQueued, claim: claim,
			set: []clause{is("attempt = attempt + 1"), is("max_attempts = max_attempts + 1"),
				is("error_kind = ?", KindShutdown),
				is("error_message = ?", "the process running it stopped; the job runs again and the cut run does not count"),
				is("worker_claim = NULL"), is("scheduled_at = now()"), is("river_job_id = ?", vehicle)}})
		if err != nil {
			return err
		}
		entry, err := auditEntry(job.OrgID, nil, "worker:"+claim, "job.handed_back", "job", job.ID.String(),
			map[string]any{"attempt": job.Attempt, "old_river_job_id": job.RiverJobID, "river_job_id": vehicle})
		if err != nil {
			return err
		}
		w.Insert(entry.InsertStatement())
		return w.Send(ctx)
	})
	switch {
	case errors.Is(err, errNoChange):
		s.log.Info("dropped a cut run: the job is no longer running under this claim", "job_id", job.ID, "claim", claim)
		return outcome{dropped: true}
	case err != nil:
		return outcome{err: fmt.Errorf("hand back job %s: %w", job.ID, err)}
	}
	s.log.Info("job handed back by a graceful stop", "job_id", job.ID, "attempt", job.Attempt, "river_job_id", final.RiverJobID)
	return outcome{state: State(final.State), handedBack: true}
}

// markDraining records that the worker process id is stopping and lets its calls run until
// grace has passed, for the health page. A failure to write it is only logged: the stop goes on.
func (r *Runtime) markDraining(ctx context.Context, id string, grace time.Duration) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_, err := r.svc.db.NewInsert().Model(&db.WorkerDrain{WorkerID: id, GraceMS: grace.Milliseconds()}).
		On("CONFLICT (worker_id) DO UPDATE SET started_at = now(), grace_ms = EXCLUDED.grace_ms, stopped_at = NULL").Exec(ctx)
	if err != nil {
		r.svc.log.Warn("could not record that this process is draining", "worker_id", id, "err", err)
	}
}

// markStopped records that the worker process id has stopped, and forgets processes that
// stopped more than a day ago.
func (r *Runtime) markStopped(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if _, err := r.svc.db.NewUpdate().Model((*db.WorkerDrain)(nil)).Set("stopped_at = now()").Where("worker_id = ?", id).Exec(ctx); err != nil {
		r.svc.log.Warn("could not record that this process stopped", "worker_id", id, "err", err)
		return
	}
	_, _ = r.svc.db.NewDelete().Model((*db.WorkerDrain)(nil)).Where("stopped_at < now() - interval '1 day'").Exec(ctx)
}

// unclaimed is what the work of a vehicle returns for err, met before any claim: a shutdown's
// cut gives the vehicle back for another process, anything else is River's to retry.
func (w *Worker) unclaimed(ctx context.Context, err error) error {
	if cutByShutdown(ctx) {
		return river.JobSnooze(0)
	}
	return err
}

// stopGracefully stops the pool's River client: no new claim from now on, the calls running
// get grace to finish, and those still running then are cut and handed back (handBack) before
// River is stopped for good.
func (r *Runtime) stopGracefully(ctx context.Context, grace time.Duration) error {
	r.worker.cuts.drain()
	r.markDraining(ctx, r.id, grace)
	defer r.markStopped(ctx, r.id)
	sctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	if err := r.client.Stop(sctx); err == nil {
		return nil
	}
	running := r.worker.inFlight.Load()
	r.worker.cuts.cutAll()
	r.svc.log.Info("shutdown grace over: handing back the calls still running", "worker_id", r.id, "running", running, "grace", grace)
	// Each cut call writes its hand-back (within its 30 s finalising bound) before its vehicle
	// returns to River.
	cctx, cancel2 := context.WithTimeout(context.WithoutCancel(ctx), 45*time.Second)
	defer cancel2()
	if err := r.client.StopAndCancel(cctx); err != nil {
		return fmt.Errorf("stop river: %w", err)
	}
	return nil
}
