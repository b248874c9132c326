package fairshare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/uptrace/bun"
)

// Config configures a Share. DB, Queue and, for the cap to pass slots on, Revehicle come from
// the execution core; the rest has defaults.
type Config struct {
	// DB is the database of the jobs and of River's queue.
	DB *bun.DB
	// Logger receives what a failed pass-on says (default slog.Default()).
	Logger *slog.Logger
	// Queue is the River queue whose vehicles carry prompt jobs (required).
	Queue string
	// OrgMaxRunning, when positive, caps the jobs of one org running at once, across every
	// process; 0 means no cap.
	OrgMaxRunning int
	// PausedRecheck is how soon the vehicle of a paused org's job that found nothing else to
	// carry is fetched again: a resume is seen within it (default 3 s).
	PausedRecheck time.Duration
	// CapRecheck is how soon the vehicle of a job refused for its org's cap is fetched again
	// when no execution of the org has passed its slot on first (default 1 s): the usual way
	// a refused job runs is that a finishing execution wakes it (PassOn).
	CapRecheck time.Duration
	// MaxOrgProbes bounds the other orgs one dispatch looks into for a claimable job before it
	// settles for its own org's (default 8).
	MaxOrgProbes int
	// Revehicle, in tx, ends the sleeping vehicle old of a job refused for its cap and inserts
	// a new vehicle carrying args, announced to every worker, returning the new vehicle's id.
	// Nil leaves PassOn off: refused jobs then wait for their vehicle's CapRecheck.
	Revehicle func(ctx context.Context, tx *sql.Tx, old int64, args Args) (int64, error)
}

// validate fills in the defaults and rejects bad values.
func (c *Config) validate() error {
	switch {
	case c.DB == nil:
		return errors.New("fairshare: Config.DB is required")
	case c.Queue == "":
		return errors.New("fairshare: Config.Queue is required")
	case c.OrgMaxRunning < 0:
		return fmt.Errorf("fairshare: Config.OrgMaxRunning %d is negative", c.OrgMaxRunning)
	case c.PausedRecheck < 0:
		return fmt.Errorf("fairshare: Config.PausedRecheck %s is negative", c.PausedRecheck)
	case c.CapRecheck < 0:
		return fmt.Errorf("fairshare: Config.CapRecheck %s is negative", c.CapRecheck)
	case c.MaxOrgProbes < 0:
		return fmt.Errorf("fairshare: Config.MaxOrgProbes %d is negative", c.MaxOrgProbes)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.PausedRecheck == 0 {
		c.PausedRecheck = 3 * time.Second
	}
	if c.CapRecheck == 0 {
		c.CapRecheck = time.Second
	}
	if c.MaxOrgProbes == 0 {
		c.MaxOrgProbes = 8
	}
	return nil
}
