package admit

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"
)

// A start checked inside the transaction that starts its job keeps its org's running counter
// locked until that transaction commits, so the starts of one busy org go one transaction at a
// time. HoldStart instead holds the start's running reservation ahead of that transaction, in a
// statement of its own that locks the counter only while it runs and commits without waiting
// for the disk; the change that moves the job to running takes the hold (see
// db/functions/asterion_budget_start_hold.sql). The rule stays Start's, one step across every
// process. A process sends the starts its workers ask for at once in one statement
// (start_batch.go).

// unbudgetedFor is how long an org found without a budget is not asked about again: its starts
// check the budget in their own statement meanwhile (StartRoomSQL), which costs an org without a
// budget nothing and still holds one set since, so a stale answer is never wrong, only slower.
const unbudgetedFor = 5 * time.Second

// StartHeld is the answer of HoldStart.
type StartHeld struct {
	jobID uuid.UUID
	// id names the hold, or is uuid.Nil when nothing is held.
	id uuid.UUID
}

// Held says whether the start's reservation is held: the statement that starts the job need not
// check the budget (StartRoomSQL), and the job's change to running takes the hold. When nothing
// is held (the org has no budget, or another start of the job holds one), it must.
func (h StartHeld) Held() bool { return h.id != uuid.Nil }

// startHoldRow is the start holds function's answer for one job.
type startHoldRow struct {
	Job     uuid.UUID `bun:"job"`
	Outcome string    `bun:"outcome"`
	Budget  int64     `bun:"budget"`
	Period  string    `bun:"period"`
	Used    int64     `bun:"used"`
	Running int64     `bun:"running"`
}

// unbudgeted remembers the orgs lately found without a budget.
type unbudgeted struct {
	mu    sync.Mutex
	until map[int64]time.Time
}

// known says whether org was found without a budget less than unbudgetedFor before now.
func (u *unbudgeted) known(org int64, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	until, ok := u.until[org]
	if ok && !now.Before(until) {
		delete(u.until, org)
		return false
	}
	return ok
}

// remember notes that org had no budget at now.
func (u *unbudgeted) remember(org int64, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.until[org] = now.Add(unbudgetedFor)
}

// HoldStart applies the budget to the queued job jobID of org about to start, ahead of the
// transaction that starts it, as Start does inside one. It returns a *BudgetWaitError when the
// period's usage plus the reservations of the org's running jobs reached the budget. Otherwise
// the answer says whether the start is held; a held start whose transaction did not commit (or
// may not have) must be given back with GiveBackStart, and one never given back is swept by a
// later hold of its org once older than any start can live.
func (a *Admission) HoldStart(ctx context.Context, jobID uuid.UUID, orgID int64) (StartHeld, error) {
	now := a.cfg.Now().UTC()
	if orgID <= 0 || a.unbudgeted.known(orgID, now) {
		return StartHeld{jobID: jobID}, nil
	}
	id := uuid.New()
	row, err := a.holdStart(ctx, jobID, id)
	if err != nil {
		return StartHeld{}, err
	}
	if row == nil {
		// The job is not queued: its start finds so itself.
		return StartHeld{jobID: jobID}, nil
	}
	switch row.Outcome {
	case "unbudgeted":
		a.unbudgeted.remember(orgID, now)
		return StartHeld{jobID: jobID}, nil
	case "held":
		return StartHeld{jobID: jobID, id: id}, nil
	case "full":
		st, err := standingOf(budgetRow{OrgID: orgID, Tokens: row.Budget, Period: row.Period, Used: row.Used, Reserved: row.Running}, now)
		if err != nil {
			return StartHeld{}, err
		}
		return StartHeld{}, &BudgetWaitError{Resets: st.resets}
	default:
		return StartHeld{jobID: jobID}, nil
	}
}

// GiveBackStart gives back the start hold h, whose transaction did not commit or may not have:
// a hold its start took is gone, and nothing is given back twice. A start that held nothing
// gives back nothing.
func (a *Admission) GiveBackStart(ctx context.Context, h StartHeld) error {
	if !h.Held() {
		return nil
	}
	if _, err := a.cfg.DB.NewRaw(startGiveBackSQL, h.jobID, h.id).Exec(ctx); err != nil {
		return fmt.Errorf("give back the start hold of job %s: %w", h.jobID, err)
	}
	return nil
}
