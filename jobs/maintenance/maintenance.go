package maintenance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"

	"asterion/jobs/feed"
)

// Queue is the River queue the periodic maintenance jobs run on.
const Queue = "maintenance"

// OnlyOne keeps a maintenance job from piling up while one is still waiting or running.
var OnlyOne = river.UniqueOpts{ByState: []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRunning, rivertype.JobStateScheduled}}

// OncePer keeps a periodic job inserted every period from piling up: at most one a period
// waits or runs. A job of a leader that died while running it stays running in River's eyes
// until River's rescuer frees it (RescueStuckJobsAfter, minutes), and under OnlyOne it would
// hold back every later pass until then: the reclaim of the dead leader's own jobs first.
// Keyed by the period too (a second at least, River's shortest), the next period's pass runs
// on the new leader at once.
func OncePer(period time.Duration) river.UniqueOpts {
	u := OnlyOne
	u.ByPeriod = max(period, time.Second)
	return u
}

// ReclaimInsertOpts are the insert options of the periodic reclaim job of a pool that
// reclaims every period.
func ReclaimInsertOpts(period time.Duration) *river.InsertOpts {
	return &river.InsertOpts{Queue: Queue, UniqueOpts: OncePer(period)}
}

// ReclaimReport counts what one reclaim pass did.
type ReclaimReport struct {
	Requeued int `json:"requeued"`
	Failed   int `json:"failed"`
	// Revehicled counts queued jobs moved off a vehicle whose worker died before claiming it.
	Revehicled int `json:"revehicled"`
	// Stranded counts queued jobs moved off a vehicle River had already finished.
	Stranded int `json:"stranded"`
}

// Config configures the periodic maintenance of a worker pool.
type Config struct {
	// DB is the database of the jobs (required).
	DB *bun.DB
	// Logger receives what a reclaim pass did and a failed poll's warning (default
	// slog.Default()).
	Logger *slog.Logger
	// Reclaim is one reclaim pass over stuck, orphaned and stranded jobs (required).
	Reclaim func(context.Context) (ReclaimReport, error)
	// Poll is one pass of the deferred-operation poller over due operations (required).
	Poll func(context.Context) error
	// ReclaimEvery is how often the leader runs Reclaim (default 1 min).
	ReclaimEvery time.Duration
	// PollEvery is how often the leader runs Poll (default 2 s).
	PollEvery time.Duration
	// EventRetention is how long change-feed events are kept (default 1 h, at least 15 min).
	EventRetention time.Duration
	// KeyTTL is how long an idempotency key is kept (required).
	KeyTTL time.Duration
}

// minRetention is the least time change-feed events are kept: a client that reconnects within
// it replays what it missed.
const minRetention = 15 * time.Minute

func (c *Config) validate() error {
	switch {
	case c.DB == nil:
		return errors.New("maintenance: Config.DB is required")
	case c.Reclaim == nil || c.Poll == nil:
		return errors.New("maintenance: Config.Reclaim and Config.Poll are required")
	case c.KeyTTL <= 0:
		return fmt.Errorf("maintenance: Config.KeyTTL %v must be positive", c.KeyTTL)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.ReclaimEvery <= 0 {
		c.ReclaimEvery = time.Minute
	}
	if c.PollEvery <= 0 {
		c.PollEvery = 2 * time.Second
	}
	if c.EventRetention < minRetention {
		c.EventRetention = time.Hour
	}
	return nil
}

// Maintenance is the periodic work of a worker pool that River runs on its leader only:
// reclaim, the poller, and the prune of events, idempotency keys and counter deltas.
type Maintenance struct{ cfg Config }

// New validates cfg and returns the pool's maintenance.
func New(cfg Config) (*Maintenance, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Maintenance{cfg: cfg}, nil
}

// AddWorkers registers the maintenance jobs' River workers.
func (m *Maintenance) AddWorkers(workers *river.Workers) {
	river.AddWorker(workers, &reclaimWorker{m: m})
	river.AddWorker(workers, &pruneWorker{m: m})
	river.AddWorker(workers, &pollWorker{m: m})
}

// PeriodicJobs are the maintenance jobs the leader inserts: reclaim (at once on start, then
// every ReclaimEvery), the poller (every PollEvery) and the prune (every minute).
func (m *Maintenance) PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(m.cfg.ReclaimEvery),
			func() (river.JobArgs, *river.InsertOpts) {
				return ReclaimArgs{}, ReclaimInsertOpts(m.cfg.ReclaimEvery)
			}, &river.PeriodicJobOpts{RunOnStart: true}),
		river.NewPeriodicJob(river.PeriodicInterval(m.cfg.PollEvery),
			func() (river.JobArgs, *river.InsertOpts) {
				return PollArgs{}, &river.InsertOpts{Queue: Queue, UniqueOpts: OncePer(m.cfg.PollEvery)}
			}, nil),
		river.NewPeriodicJob(river.PeriodicInterval(time.Minute),
			func() (river.JobArgs, *river.InsertOpts) {
				return PruneArgs{}, &river.InsertOpts{Queue: Queue}
			}, nil),
	}
}

