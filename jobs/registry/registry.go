package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/uptrace/bun"

	"asterion/jobs/deferred"
)

// Config configures a Registry. The zero value of every field but DB means its default.
type Config struct {
	// DB holds sa_operation, its history and the continuations (required).
	DB *bun.DB
	// Logger receives the poller's warnings (default slog.Default()).
	Logger *slog.Logger
	// Policy clamps operation TTL and retry hints (default deferred.DefaultPolicy()).
	Policy deferred.Policy
}

// validate fills in the defaults and rejects bad values.
func (c *Config) validate() error {
	if c.DB == nil {
		return errors.New("registry: Config.DB is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Policy == (deferred.Policy{}) {
		c.Policy = deferred.DefaultPolicy()
	}
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	return nil
}

// Registry is the registry of deferred operations of one process.
type Registry struct {
	cfg Config
	db  *bun.DB
	log *slog.Logger

	// committed, when set, runs after every transaction of the registry commits.
	committed func()

	mu       sync.RWMutex
	owners   map[string]Owner
	resumers map[string]Resumer
	settled  []SettledFunc

	stats PollerStats
}

// PollerStats counts what the poller did, for /metrics.
type PollerStats struct {
	Polls, Transitions, Expiries, Errors atomic.Int64
	// Rounds counts the rounds of PollDue that finished. It is the poller's signal to tests: a
	// test that asserts the poller left an operation alone waits for rounds to pass, instead of
	// sleeping for what it guesses is long enough.
	Rounds atomic.Int64
	// BusyRetries counts cancel attempts refused as busy (the work locked for a moment) and
	// tried again; a test that holds such a lock lets go once it has seen one.
	BusyRetries atomic.Int64
}

// New validates cfg and returns a registry with no owners.
func New(cfg Config) (*Registry, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Registry{cfg: cfg, db: cfg.DB, log: cfg.Logger, owners: map[string]Owner{}, resumers: map[string]Resumer{}}, nil
}

// Policy returns the host policy the registry clamps handles with.
func (r *Registry) Policy() deferred.Policy { return r.cfg.Policy }

// Stats returns the poller's counters.
func (r *Registry) Stats() *PollerStats { return &r.stats }

// NotifyCommits makes f run after every transaction of the registry commits (they write
// change-feed events). Set it before the registry is used.
func (r *Registry) NotifyCommits(f func()) { r.committed = f }

// InTx runs fn in a transaction and, once it has committed, runs the commit hook. Owners run
// their own transactions through it, so that what they write reaches the change feed at once.
func (r *Registry) InTx(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error {
	if err := r.db.RunInTx(ctx, nil, fn); err != nil {
		return err
	}
	if r.committed != nil {
		r.committed()
	}
	return nil
}

// TxNow is the transaction's clock, so every timestamp written in it agrees.
func TxNow(ctx context.Context, tx bun.IDB) (t time.Time, err error) {
	err = tx.QueryRowContext(ctx, txNowSQL).Scan(&t)
	return t, err
}
