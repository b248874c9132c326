package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/uptrace/bun"
	"go.opentelemetry.io/otel/trace"

	"asterion/jobs/admit"
	"asterion/jobs/deferred"
	"asterion/jobs/eta"
	"asterion/jobs/fairshare"
	"asterion/jobs/governor"
	"asterion/jobs/heartbeat"
	"asterion/jobs/intake"
	"asterion/jobs/output"
	"asterion/jobs/provider"
	"asterion/jobs/registry"
	"asterion/jobs/tracing"
	"asterion/jobs/usage"
)

// Sentinel errors callers branch on; they are the registry's, so one errors.Is serves both.
var (
	// ErrNotFound means no such job or prompt in the caller's view (another org's id included).
	ErrNotFound = registry.ErrNotFound
	// ErrConflict means the job's state does not allow the action (cancel a terminal job,
	// retry a running one).
	ErrConflict = registry.ErrConflict
	// ErrIdempotencyConflict means an Idempotency-Key was reused with a different body.
	ErrIdempotencyConflict = errors.New("idempotency key reused with a different request")
	// ErrInvalid wraps a ValidationError.
	ErrInvalid = registry.ErrInvalid
	// ErrHeld means flow control holds the work a synchronous run would start now: its org is
	// paused or runs its most jobs at once, or an operator paused its model.
	ErrHeld = errors.New("flow control holds this work")
)

// ValidationError names each field that broke a rule.
type ValidationError = registry.ValidationError

// Config configures the Service.
type Config struct {
	DB       *bun.DB
	Provider provider.Provider
	Logger   *slog.Logger
	// Policy clamps operation TTL and retry hints (default deferred.DefaultPolicy()).
	Policy deferred.Policy
	// HeartbeatInterval is how often a running job proves it is alive (default 30 s).
	HeartbeatInterval time.Duration
	// StaleAfter is the heartbeat age after which a running job is reclaimed (default 5 min).
	StaleAfter time.Duration
	// StuckAfter is how long a job may have been started before a reclaim fails it as stuck
	// instead of re-queuing it (default 15 min).
	StuckAfter time.Duration
	// Now and Rand are injectable for tests.
	Now  func() time.Time
	Rand func() float64
	// Wait maps a computed backoff onto how long the vehicle really sleeps before the next
	// attempt. The job row always records the retry rules' backoff in scheduled_at; tests shrink
	// the real wait instead of sleeping it. Nil means the backoff itself.
	Wait func(backoff time.Duration) time.Duration
	// Output, when set, stores the live output of every execution as it arrives.
	Output *output.Writer
	// Governor, when set, paces provider calls to the account's limits across processes.
	Governor *governor.Governor
	// Models, when set, lists the models a prompt may ask for; the first is the default.
	// Unset, the provider's own model is the only one.
	Models []string
	// OrgMaxRunning, when positive, caps the jobs of one org running at once, across every
	// process.
	OrgMaxRunning int
	// OrgMaxQueued, when positive, caps an org's queued plus running jobs.
	OrgMaxQueued int
	// SubmitRate, when positive, is each user's submits per second (burst ten times that).
	SubmitRate float64
	// Usage, when set, records what every attempt used. Budgets are admission's: they hold
	// with or without it.
	Usage *usage.Meter
	// Intake configures the intake lane and group commit of this process's submits (package
	// intake). Its zero value leaves the lane off; the command line sets intake.DefaultYield
	// unless configured otherwise.
	Intake intake.Config
	// Tracer, when set, traces every submit, the River job of every prompt and its provider
	// call, one trace per prompt (package tracing); nil leaves tracing out at no cost.
	Tracer trace.TracerProvider
}

// Service is the execution core shared by the API, the workers and the command line.
type Service struct {
	// Operations is the registry's API for the server.
	*Operations

	cfg Config
	// eta estimates when queued jobs start and running ones end (the 202's eta_seconds).
	eta    *eta.Estimator
	db     *bun.DB
	log    *slog.Logger
	insert *river.Client[*sql.Tx]

	// committed, when set, runs after every transaction of the service commits (see
	// NotifyCommits).
	committed func()

	// reg is the registry of deferred operations; prompt.execute, artifact.delivery and
	// flow.chain register with it.
	reg *registry.Registry

	// intake puts this process's submits before its workers' job starts.
	intake intake.Gate
	// submits gathers concurrent submits into shared transactions.
	submits *intake.Group[SubmitRequest, Submitted]
	// extensions add River workers of other components to the worker pools (Extend).
	extensions []Extension
	// beats proves every execution of this process alive, one statement per interval.
	beats *heartbeat.Keeper
	// calls surrounds each provider call: governor slots, observations, usage.
	calls *calls
	// door is the one admission every way a job is created passes (package admit).
	door *admit.Admission
	// share decides which queued job a fetched vehicle carries (fair share between orgs).
	share *fairshare.Share
	// groupFault, when set (by tests), fails the write of a group of n submits.
	groupFault func(n int) error
	// groupCommitFault, when set (by tests), runs after a group's transaction committed and
	// its error stands for the commit's answer: a connection lost at COMMIT.
	groupCommitFault func() error
	// tracer starts the submit spans; nil when tracing is off.
	tracer trace.Tracer
	// stranded remembers how far the reclaim of jobs on finished vehicles has looked.
	stranded strandedWatch
}

