package admit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/uptrace/bun"

	"asterion/db"
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

// budgetRow is an org's budget, locked for one admission or start.
type budgetRow struct {
	OrgID  int64  `bun:"org_id"`
	Tokens int64  `bun:"tokens"`
	Period string `bun:"period"`
}

// lockBudgetsSQL locks the budget rows of a set of orgs, in org order, so that transactions
// that lock several never deadlock; an org without a budget has no row and takes no lock.
const lockBudgetsSQL = `SELECT org_id, tokens, period FROM sa_org_budget WHERE org_id IN (?) ORDER BY org_id FOR UPDATE`

// reservedSQL sums the reservations of an org's jobs in the states named, from the
// trigger-kept counters.
const reservedSQL = `SELECT coalesce(sum(tokens), 0) FROM sa_job_count WHERE org_id = ? AND state IN (?)`

// unfinished are the states whose jobs hold their reservation at admission.
var unfinished = []string{"queued", "running"}

// lockBudgets locks the budgets of orgs in tx and returns them by org.
func lockBudgets(ctx context.Context, tx bun.Tx, orgs []int64) (map[int64]budgetRow, error) {
	orgs = slices.Clone(orgs)
	slices.Sort(orgs)
	orgs = slices.Compact(orgs)
	var rows []budgetRow
	if err := tx.NewRaw(lockBudgetsSQL, bun.List(orgs)).Scan(ctx, &rows); err != nil {
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

// standingOf reads where budget stands at now, counting the reservations of its org's jobs in
// states, inside the transaction that locked it.
func standingOf(ctx context.Context, tx bun.Tx, b budgetRow, states []string, now time.Time) (standing, error) {
	p, err := usage.ParsePeriod(b.Period)
	if err != nil {
		return standing{}, fmt.Errorf("budget of org %d: %w", b.OrgID, err)
	}
	start, end := p.Bounds(now)
	used, err := db.PeriodUsage(ctx, tx, b.OrgID, b.Period, start)
	if err != nil {
		return standing{}, err
	}
	var reserved int64
	if err := tx.NewRaw(reservedSQL, b.OrgID, bun.List(states)).Scan(ctx, &reserved); err != nil {
		return standing{}, fmt.Errorf("sum the reservations of org %d: %w", b.OrgID, err)
	}
	return standing{budget: b, used: used, reserved: reserved, resets: end}, nil
}

// Start applies the budget to a job of org about to start, inside the transaction that starts
// it: the org's budget row stays locked until that transaction ends, so two starts never both
// take the last of a budget. It returns nil when the job may start (or the org has no budget)
// and a *BudgetWaitError when the period's usage plus the reservations of the org's running
// jobs reached the budget.
func (a *Admission) Start(ctx context.Context, tx bun.Tx, orgID int64) error {
	if orgID <= 0 {
		return nil
	}
	budgets, err := lockBudgets(ctx, tx, []int64{orgID})
	if err != nil {
		return err
	}
	b, ok := budgets[orgID]
	if !ok {
		return nil
	}
	st, err := standingOf(ctx, tx, b, []string{"running"}, a.cfg.Now().UTC())
	if err != nil {
		return err
	}
	if st.full() {
		return &BudgetWaitError{Resets: st.resets}
	}
	return nil
}
