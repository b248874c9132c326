package admit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"asterion/jobs/usage"
)

// ErrBudgetWait is matched by a BudgetWaitError.
var ErrBudgetWait = errors.New("the org's running work holds its whole budget")

// BudgetWaitError says a job may not start yet: the usage of its org's period plus the
// reservations of the org's running jobs reached the budget.
type BudgetWaitError struct {
	// Resets is when the period ends; a job need not be looked at again later than that.
	Resets time.Time
}

func (e *BudgetWaitError) Error() string {
	return fmt.Sprintf("the org's budget is held by its usage and running work until %s", e.Resets.Format(time.RFC3339))
}

// Unwrap lets errors.Is(err, ErrBudgetWait) match.
func (e *BudgetWaitError) Unwrap() error { return ErrBudgetWait }

// budgetRow is an org's budget, locked for one admission or start, with what stands against
// it: the period's recorded usage and the reservations of the org's unfinished and running
// jobs (kept in the row by a trigger on the jobs).
type budgetRow struct {
	OrgID    int64  `bun:"org_id"`
	Tokens   int64  `bun:"tokens"`
	Period   string `bun:"period"`
	Used     int64  `bun:"used"`
	Reserved int64  `bun:"reserved"`
	Running  int64  `bun:"running"`
}

// lockBudgetsSQL locks the budget rows of a set of orgs, in org order, so that transactions
// that lock several never deadlock, and reads each with its period's usage; an org without a
// budget has no row and takes no lock. It is one statement whatever the org's backlog: the
// reservations are counters of the row less the releases not folded into it yet (those since
// the org's last accept or start), the usage a few shard rows of one period.
const lockBudgetsSQL = `SELECT b.org_id, b.tokens, b.period, b.reserved - coalesce(r.reserved, 0) AS reserved,
    b.running - coalesce(r.running, 0) AS running,
    (SELECT coalesce(sum(u.tokens), 0) FROM sa_usage_period AS u
     WHERE u.org_id = b.org_id AND u.period = b.period AND u.period_start = date_trunc(b.period, ?::timestamptz, 'UTC'))::bigint AS used
FROM sa_org_budget AS b
LEFT JOIN LATERAL (SELECT sum(x.reserved) AS reserved, sum(x.running) AS running FROM sa_budget_release AS x WHERE x.org_id = b.org_id) AS r ON true
WHERE b.org_id IN (?) ORDER BY b.org_id FOR UPDATE OF b`

// lockBudgets locks the budgets of orgs in tx and returns them by org, as they stand at now.
func lockBudgets(ctx context.Context, tx bun.Tx, orgs []int64, now time.Time) (map[int64]budgetRow, error) {
	orgs = slices.Clone(orgs)
	slices.Sort(orgs)
	orgs = slices.Compact(orgs)
	var rows []budgetRow
	if err := tx.NewRaw(lockBudgetsSQL, now, bun.List(orgs)).Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("lock the budgets of orgs %v: %w", orgs, err)
	}
	out := make(map[int64]budgetRow, len(rows))
	for _, r := range rows {
		out[r.OrgID] = r
	}
	return out, nil
}

// standing is where a locked budget stands: the period's recorded usage and the reservations
// of the org's jobs in some states.
type standing struct {
	budget   budgetRow
	used     int64
	reserved int64
	resets   time.Time
}

// full says whether the budget is reached.
func (s standing) full() bool { return s.used+s.reserved >= s.budget.Tokens }

// refusal is the budget refusal of s at now.
func (s standing) refusal(now time.Time) *BudgetExhaustedError {
	return &BudgetExhaustedError{Budget: s.budget.Tokens, Period: s.budget.Period, Used: s.used, Reserved: s.reserved,
		Resets: s.resets, Seconds: secondsUntil(now, s.resets)}
}

// standingOf is where the locked budget b stands at now, counting the reservations of its
// org's unfinished jobs, or only of its running ones.
func standingOf(b budgetRow, runningOnly bool, now time.Time) (standing, error) {
	p, err := usage.ParsePeriod(b.Period)
	if err != nil {
		return standing{}, fmt.Errorf("budget of org %d: %w", b.OrgID, err)
	}
	_, end := p.Bounds(now)
	reserved := b.Reserved
	if runningOnly {
		reserved = b.Running
	}
	return standing{budget: b, used: b.Used, reserved: reserved, resets: end}, nil
}

// StartRoomSQL is a condition on a sa_job row for a statement that starts the job: its org
// has no budget, or the period's usage plus the reservations of the org's running jobs leave
// room. It locks the org's budget row, so two such statements never both take the last of a
// budget (the second waits for the first to end and then reads the row the first one's job
// changed); the start's own reservation joins the row through the jobs' trigger. The period is
// the database's current one.
const StartRoomSQL = `coalesce((SELECT b.running - (SELECT coalesce(sum(x.running), 0) FROM sa_budget_release AS x WHERE x.org_id = b.org_id)
    + (SELECT coalesce(sum(u.tokens), 0) FROM sa_usage_period AS u
    WHERE u.org_id = b.org_id AND u.period = b.period AND u.period_start = date_trunc(b.period, now(), 'UTC')) < b.tokens
  FROM sa_org_budget AS b WHERE b.org_id = sa_job.org_id FOR UPDATE OF b), true)`

// Start applies the budget to a job of org about to start, inside the transaction that starts
// it: the org's budget row stays locked until that transaction ends, so two starts never both
// take the last of a budget. It returns nil when the job may start (or the org has no budget)
// and a *BudgetWaitError when the period's usage plus the reservations of the org's running
// jobs reached the budget.
func (a *Admission) Start(ctx context.Context, tx bun.Tx, orgID int64) error {
	if orgID <= 0 {
		return nil
	}
	now := a.cfg.Now().UTC()
	budgets, err := lockBudgets(ctx, tx, []int64{orgID}, now)
	if err != nil {
		return err
	}
	b, ok := budgets[orgID]
	if !ok {
		return nil
	}
	st, err := standingOf(b, true, now)
	if err != nil {
		return err
	}
	if st.full() {
		return &BudgetWaitError{Resets: st.resets}
	}
	return nil
}
