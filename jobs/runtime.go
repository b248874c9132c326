package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/uptrace/bun"

	"asterion/jobs/feed"
)

// QueueMaintenance runs the periodic maintenance jobs.
const QueueMaintenance = "maintenance"

// OnlyOne keeps a periodic maintenance job from piling up while one is still waiting or running.
var OnlyOne = river.UniqueOpts{ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRunning, rivertype.JobStateScheduled}}

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
	if cfg.ReclaimEvery <= 0 {
		cfg.ReclaimEvery = time.Minute
	}
	if cfg.PollEvery <= 0 {
		cfg.PollEvery = 2 * time.Second
	}
	if cfg.JobTimeout <= 0 {
		cfg.JobTimeout = 210 * time.Second
	}
	if cfg.EventRetention < 15*time.Minute {
		cfg.EventRetention = time.Hour
	}
	// The id tells this process's claims apart from every other process's (claim relies on it
	// to see a claim of its own that no execution holds), so it is long enough never to repeat.
	idb := make([]byte, 8)
	_, _ = rand.Read(idb)
	id := "w-" + hex.EncodeToString(idb)
	w := &Worker{svc: svc, workerID: id, ceiling: cfg.PriorityCeiling, timeout: cfg.JobTimeout,
		middleware: workMiddleware(svc.cfg.Tracer)}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	river.AddWorker(workers, &reclaimWorker{svc: svc})
	river.AddWorker(workers, &pruneWorker{svc: svc, keep: cfg.EventRetention})
	river.AddWorker(workers, &pollWorker{svc: svc})
	queues := map[string]river.QueueConfig{QueuePrompts: {MaxWorkers: cfg.Workers}, QueueMaintenance: {MaxWorkers: 2}}
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
		PeriodicJobs: append([]*river.PeriodicJob{
			river.NewPeriodicJob(river.PeriodicInterval(cfg.ReclaimEvery),
				func() (river.JobArgs, *river.InsertOpts) {
					return ReclaimArgs{}, &river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: OnlyOne}
				}, &river.PeriodicJobOpts{RunOnStart: true}),
			river.NewPeriodicJob(river.PeriodicInterval(cfg.PollEvery),
				func() (river.JobArgs, *river.InsertOpts) {
					return PollArgs{}, &river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: OnlyOne}
				}, nil),
			river.NewPeriodicJob(river.PeriodicInterval(time.Minute),
				func() (river.JobArgs, *river.InsertOpts) {
					return PruneArgs{}, &river.InsertOpts{Queue: QueueMaintenance}
				}, nil),
		}, extensionJobs(svc)...),
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

// pruneEvents drops change-feed events older than keep (never less than 15 minutes) and folds
// the counter deltas.
func pruneEvents(ctx context.Context, idb *bun.DB, keep time.Duration) error {
	if _, err := feed.Prune(ctx, idb, max(keep, 15*time.Minute)); err != nil {
		return err
	}
	if _, err := PurgeIdempotencyKeys(ctx, idb); err != nil {
		return err
	}
	return compactCounts(ctx, idb)
}

// compactCounts folds the trigger-written counter deltas into one row per org and state.
func compactCounts(ctx context.Context, idb bun.IDB) error {
	if _, err := idb.ExecContext(ctx, compactCountsSQL); err != nil {
		return fmt.Errorf("compact counters: %w", err)
	}
	return nil
}
