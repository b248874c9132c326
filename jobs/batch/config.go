package batch

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"

	"asterion/jobs"
	"asterion/jobs/registry"
)

// Limits of a batch input file.
const (
	// MaxLines is the most requests one file may hold.
	MaxLines = 50_000
	// MaxBytes is the largest file.
	MaxBytes = 100 << 20
	// MaxLineBytes is the longest line: a request larger than this cannot be a prompt.
	MaxLineBytes = 4 << 20
	// ChunkLines is how many lines one transaction writes or reads.
	ChunkLines = 1000
	// Priority is the priority of every job of a batch: the lowest band of its org.
	Priority = 100
	// Window is the one completion window a batch may ask for.
	Window = "24h"
)

// Kind is the operation kind of a batch, and OwnerName its owner on the registry.
const (
	Kind      = "flow.batch"
	OwnerName = "batch"
)

// Config configures the batches. The zero value of every field but Jobs and Endpoints means
// its default.
type Config struct {
	// Jobs runs the batches' jobs (required); the batch owner registers with its registry and
	// its worker with its worker pools.
	Jobs *jobs.Service
	// Endpoints are the endpoints a batch may name, by URL path (at least one).
	Endpoints map[string]Endpoint
	// TickEvery is how often the leader visits unfinished batches (default 1 s).
	TickEvery time.Duration
	// Logger receives what goes wrong in the background (default: Jobs' logger).
	Logger *slog.Logger
}

func (c *Config) validate() error {
	if c.Jobs == nil {
		return errors.New("batch: Config.Jobs is required")
	}
	if len(c.Endpoints) == 0 {
		return errors.New("batch: Config.Endpoints needs at least one endpoint")
	}
	if c.TickEvery < 0 {
		return fmt.Errorf("batch: Config.TickEvery: want a positive duration, got %s", c.TickEvery)
	}
	if c.TickEvery == 0 {
		c.TickEvery = time.Second
	}
	if c.Logger == nil {
		c.Logger = c.Jobs.Logger()
	}
	return nil
}

// Batches is the flow.batch owner and the store of the front door's files.
type Batches struct {
	cfg  Config
	jobs *jobs.Service
	reg  *registry.Registry
	db   bun.IDB
	log  *slog.Logger
}

// New validates cfg, registers the batch owner with the registry of cfg.Jobs, and adds the
// batch worker to every worker pool built from cfg.Jobs from now on.
func New(cfg Config) (*Batches, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	b := &Batches{cfg: cfg, jobs: cfg.Jobs, reg: cfg.Jobs.Registry(), db: cfg.Jobs.DB(), log: cfg.Logger}
	b.reg.Register(b)
	cfg.Jobs.Extend(b)
	return b, nil
}

// Endpoints are the URL paths a batch may name.
func (b *Batches) Endpoints() []string {
	out := make([]string, 0, len(b.cfg.Endpoints))
	for k := range b.cfg.Endpoints {
		out = append(out, k)
	}
	return out
}
