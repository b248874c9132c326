package flowctl

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverdatabasesql"
	"github.com/uptrace/bun"

	"asterion/jobs/governor"
	"asterion/jobs/registry"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound means no such org in the caller's view (another org's id included).
	ErrNotFound = registry.ErrNotFound
	// ErrForbidden means the caller's role does not allow the action.
	ErrForbidden = errors.New("not allowed")
	// ErrPauseHeld means a higher role than the caller's set the pause it would change (an
	// admin's pause of an operator's org). It is also ErrForbidden.
	ErrPauseHeld = fmt.Errorf("%w: a higher role set this pause", ErrForbidden)
	// ErrInvalid means the request names nothing an operator can act on (an empty model).
	ErrInvalid = registry.ErrInvalid
)

// Viewer is who asks; Actor is who acts, for the audit trail.
type (
	Viewer = registry.Viewer
	Actor  = registry.Actor
)

// Config configures a Control.
type Config struct {
	// DB holds the state. Required.
	DB *bun.DB
	// Governor is the provider governor whose configured limits the views show. Default: a
	// governor on DB with no configured limits (the learned ones still show).
	Governor *governor.Governor
	// River is the insert-only River client that wakes the vehicles of jobs waiting for a
	// model an operator resumes. Default: one on DB.
	River *river.Client[*sql.Tx]
}

func (c *Config) validate() error {
	if c.DB == nil {
		return errors.New("flowctl: DB is required")
	}
	if c.Governor == nil {
		g, err := governor.New(governor.Config{DB: c.DB})
		if err != nil {
			return fmt.Errorf("flowctl: %w", err)
		}
		c.Governor = g
	}
	if c.River == nil {
		r, err := river.NewClient(riverdatabasesql.New(c.DB.DB), &river.Config{})
		if err != nil {
			return fmt.Errorf("flowctl: insert-only river client: %w", err)
		}
		c.River = r
	}
	return nil
}

// Control reads and steers flow control for operators.
type Control struct {
	cfg Config
}

// New validates cfg and returns a Control.
func New(cfg Config) (*Control, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Control{cfg: cfg}, nil
}

// orgScope is the org a viewer's reads are limited to, zero for every org.
func orgScope(v Viewer) int64 {
	if v.AllOrgs {
		return 0
	}
	return v.OrgID
}
