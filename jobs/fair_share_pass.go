package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"

	"asterion/jobs/provider"
)

// refusedSQL locks org $1's best job refused for its cap whose vehicle sleeps (snoozed, so
// nobody holds it and no worker would fetch it yet), with that vehicle, skipping rows another
// transaction holds. Like candidateSQL it looks at the org's first 64 queued jobs only.
const refusedSQL = `WITH head AS MATERIALIZED (
    SELECT a.id, asterion_band(a.priority) AS band, a.created_at FROM sa_job AS a
    WHERE a.state = 'queued' AND a.org_id = $1
    ORDER BY a.org_id, asterion_band(a.priority), a.created_at LIMIT 64)
SELECT j.id, j.river_job_id, j.priority, coalesce(j.execution_options ->> 'model', ''),
    (SELECT e.body FROM sa_entity AS e WHERE e.id = j.prompt_id)
FROM head
JOIN sa_job AS j ON j.id = head.id
JOIN river_job AS v ON v.id = j.river_job_id
WHERE j.state = 'queued' AND j.waiting_for = 'org_share' AND j.scheduled_at <= now()
  AND (v.state IN ('scheduled', 'retryable') OR (v.state = 'available' AND v.scheduled_at > now()))
ORDER BY head.band, head.created_at
LIMIT 1
FOR UPDATE OF j, v SKIP LOCKED`

// passOn hands the running slot an execution of org has just given up to the org's best job
// refused for its cap, so the cap is used fully instead of waiting for refused vehicles to
// wake: the job moves from its sleeping vehicle (cancelled through River) to a new one, whose
// insert River announces to every worker at once. (River's JobRetry would wake the old
// vehicle but announces nothing, so it would wait for a worker's next poll.) A failure
// changes only how soon the job runs, so it is logged, not returned.
func (f *fairShare) passOn(ctx context.Context, orgID int64) {
	if f.cfg.OrgMaxRunning <= 0 || orgID <= 0 {
		return
	}
	err := f.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		var id uuid.UUID
		var old int64
		args := PromptArgs{OrgID: orgID}
		var body sql.NullString
		err := tx.Tx.QueryRowContext(ctx, refusedSQL, orgID).Scan(&id, &old, &args.Priority, &args.Model, &body)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find a refused job: %w", err)
		}
		args.JobID, args.Tokens = id, provider.EstimateTokens(body.String)
		if _, err := f.insert.JobCancelTx(ctx, tx.Tx, old); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("cancel the sleeping vehicle %d of job %s: %w", old, id, err)
		}
		res, err := f.insert.InsertTx(ctx, tx.Tx, args, &river.InsertOpts{Queue: QueuePrompts,
			Priority: RiverPriority(args.Priority), MaxAttempts: vehicleMaxAttempts})
		if err != nil {
			return fmt.Errorf("new vehicle for job %s: %w", id, err)
		}
		moved, err := tx.Tx.ExecContext(ctx, `UPDATE sa_job SET river_job_id = $1 WHERE id = $2 AND river_job_id = $3 AND state = 'queued'`,
			res.Job.ID, id, old)
		if err != nil {
			return fmt.Errorf("move job %s to vehicle %d: %w", id, res.Job.ID, err)
		}
		if n, _ := moved.RowsAffected(); n != 1 {
			return fmt.Errorf("move job %s to vehicle %d: it changed under the lock", id, res.Job.ID)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		f.log.Warn("passing a running slot on to a refused job failed", "org_id", orgID, "err", err)
	}
}
