package eta

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// ETA is the server's estimate for one job that has not ended: when it starts (a queued job)
// or when it ends (a running one), from its place in River's order, its org's share and the
// rate the queue drains at; handles and statuses carry it as eta_seconds.
type ETA struct {
	// Seconds is the estimate in whole seconds, rounded up; 0 means "about now".
	Seconds int
	// Starts is true when Seconds is until the job starts, false when it is until it ends.
	Starts bool
	// ScheduledFor is the time a scheduled prompt asked to run at, while it is still ahead.
	ScheduledFor *time.Time
}

// RetryAfter is the polling hint that follows the estimate: the estimate clamped to 1..60.
func (e ETA) RetryAfter() int { return min(max(e.Seconds, 1), 60) }

// Config configures an Estimator. The zero value of each field means its default.
type Config struct {
	// DB is the database the jobs are in (required).
	DB *bun.DB
	// OrgMaxRunning is the cap of one org's running jobs (Config.OrgMaxRunning); 0: none.
	OrgMaxRunning int
	// ProviderRPM bounds the calls started per minute (the governor's configured RPM); 0:
	// unknown or unlimited.
	ProviderRPM int
	// DefaultRun is the run time assumed before any job has finished (default 2 s, a typical
	// model call).
	DefaultRun time.Duration
	// CacheFor is how long one measurement of the rate serves every estimate (default 1 s).
	CacheFor time.Duration
	// CountCap bounds how many queued jobs ahead one estimate counts; past it the place is
	// extrapolated (default 2000).
	CountCap int
}

func (c *Config) validate() error {
	switch {
	case c.DB == nil:
		return errors.New("eta: Config.DB is required")
	case c.OrgMaxRunning < 0 || c.ProviderRPM < 0 || c.DefaultRun < 0 || c.CacheFor < 0 || c.CountCap < 0:
		return fmt.Errorf("eta: Config values must not be negative: %+v", *c)
	}
	if c.DefaultRun == 0 {
		c.DefaultRun = 2 * time.Second
	}
	if c.CacheFor == 0 {
		c.CacheFor = time.Second
	}
	if c.CountCap == 0 {
		c.CountCap = 2000
	}
	return nil
}

// Estimator answers ETAs. An estimate costs one indexed, bounded query (the job's place), but
// that of a job just accepted (Arrival) none; the rate it divides by, and the queue's front
// that places accepted jobs, are measured at most once per CacheFor for the whole process.
type Estimator struct {
	cfg Config
	// workers is how many prompt workers this process runs (its runtimes add theirs): the
	// least capacity the queue drains with, before any job was seen running.
	workers atomic.Int64

	// front places the jobs just accepted (Arrival).
	front queueFront

	mu        sync.Mutex
	sample    rateSample
	sampled   time.Time // when sample was taken, by the process clock
	peak      int       // the most jobs seen running at once within peakWindow
	peakSince time.Time
}

// The two job states that have an estimate, as sa_job.state spells them.
const (
	stateQueued  = "queued"
	stateRunning = "running"
)

// peakWindow is how long a peak of running jobs counts as the capacity the queue has.
const peakWindow = time.Minute

// New validates cfg and returns an Estimator.
func New(cfg Config) (*Estimator, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Estimator{cfg: cfg, front: queueFront{orgs: map[int64]*bands{}}}, nil
}

// AddWorkers records n more (or, negative, fewer) prompt workers running in this process.
func (e *Estimator) AddWorkers(n int) { e.workers.Add(int64(n)) }

// rateSample is one measurement of how fast the queue drains.
type rateSample struct {
	// running is how many jobs run now, and oldest how long the longest of them has.
	running int
	oldest  time.Duration
	// meanRun is the mean run time of the most recently finished jobs; 0 when none has.
	meanRun time.Duration
	// finished is how many jobs finished within the last rateWindow.
	finished int
	// queued and oldestQueued are the queued total and its oldest job's age, read only when
	// some estimate had to extrapolate (queuedRead).
	queued       int
	oldestQueued time.Duration
	queuedRead   bool
}

