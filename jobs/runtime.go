package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/maintenance"
	"asterion/jobs/tracing"
)

// RuntimeConfig configures a worker pool.
type RuntimeConfig struct {
	// Pool is the pgx pool River's worker client uses (LISTEN/NOTIFY pickup).
	Pool *pgxpool.Pool
	// Workers is how many prompt jobs run at once (default 10).
	Workers int
	// PriorityCeiling, when ≥ 0, runs only jobs with priority ≤ it.
	PriorityCeiling int
	// BatchSize bounds RunOnce (default Workers).
	BatchSize int
	// ReclaimEvery is how often the leader reclaims stuck jobs (default 1 min).
	ReclaimEvery time.Duration
	// JobTimeout bounds one execution (default 210 s: the 180 s adapter timeout and margin).
	JobTimeout time.Duration
	// PollEvery is how often the leader polls due deferred operations (default 2 s).
	PollEvery time.Duration
	// EventRetention is how long change-feed events are kept (default 1 h, at least 15 min).
	EventRetention time.Duration
}

// Runtime is a River worker client running prompt jobs and, on the leader, maintenance.
type Runtime struct {
	svc    *Service
	cfg    RuntimeConfig
	client *river.Client[pgx.Tx]
	worker *Worker
	id     string
	// counted says its workers are counted in the service's ETA capacity (while started).
	counted atomic.Bool
}

// NewRuntime validates cfg and builds the River worker client.
func NewRuntime(svc *Service, cfg RuntimeConfig) (*Runtime, error) {
	if cfg.Pool == nil {
		return nil, errors.New("jobs: RuntimeConfig.Pool is required")
	}
	if cfg.Workers <= 0 {
		cfg.Workers = 10
	}
	if cfg.BatchSize <= 0 {
		cfg.BatchSize = cfg.Workers
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = 210 * time.Second
	}
	// The id tells this process's claims apart from every other process's (claim relies on it
	// to see a claim of its own that no execution holds), so it is long enough never to repeat.
	idb := make([]byte, 8)
	_, _ = rand.Read(idb)
	id := "w-" + hex.EncodeToString(idb)
	w := &Worker{svc: svc, workerID: id, ceiling: cfg.PriorityCeiling, timeout: cfg.JobTimeout,
		middleware: tracing.WorkMiddleware(svc.cfg.Tracer)}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	maint, err := maintenance.New(maintenance.Config{DB: svc.db, Logger: svc.log, Reclaim: svc.ReclaimStuck,
		Poll: pollDue(svc), ReclaimEvery: cfg.ReclaimEvery, PollEvery: cfg.PollEvery,
		EventRetention: cfg.EventRetention, KeyTTL: IdempotencyKeyTTL})
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	maint.AddWorkers(workers)
	queues := map[string]river.QueueConfig{QueuePrompts: {MaxWorkers: cfg.Workers}, maintenance.Queue: {MaxWorkers: 2}}
	for _, x := range svc.extensions {
		x.AddWorkers(workers)
		for name, q := range x.Queues() {
			queues[name] = q
		}
	}
	rescueAfter := max(svc.cfg.StaleAfter+time.Minute, cfg.JobTimeout+time.Minute)
	client, err := river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{
		ID:      id,
		Logger:  slog.New(quietHandler{svc.log.Handler()}).With("component", "river"),
		Queues:  queues,
		Workers: workers,
		// River's default job timeout is one minute; prompts need the adapter's 180 s.
		JobTimeout: cfg.JobTimeout,
		// Our reclaim (heartbeat older than StaleAfter) acts first; River's rescuer is the
		// backstop for a vehicle nobody reclaimed, and must exceed the job timeout.
		RescueStuckJobsAfter: rescueAfter,
		FetchCooldown:        20 * time.Millisecond,
		FetchPollInterval:    500 * time.Millisecond,
		PeriodicJobs:         append(maint.PeriodicJobs(), extensionJobs(svc)...),
	})
	if err != nil {
		return nil, fmt.Errorf("jobs: river worker client: %w", err)
	}
	return &Runtime{svc: svc, cfg: cfg, client: client, worker: w, id: id}, nil
}

// Extension is a component that runs River jobs of its own on the prompt worker pools
// (webhook delivery): NewRuntime adds its workers, queues and periodic jobs.
type Extension interface {
	// AddWorkers registers the component's River workers.
	AddWorkers(workers *river.Workers)
	// Queues are the River queues the component's workers take jobs from.
	Queues() map[string]river.QueueConfig
	// PeriodicJobs are the component's periodic jobs, run by the leader.
	PeriodicJobs() []*river.PeriodicJob
}