// NewService validates cfg and builds the insert-only River client that enqueues inside bun
// transactions (a full River client over pgdriver never wins leader election).
func NewService(cfg Config) (*Service, error) {
	if cfg.DB == nil {
		return nil, errors.New("jobs: Config.DB is required")
	}
	if cfg.Provider == nil {
		return nil, errors.New("jobs: Config.Provider is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Policy == (deferred.Policy{}) {
		cfg.Policy = deferred.DefaultPolicy()
	}
	if err := cfg.Policy.Validate(); err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 30 * time.Second
	}
	if cfg.StaleAfter <= 0 {
		cfg.StaleAfter = 5 * time.Minute
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = 15 * time.Minute
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Wait == nil {
		cfg.Wait = func(d time.Duration) time.Duration { return d }
	}
	// River limits its insert notifications to one per queue per FetchCooldown of the
	// inserting client (default 100 ms), which made an idle worker wait about 50 ms for a new
	// job; 20 ms matches the workers' own fetch cooldown.
	ins, err := river.NewClient(riverdatabasesql.New(cfg.DB.DB), &river.Config{FetchCooldown: 20 * time.Millisecond})
	if err != nil {
		return nil, fmt.Errorf("jobs: insert-only river client: %w", err)
	}
	reg, err := registry.New(registry.Config{DB: cfg.DB, Logger: cfg.Logger, Policy: cfg.Policy})
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	in, err := intake.New(cfg.Intake)
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	rpm := 0
	if cfg.Governor != nil {
		rpm = cfg.Governor.RPM(governor.ModelState{})
	}
	beats, err := heartbeat.New(heartbeat.Config{DB: cfg.DB, Every: cfg.HeartbeatInterval, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	etas, err := eta.New(eta.Config{DB: cfg.DB, OrgMaxRunning: cfg.OrgMaxRunning, ProviderRPM: rpm})
	if err != nil {
		return nil, err
	}
	s := &Service{Operations: &Operations{reg: reg}, eta: etas,
		cfg: cfg, db: cfg.DB, log: cfg.Logger, insert: ins, reg: reg, intake: in,
		beats: beats}
	s.calls = &calls{cfg: &s.cfg, db: cfg.DB, log: cfg.Logger}
	models := cfg.Models
	if len(models) == 0 {
		// Without a list of its own a deployment admits the provider's own model only.
		models = []string{s.calls.modelOf("")}
	}
	s.door, err = admit.New(admit.Config{DB: cfg.DB, Models: models, OrgMaxQueued: cfg.OrgMaxQueued,
		SubmitRate: cfg.SubmitRate, Now: cfg.Now, Log: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("jobs: %w", err)
	}
	if s.share, err = newShare(&s.cfg, ins); err != nil {
		return nil, err
	}
	// A shared submit transaction runs as any other, then meets the tests' commit fault, if set.
	groupTx := func(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
		if err := s.inTx(ctx, fn); err != nil {
			return err
		}
		if s.groupCommitFault != nil {
			return s.groupCommitFault()
		}
		return nil
	}
	s.submits = intake.NewGroup(in, intake.GroupSpec[SubmitRequest, Submitted]{Write: s.writeSubmits, Alone: s.submitOne,
		InTx: groupTx, Recover: s.recoverSubmits, What: "submit prompt", Logger: cfg.Logger})
	if cfg.Tracer != nil {
		s.tracer = cfg.Tracer.Tracer(tracing.TracerName)
		s.cfg.Provider = provider.Traced(cfg.Provider, cfg.Tracer)
	}
	reg.Register(promptOwner{s})
	return s, nil
}

// ETAs returns the estimator of when jobs start and end.
func (s *Service) ETAs() *eta.Estimator { return s.eta }

// DB returns the database the service writes.
func (s *Service) DB() *bun.DB { return s.db }

// Logger returns the service's logger.
func (s *Service) Logger() *slog.Logger { return s.log }

// Viewer is who asks: it decides which jobs and prompts are visible.
type Viewer = registry.Viewer

// Registry returns the registry of deferred operations the service's owners registered with.
func (s *Service) Registry() *registry.Registry { return s.reg }

// NotifyCommits makes f run after every transaction of the service commits. Those are the
// transactions that write change-feed events; the server points f at its hub, which numbers
// and delivers them at once instead of at its next probe. Set it before the service is used.
func (s *Service) NotifyCommits(f func()) {
	s.committed = f
	s.reg.NotifyCommits(f)
}

// inTx runs fn in a transaction and, once it has committed, runs the commit hook.
func (s *Service) inTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	if err := s.db.RunInTx(ctx, nil, fn); err != nil {
		return err
	}
	if s.committed != nil {
		s.committed()
	}
	return nil
}

// calls is what prompt execution does around each provider call: it asks the governor for a
// slot, tells it what the provider said, and records the attempt's usage.
type calls struct {
	cfg *Config
	db  *bun.DB
	log *slog.Logger
}
