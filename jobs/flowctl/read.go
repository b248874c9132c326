package flowctl

import (
	"context"
	"fmt"
	"time"

	"asterion/jobs/governor"
	"asterion/jobs/usage"
)

// maxOrgs bounds the org rows one read returns.
const maxOrgs = 500

// OrgFlow is one org as flow control sees it now.
type OrgFlow struct {
	OrgID int64
	Org   string
	// Running and Queued are its jobs in those states.
	Running, Queued int64
	// Weight is its weight in the fair share of running slots; Paused whether an operator
	// paused its work.
	Weight int
	Paused bool
	// PausedBy, PausedRole and PausedActor say who set the pause (the user, nil for the
	// command line; its role, "" for a pause recorded before roles were; its name in the audit
	// trail).
	PausedBy    *int64
	PausedRole  string
	PausedActor string
	// Held means the viewer may not change the pause: a higher role set it.
	Held bool
	// Budget is its token budget (Tokens zero: none); Used what it recorded in the current
	// period of the budget, which ends at Resets.
	Budget usage.Budget
	Used   int64
	Resets time.Time
}

// Orgs returns the orgs v sees (an admin every org, an operator its own), by name.
func (c *Control) Orgs(ctx context.Context, v Viewer) ([]OrgFlow, error) {
	rows, err := c.cfg.DB.DB.QueryContext(ctx, orgFlowsSQL, orgScope(v), maxOrgs)
	if err != nil {
		return nil, fmt.Errorf("read the orgs' flow control: %w", err)
	}
	defer rows.Close()
	now := time.Now()
	var out []OrgFlow
	for rows.Next() {
		var (
			o      OrgFlow
			period string
		)
		if err := rows.Scan(&o.OrgID, &o.Org, &o.Running, &o.Queued, &o.Weight, &o.Paused, &o.PausedBy, &o.PausedRole,
			&o.PausedActor, &o.Budget.Tokens, &period,
			&o.Used); err != nil {
			return nil, fmt.Errorf("read the orgs' flow control: %w", err)
		}
		o.Held = o.Paused && !mayChange(v, o.PausedRole)
		if o.Budget.Tokens > 0 {
			p, err := usage.ParsePeriod(period)
			if err != nil {
				return nil, err
			}
			o.Budget.Period = p
			_, o.Resets = p.Bounds(now)
		}
		out = append(out, o)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the orgs' flow control: %w", err)
	}
	return out, nil
}

// Models returns every model the governor has seen, with the limits in force. Models are the
// provider account's, shared by every org, so every operator may see them.
func (c *Control) Models(ctx context.Context) ([]governor.State, error) {
	return c.cfg.Governor.States(ctx)
}

// PerMinute returns the usage per minute and model of the attempts v sees (an admin every
// org's, an operator its org's) that finished at or after since.
func (c *Control) PerMinute(ctx context.Context, v Viewer, since time.Time) ([]usage.MinuteUsage, error) {
	return usage.PerMinute(ctx, c.cfg.DB, since, orgScope(v))
}
