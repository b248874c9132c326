package fairshare

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
)

// ErrAtCap refuses a claim of an org that runs Config.OrgMaxRunning jobs already.
var ErrAtCap = errors.New("the org runs its most jobs at once")

// capLock is the advisory lock class of the running cap: claims of one org take it in their
// transaction, so two processes never both take the last slot.
const capLock int64 = 0x6f72676361700000

// UnderRunningCap takes the org's cap lock inside the claim's transaction tx and returns
// ErrAtCap when the org already runs its most jobs. Without a cap (or an org unknown to an old
// vehicle) it does nothing.
func (s *Share) UnderRunningCap(ctx context.Context, tx bun.Tx, org int64) error {
	limit := s.cfg.OrgMaxRunning
	if limit <= 0 || org <= 0 {
		return nil
	}
	if _, err := tx.Tx.ExecContext(ctx, advisoryLockSQL, capLock+org); err != nil {
		return fmt.Errorf("lock the running cap of org %d: %w", org, err)
	}
	var running int
	if err := tx.Tx.QueryRowContext(ctx, runningOfOrgSQL, org).Scan(&running); err != nil {
		return fmt.Errorf("count the running jobs of org %d: %w", org, err)
	}
	if running >= limit {
		return ErrAtCap
	}
	return nil
}