// Extend adds x to every worker pool built from s from now on.
func (s *Service) Extend(x Extension) { s.extensions = append(s.extensions, x) }

func extensionJobs(svc *Service) []*river.PeriodicJob {
	var out []*river.PeriodicJob
	for _, x := range svc.extensions {
		out = append(out, x.PeriodicJobs()...)
	}
	return out
}

// ID is this worker process's id, the prefix of its claims.
func (r *Runtime) ID() string { return r.id }

// Client exposes the River client (for River's own UI).
func (r *Runtime) Client() *river.Client[pgx.Tx] { return r.client }

// Start begins fetching jobs. The pool runs until Stop: River treats the end of the context
// given to its Start as a stop that cancels every running job at once, so a signal that ends
// ctx must instead go through Stop and its grace.
func (r *Runtime) Start(ctx context.Context) error {
	if err := r.client.Start(context.WithoutCancel(ctx)); err != nil {
		return fmt.Errorf("start river: %w", err)
	}
	if !r.counted.Swap(true) {
		r.svc.eta.AddWorkers(r.cfg.Workers)
	}
	return nil
}

// Stop stops the pool gracefully: it claims nothing new at once, lets running calls finish for
// up to grace, then cuts those still running and hands their jobs back queued on new vehicles,
// without spending an attempt (see handBack), so nothing waits for a reclaim.
func (r *Runtime) Stop(ctx context.Context, grace time.Duration) error {
	if r.counted.Swap(false) {
		r.svc.eta.AddWorkers(-r.cfg.Workers)
	}
	return r.stopGracefully(ctx, grace)
}

// RunOnce works what is available, up to BatchSize jobs, then stops (run-worker --once).
func (r *Runtime) RunOnce(ctx context.Context) (int, error) {
	var budget atomic.Int64
	budget.Store(int64(r.cfg.BatchSize))
	r.worker.budget = &budget
	if err := r.Start(ctx); err != nil {
		return 0, err
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	for {
		select {
		case <-ctx.Done():
			return int(r.worker.done.Load()), r.Stop(context.WithoutCancel(ctx), 5*time.Second)
		case <-tick.C:
		}
		if r.worker.inFlight.Load() > 0 || time.Since(start) < 500*time.Millisecond {
			continue
		}
		if budget.Load() <= 0 {
			break
		}
		due, err := r.dueQueued(ctx, r.cfg.PriorityCeiling)
		if err != nil {
			return int(r.worker.done.Load()), err
		}
		if !due {
			break
		}
	}
	err := r.Stop(ctx, time.Minute)
	return int(r.worker.done.Load()), err
}

// dueQueued reports whether a queued job is due that a worker with ceiling may run.
func (r *Runtime) dueQueued(ctx context.Context, ceiling int) (bool, error) {
	q := r.svc.db.NewSelect().Table("sa_job").Where("state = ? AND scheduled_at <= now()", StateQueued)
	if ceiling >= 0 {
		q = q.Where("priority <= ?", ceiling)
	}
	ok, err := q.Exists(ctx)
	if err != nil {
		return false, fmt.Errorf("look for due jobs: %w", err)
	}
	return ok, nil
}

// pollDue is the leader's poll: a job whose wait for the provider or a budget is over becomes
// work for fair share to choose again (fairshare.Share.ClearEndedWaits), then every due
// deferred operation is polled once. A failure to clear only delays that to the next poll.
func pollDue(svc *Service) func(context.Context) error {
	return func(ctx context.Context) error {
		if _, err := svc.share.ClearEndedWaits(ctx); err != nil && ctx.Err() == nil {
			svc.log.Warn("clearing ended waits failed", "err", err)
		}
		_, err := svc.PollDue(ctx)
		return err
	}
}

// quietHandler takes River's info records down to debug: River reports its routine work
// ("producer job counts", elections, periodic jobs) at info, and an idle server should say
// nothing at info. Warnings and errors pass unchanged.
type quietHandler struct{ inner slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.inner.Enabled(ctx, quieter(l))
}

func (h quietHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = quieter(r.Level)
	return h.inner.Handle(ctx, r)
}

func (h quietHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return quietHandler{h.inner.WithAttrs(as)}
}

func (h quietHandler) WithGroup(name string) slog.Handler {
	return quietHandler{h.inner.WithGroup(name)}
}

// quieter maps info to debug and leaves every other level.
func quieter(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return slog.LevelDebug
	}
	return l
}

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
