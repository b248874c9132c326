package jobs

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// errOrgAtCap refuses a claim of an org that runs OrgMaxRunning jobs already.
var errOrgAtCap = errors.New("the org runs its most jobs at once")

// orgCapRecheck is how soon the vehicle of a job refused for its org's cap is fetched again
// when no execution of the org has passed its slot on first (fairShare.passOn): the usual way
// a refused job runs is that a finishing execution wakes it.
const orgCapRecheck = time.Second

// orgCapLock is the advisory lock class of the running cap: claims of one org take it in their
// transaction, so two processes never both take the last slot.
const orgCapLock int64 = 0x6f72676361700000

// runningOfOrgSQL counts an org's running jobs.
const runningOfOrgSQL = `SELECT count(*) FROM sa_job WHERE org_id = $1 AND state = 'running'`

// underRunningCap takes the org's cap lock inside the claim's transaction and refuses the claim
// when the org already runs its most jobs. Without a cap (or an org unknown to an old vehicle)
// it does nothing.
func (s *admission) underRunningCap(ctx context.Context, tx bun.Tx, orgID int64) error {
	limit := s.cfg.OrgMaxRunning
	if limit <= 0 || orgID <= 0 {
		return nil
	}
	if _, err := tx.Tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, orgCapLock+orgID); err != nil {
		return fmt.Errorf("lock the running cap of org %d: %w", orgID, err)
	}
	var running int
	if err := tx.Tx.QueryRowContext(ctx, runningOfOrgSQL, orgID).Scan(&running); err != nil {
		return fmt.Errorf("count the running jobs of org %d: %w", orgID, err)
	}
	if running >= limit {
		return errOrgAtCap
	}
	return nil
}
