package jobs

import (
	"context"
	"errors"
	"fmt"

	"asterion/jobs/usage"
)

// ErrBudgetExhausted is matched by a BudgetExhaustedError.
var ErrBudgetExhausted = errors.New("the org's token budget is spent")

// BudgetExhaustedError refuses a submit of an org whose usage in the current period reached
// its budget. A job already running finishes and is counted.
type BudgetExhaustedError struct {
	Status usage.Status
	// RetryAfter is the whole seconds until the period resets.
	RetryAfter int
}

func (e *BudgetExhaustedError) Error() string {
	return fmt.Sprintf("the org used %d of its %d tokens this %s; the budget resets in %d s",
		e.Status.Used, e.Status.Budget.Tokens, e.Status.Budget.Period, e.RetryAfter)
}

// Unwrap lets errors.Is(err, ErrBudgetExhausted) match.
func (e *BudgetExhaustedError) Unwrap() error { return ErrBudgetExhausted }

// checkBudget refuses a submit of orgID once its budget is spent.
func (s *admission) checkBudget(ctx context.Context, orgID int64) error {
	if s.cfg.Usage == nil {
		return nil
	}
	st, err := s.cfg.Usage.Status(ctx, orgID)
	if err != nil {
		return err
	}
	if st.Exhausted() {
		return &BudgetExhaustedError{Status: st, RetryAfter: st.RetryAfter(s.cfg.Now())}
	}
	return nil
}
