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
// it: the period's recorded usage and the reservations the door checks (of the org's
// unfinished jobs for an admission, of its running ones for a start), kept in counters by a
// trigger on the jobs.
type budgetRow struct {
	OrgID    int64  `bun:"org_id"`
	Tokens   int64  `bun:"tokens"`
	Period   string `bun:"period"`
	Used     int64  `bun:"used"`
	Reserved int64  `bun:"reserved"`
}

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

// standingOf is where the locked budget b stands at now.
func standingOf(b budgetRow, now time.Time) (standing, error) {
	p, err := usage.ParsePeriod(b.Period)
	if err != nil {
		return standing{}, fmt.Errorf("budget of org %d: %w", b.OrgID, err)
	}
	_, end := p.Bounds(now)
	return standing{budget: b, used: b.Used, reserved: b.Reserved, resets: end}, nil
}

// Start applies the budget to a job of org about to start, inside the transaction that starts
// it: the org's running counter stays locked until that transaction ends, so two starts never
// both take the last of a budget (an admission, which locks the budget row, does not wait). It
// returns nil when the job may start (or the org has no budget) and a *BudgetWaitError when
// the period's usage plus the reservations of the org's running jobs reached the budget.
func (a *Admission) Start(ctx context.Context, tx bun.Tx, orgID int64) error {
	if orgID <= 0 {
		return nil
	}
	now := a.cfg.Now().UTC()
	var rows []budgetRow
	if err := tx.NewRaw(lockRunningSQL, now, orgID).Scan(ctx, &rows); err != nil {
		return fmt.Errorf("lock the running budget of org %d: %w", orgID, err)
	}
	if len(rows) == 0 {
		return nil
	}
	st, err := standingOf(rows[0], now)
	if err != nil {
		return err
	}
	if st.full() {
		return &BudgetWaitError{Resets: st.resets}
	}
	return nil
}
