package fairshare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

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

// moveJobSQL moves queued job $2 from vehicle $3 to vehicle $1.
const moveJobSQL = `UPDATE sa_job SET river_job_id = $1 WHERE id = $2 AND river_job_id = $3 AND state = 'queued'`

// PassOn hands the running slot an execution of org has just given up to the org's best job
// refused for its cap, so the cap is used fully instead of waiting for refused vehicles to
// wake: the job moves from its sleeping vehicle (ended by Config.Revehicle) to a new one, whose
// insert River announces to every worker at once. (River's JobRetry would wake the old
// vehicle but announces nothing, so it would wait for a worker's next poll.) A failure
// changes only how soon the job runs, so it is logged, not returned.
func (s *Share) PassOn(ctx context.Context, org int64) {
	if s.cfg.OrgMaxRunning <= 0 || org <= 0 || s.cfg.Revehicle == nil {
		return
	}
	err := s.cfg.DB.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		args := Args{Org: org}
		var old int64
		var body sql.NullString
		err := tx.Tx.QueryRowContext(ctx, refusedSQL, org).Scan(&args.Job, &old, &args.Priority, &args.Model, &body)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find a refused job: %w", err)
		}
		args.Tokens = provider.EstimateTokens(body.String)
		vehicle, err := s.cfg.Revehicle(ctx, tx.Tx, old, args)
		if err != nil {
			return fmt.Errorf("new vehicle for job %s: %w", args.Job, err)
		}
		moved, err := tx.Tx.ExecContext(ctx, moveJobSQL, vehicle, args.Job, old)
		if err != nil {
			return fmt.Errorf("move job %s to vehicle %d: %w", args.Job, vehicle, err)
		}
		if n, _ := moved.RowsAffected(); n != 1 {
			return fmt.Errorf("move job %s to vehicle %d: it changed under the lock", args.Job, vehicle)
		}
		return nil
	})
	if err != nil && ctx.Err() == nil {
		s.cfg.Logger.Warn("passing a running slot on to a refused job failed", "org_id", org, "err", err)
	}
}
