package jobs

import (
	"errors"
	"time"

	"asterion/jobs/admit"
)

// WaitingBudget: the job's org has its budget held by its period's usage and its running
// jobs; the job starts once the period ends or the budget is raised or cleared.
const WaitingBudget = "budget"

// budgetRecheck is the longest a vehicle of a job waiting for its org's budget sleeps before
// it looks again: a budget raised or cleared is seen within it.
const budgetRecheck = 15 * time.Second

// budgetWaitOf is the claim's answer to a start admission refused: wait until the period
// resets, or budgetRecheck, whichever comes first.
func budgetWaitOf(err error) claimResult {
	wait := budgetRecheck
	var bw *admit.BudgetWaitError
	if errors.As(err, &bw) {
		wait = min(wait, max(time.Until(bw.Resets), time.Second))
	}
	return claimResult{outcome: claimWait, wait: wait, reason: "the org's budget is held by its usage and running jobs"}
}
