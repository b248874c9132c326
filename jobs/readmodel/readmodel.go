package readmodel

import (
	"errors"

	"github.com/uptrace/bun"

	"asterion/jobs"
	"asterion/jobs/registry"
	"asterion/jobs/usage"
)

// Config is what the read models read from.
type Config struct {
	// DB is the database (required).
	DB *bun.DB
	// Registry is the deferred-operation registry: the operation kinds it knows and the
	// operations' histories (required).
	Registry *registry.Registry
	// Meter reads the usage of jobs; nil when none is configured (a job then shows no usage).
	Meter *usage.Meter
}

func (c Config) validate() error {
	if c.DB == nil {
		return errors.New("readmodel: Config.DB is required")
	}
	if c.Registry == nil {
		return errors.New("readmodel: Config.Registry is required")
	}
	return nil
}

// Reads is the read side of prompt execution and the registry: lists with their filters and
// cursors, counts, details, the dashboard's series and liveness, the mission field, the
// metrics, each limited to what a jobs.Viewer may see. It writes nothing.
type Reads struct {
	db  *bun.DB
	reg *registry.Registry
	// meter reads the usage of jobs; nil when none is configured.
	meter *usage.Meter
}

// New returns the read models over cfg.
func New(cfg Config) (*Reads, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Reads{db: cfg.DB, reg: cfg.Registry, meter: cfg.Meter}, nil
}

// Of returns the read models over svc's database, registry and meter: what the server, the
// command line and the tests read a service's jobs and operations through.
func Of(svc *jobs.Service) *Reads {
	// A service always has its database and registry, so New cannot fail.
	r, _ := New(Config{DB: svc.DB(), Registry: svc.Registry(), Meter: svc.Meter()})
	return r
}
