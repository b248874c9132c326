package fairshare

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/jobs/provider"
)

// refusedSQL lists, best first, up to 8 of org $1's jobs refused for its cap whose vehicle
// sleeps (snoozed, so nobody holds it and no worker would fetch it yet), with that vehicle and
// what the governor needs of the job. Like candidatesSQL it looks at the org's first 64 queued
// jobs only, reads every table by key or by the head of idx_job_queued_org, and locks nothing.
const refusedSQL = `SELECT h.id, h.river_job_id, h.priority, coalesce(h.execution_options ->> 'model', ''),
    (SELECT e.body FROM sa_entity AS e WHERE e.id = h.prompt_id)
FROM (
    SELECT a.id, a.river_job_id, a.priority, a.execution_options, a.prompt_id, a.waiting_for, a.scheduled_at,
        asterion_band(a.priority) AS band, a.created_at
    FROM sa_job AS a
    WHERE a.state = 'queued' AND a.org_id = $1
    ORDER BY a.org_id, asterion_band(a.priority), a.created_at LIMIT 64) AS h
WHERE h.waiting_for = 'org_share' AND h.scheduled_at <= now()
  AND (SELECT v.state = 'scheduled' OR v.state = 'retryable' OR (v.state = 'available' AND v.scheduled_at > now())
       FROM river_job AS v WHERE v.id = h.river_job_id)
ORDER BY h.band, h.created_at
LIMIT 8`

// lockRefusedSQL locks job $1 and its sleeping vehicle $2 if the job still waits for its org's
// share on it, skipping rows another transaction holds.
const lockRefusedSQL = `SELECT j.id FROM sa_job AS j, river_job AS v
WHERE j.id = $1 AND v.id = $2 AND j.river_job_id = v.id
  AND j.state = 'queued' AND j.waiting_for = 'org_share' AND j.scheduled_at <= now()
  AND (v.state IN ('scheduled', 'retryable') OR (v.state = 'available' AND v.scheduled_at > now()))
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
		args, old, err := lockRefused(ctx, tx, org)
		if errors.Is(err, sql.ErrNoRows) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("find a refused job: %w", err)
		}
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

// lockRefused locks org's best job refused for its cap on a sleeping vehicle, and that
// vehicle; sql.ErrNoRows means none.
func lockRefused(ctx context.Context, tx bun.Tx, org int64) (Args, int64, error) {
	type refused struct {
		args    Args
		vehicle int64
	}
	var list []refused
	rows, err := tx.Tx.QueryContext(ctx, refusedSQL, org)
	if err != nil {
		return Args{}, 0, err
	}
	for rows.Next() {
		r := refused{args: Args{Org: org}}
		var body sql.NullString
		if err := rows.Scan(&r.args.Job, &r.vehicle, &r.args.Priority, &r.args.Model, &body); err != nil {
			rows.Close()
			return Args{}, 0, err
		}
		r.args.Tokens = provider.EstimateTokens(body.String)
		list = append(list, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return Args{}, 0, err
	}
	for _, r := range list {
		var id uuid.UUID
		err := tx.Tx.QueryRowContext(ctx, lockRefusedSQL, r.args.Job, r.vehicle).Scan(&id)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return Args{}, 0, err
		}
		return r.args, r.vehicle, nil
	}
	return Args{}, 0, sql.ErrNoRows
}