// Prune drops change-feed events older than EventRetention, deletes the expired idempotency
// keys and folds the counter deltas.
func (m *Maintenance) Prune(ctx context.Context) error {
	if _, err := feed.Prune(ctx, m.cfg.DB, m.cfg.EventRetention); err != nil {
		return err
	}
	if _, err := PurgeIdempotencyKeys(ctx, m.cfg.DB, m.cfg.KeyTTL); err != nil {
		return err
	}
	return compactCounts(ctx, m.cfg.DB)
}

// PurgeIdempotencyKeys deletes the keys older than ttl from idb and returns how many went.
func PurgeIdempotencyKeys(ctx context.Context, idb bun.IDB, ttl time.Duration) (int64, error) {
	res, err := idb.NewDelete().Table("sa_idempotency").
		Where("created_at < now() - ?::interval", fmt.Sprintf("%d seconds", int64(ttl/time.Second))).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("purge expired idempotency keys: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}

// compactCountsSQL folds the trigger-written counter deltas (db/functions/asterion_compact_counts.sql).
const compactCountsSQL = `SELECT asterion_compact_counts()`

// compactCounts folds the trigger-written counter deltas into one row per org and state.
func compactCounts(ctx context.Context, idb bun.IDB) error {
	if _, err := idb.ExecContext(ctx, compactCountsSQL); err != nil {
		return fmt.Errorf("compact counters: %w", err)
	}
	return nil
}

// ReclaimArgs is the periodic reclaim job.
type ReclaimArgs struct{}

// Kind is the River job kind.
func (ReclaimArgs) Kind() string { return "asterion.reclaim" }

// reclaimWorker runs Config.Reclaim; River's periodic jobs run on the leader only.
type reclaimWorker struct {
	river.WorkerDefaults[ReclaimArgs]
	m *Maintenance
}

func (w *reclaimWorker) Work(ctx context.Context, _ *river.Job[ReclaimArgs]) error {
	rep, err := w.m.cfg.Reclaim(ctx)
	if err != nil {
		return err
	}
	if rep.Requeued+rep.Failed+rep.Revehicled+rep.Stranded > 0 {
		w.m.cfg.Logger.Info("reclaimed stuck jobs", "requeued", rep.Requeued, "failed", rep.Failed,
			"revehicled", rep.Revehicled, "stranded", rep.Stranded)
	}
	return nil
}

// PruneArgs is the periodic change-feed prune job.
type PruneArgs struct{}

// Kind is the River job kind.
func (PruneArgs) Kind() string { return "asterion.prune_events" }

type pruneWorker struct {
	river.WorkerDefaults[PruneArgs]
	m *Maintenance
}

func (w *pruneWorker) Work(ctx context.Context, _ *river.Job[PruneArgs]) error { return w.m.Prune(ctx) }

// PollArgs is the periodic deferred-operation poller job.
type PollArgs struct{}

// Kind is the River job kind.
func (PollArgs) Kind() string { return "asterion.poll_operations" }

type pollWorker struct {
	river.WorkerDefaults[PollArgs]
	m *Maintenance
}

func (w *pollWorker) Work(ctx context.Context, _ *river.Job[PollArgs]) error {
	return w.m.cfg.Poll(ctx)
}