// rateWindow is the window the finished jobs are counted over.
const rateWindow = 60 * time.Second

// measure returns the current sample, taking a new one when the last is older than CacheFor.
// needQueued asks for the queued totals too (read once per sample, only when asked).
func (e *Estimator) measure(ctx context.Context, needQueued bool) (rateSample, int, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := time.Now()
	if e.sampled.IsZero() || now.Sub(e.sampled) >= e.cfg.CacheFor {
		var row struct {
			Running  int     `bun:"running"`
			Oldest   float64 `bun:"oldest"`
			MeanRun  float64 `bun:"mean_run"`
			Finished int     `bun:"finished"`
		}
		if err := e.cfg.DB.NewRaw(sampleSQL).Scan(ctx, &row); err != nil {
			return rateSample{}, 0, fmt.Errorf("measure the queue's rate: %w", err)
		}
		e.sample = rateSample{running: row.Running, oldest: seconds(row.Oldest), meanRun: seconds(row.MeanRun),
			finished: row.Finished}
		e.sampled = now
		if row.Running >= e.peak || now.Sub(e.peakSince) > peakWindow {
			e.peak, e.peakSince = row.Running, now
		}
	}
	if needQueued && !e.sample.queuedRead {
		var row struct {
			Queued int     `bun:"queued"`
			Oldest float64 `bun:"oldest"`
		}
		if err := e.cfg.DB.NewRaw(queuedSQL).Scan(ctx, &row); err != nil {
			return rateSample{}, 0, fmt.Errorf("count the queued jobs: %w", err)
		}
		e.sample.queued, e.sample.oldestQueued, e.sample.queuedRead = row.Queued, seconds(row.Oldest), true
	}
	return e.sample, e.peak, nil
}

func seconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }

// etaModel is what a sample says about the queue: how long a job runs, how many run at once,
// and how fast jobs leave the queue (all orgs, and one org under its cap).
type etaModel struct {
	meanRun  time.Duration
	capacity int
	free     int
	rate     float64 // jobs starting per second, whole queue
	orgRate  float64 // jobs starting per second for one org; 0: no cap
}

// modelOf turns a sample into a model. The rate is capacity / mean run time (Little's law: in
// a busy queue, capacity jobs each take meanRun), at least the rate measured over the last
// minute, and at most what the provider's configured RPM lets start.
func (e *Estimator) modelOf(s rateSample, peak int) etaModel {
	m := etaModel{meanRun: s.meanRun}
	if m.meanRun <= 0 {
		// Nothing finished yet: the default, or longer if a running job already took longer.
		m.meanRun = max(e.cfg.DefaultRun, s.oldest)
	}
	m.capacity = max(s.running, peak, int(e.workers.Load()), 1)
	m.free = max(m.capacity-s.running, 0)
	m.rate = max(float64(m.capacity)/m.meanRun.Seconds(), float64(s.finished)/rateWindow.Seconds())
	if e.cfg.ProviderRPM > 0 {
		m.rate = min(m.rate, float64(e.cfg.ProviderRPM)/60)
	}
	if e.cfg.OrgMaxRunning > 0 {
		m.orgRate = min(m.rate, float64(e.cfg.OrgMaxRunning)/m.meanRun.Seconds())
	}
	return m
}

// queuedWait is how long a claimable job with ahead jobs before it in River's order (aheadOrg
// of them its own org's) waits to start: a free worker takes it at once; otherwise each job
// ahead, and the job itself, waits its turn at the drain rate, and at its org's rate under a
// cap.
func (m etaModel) queuedWait(ahead, aheadOrg int) time.Duration {
	var wait float64
	if ahead >= m.free {
		wait = float64(ahead-m.free+1) / m.rate
	}
	if m.orgRate > 0 {
		wait = max(wait, float64(aheadOrg)/m.orgRate)
	}
	return time.Duration(wait * float64(time.Second))
}

