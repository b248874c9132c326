package admit

import (
	"context"
	"fmt"

	"github.com/uptrace/bun"
)

// quotaRetryAfter is the Retry-After of a full queue quota: a slot frees when a job ends.
const quotaRetryAfter = 5

// activeJobs counts org's queued and running jobs in tx.
func (a *Admission) activeJobs(ctx context.Context, tx bun.Tx, orgID int64) (int64, error) {
	var n int64
	if err := tx.NewRaw(activeJobsSQL, orgID).Scan(ctx, &n); err != nil {
		return 0, fmt.Errorf("count the active jobs of org %d: %w", orgID, err)
	}
	return n, nil
}
