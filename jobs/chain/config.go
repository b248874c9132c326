package chain

import (
	"errors"
	"log/slog"

	"github.com/uptrace/bun"

	"asterion/jobs"
	"asterion/jobs/registry"
)

// Config configures the chain owner. The zero value of every field but Jobs means its default.
type Config struct {
	// Jobs runs the chains' prompt steps (required); the chain owner registers with its
	// registry.
	Jobs *jobs.Service
	// Logger receives what goes wrong outside a caller's request (default: Jobs' logger).
	Logger *slog.Logger
}

// validate fills in the defaults and rejects bad values.
func (c *Config) validate() error {
	if c.Jobs == nil {
		return errors.New("chain: Config.Jobs is required")
	}
	if c.Logger == nil {
		c.Logger = c.Jobs.Logger()
	}
	return nil
}

// Chains is the flow.chain owner: it accepts chains, runs their steps as prompt jobs, resumes
// them as the steps settle, and answers for them to the registry.
type Chains struct {
	jobs *jobs.Service
	reg  *registry.Registry
	db   bun.IDB
	log  *slog.Logger
}

// New validates cfg and registers the chain owner, and the Resumer of its continuations, with
// the registry of cfg.Jobs.
func New(cfg Config) (*Chains, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &Chains{jobs: cfg.Jobs, reg: cfg.Jobs.Registry(), db: cfg.Jobs.DB(), log: cfg.Logger}
	c.reg.Register(c)
	c.reg.RegisterResumer(OwnerName, c)
	return c, nil
}