// runningLeft is how long a job that has run for elapsed still runs: the mean run time less
// what it has had, at least a second.
func (m etaModel) runningLeft(elapsed time.Duration) time.Duration {
	return max(m.meanRun-elapsed, time.Second)
}

// extrapolate estimates the place of a job past the counted bound: the share of the queued
// total that arrived before it, taking arrivals as even over the age of the oldest queued job
// (a job just submitted has nearly all of them ahead), never below the bound.
func extrapolate(bound int, s rateSample, waited time.Duration) int {
	if s.oldestQueued <= 0 || s.queued <= bound {
		return bound
	}
	share := min(max(1-waited.Seconds()/s.oldestQueued.Seconds(), 0), 1)
	return max(bound, int(math.Round(float64(s.queued)*share)))
}

// etaRow is one job as the estimate queries read it.
type etaRow struct {
	ID          uuid.UUID  `bun:"id"`
	State       string     `bun:"state"`
	CreatedAt   time.Time  `bun:"created_at"`
	ScheduledAt time.Time  `bun:"scheduled_at"`
	StartedAt   *time.Time `bun:"started_at"`
	// ScheduledFor is the time a scheduled prompt asked for (nil for any other).
	ScheduledFor *time.Time `bun:"scheduled_for"`
	Now          time.Time  `bun:"now"`
	// Ahead and AheadOrg count the claimable queued jobs before it (its org's for AheadOrg),
	// up to the bound; Counted is false for a job past the bound of a batch read.
	Ahead    int  `bun:"ahead"`
	AheadOrg int  `bun:"ahead_org"`
	Counted  bool `bun:"counted"`
	// Chain is true when the job is a chain's current step, with StepsAfter steps to run after
	// it: the estimate is then of the chain's end.
	Chain      bool `bun:"chain"`
	StepsAfter int  `bun:"steps_after"`
}

// estimate is the ETA of one row, or false for a job that has ended. A chain's step is
// estimated to its end, and each step after it takes the mean run time.
func (e *Estimator) estimate(r etaRow, s rateSample, peak int) (ETA, bool) {
	eta, ok := e.estimateJob(r, s, peak)
	if !ok || !r.Chain {
		return eta, ok
	}
	m := e.modelOf(s, peak)
	rest := time.Duration(max(r.StepsAfter, 0)) * m.meanRun
	if eta.Starts {
		rest += m.meanRun
	}
	return ETA{Seconds: eta.Seconds + ceilSeconds(rest)}, true
}

// estimateJob is the ETA of one job: its start when queued, its end when running.
func (e *Estimator) estimateJob(r etaRow, s rateSample, peak int) (ETA, bool) {
	m := e.modelOf(s, peak)
	switch r.State {
	case stateRunning:
		var elapsed time.Duration
		if r.StartedAt != nil {
			elapsed = r.Now.Sub(*r.StartedAt)
		}
		return ETA{Seconds: ceilSeconds(m.runningLeft(elapsed))}, true
	case stateQueued:
		if r.ScheduledAt.After(r.Now) {
			// Scheduled (or backing off): not claimable before then, and then first in line
			// among what is due, as far as anyone can know now.
			eta := ETA{Seconds: ceilSeconds(r.ScheduledAt.Sub(r.Now)), Starts: true}
			if r.ScheduledFor != nil && r.ScheduledFor.After(r.Now) {
				eta.ScheduledFor = r.ScheduledFor
			}
			return eta, true
		}
		ahead, aheadOrg := r.Ahead, r.AheadOrg
		if !r.Counted || ahead >= e.cfg.CountCap {
			ahead = extrapolate(max(ahead, e.cfg.CountCap), s, r.Now.Sub(r.CreatedAt))
			aheadOrg = max(aheadOrg, ahead*aheadOrg/max(r.Ahead, 1))
		}
		return ETA{Seconds: ceilSeconds(m.queuedWait(ahead, aheadOrg)), Starts: true}, true
	}
	return ETA{}, false
}

func ceilSeconds(d time.Duration) int { return int(math.Ceil(d.Seconds())) }
