package flowctl

import (
	"context"
	"errors"
	"fmt"

	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"
)

// waitersSQL finds the sleeping vehicles of the jobs waiting for provider capacity on model
// ($1; a job that names no model asks for the provider's default, which may be this one, and
// waking it needlessly costs one reservation). Only a vehicle River would not run yet is
// taken: one already running meets the resumed model when it asks. The lock keeps River from
// finishing a vehicle between this read and its retry, which would otherwise revive it.
// 'provider_capacity' is the waiting_for the execution core writes (jobs.WaitingProviderCapacity).
const waitersSQL = `SELECT v.id
FROM sa_job AS j
JOIN river_job AS v ON v.id = j.river_job_id
WHERE j.state = 'queued' AND j.waiting_for = 'provider_capacity' AND j.scheduled_at <= now()
  AND coalesce(j.execution_options ->> 'model', '') IN ($1, '')
  AND (v.state IN ('scheduled', 'retryable') OR (v.state = 'available' AND v.scheduled_at > now()))
FOR UPDATE OF v SKIP LOCKED`

// wakeWaiters makes the vehicles of the jobs waiting for model available now, inside tx, so
// they run as soon as a worker polls instead of when their snooze would have ended. River's
// JobRetry does it and keeps River's own bookkeeping; it announces nothing, so pickup waits
// for the workers' next fetch poll (under a second).
func (c *Control) wakeWaiters(ctx context.Context, tx bun.Tx, model string) (int, error) {
	rows, err := tx.Tx.QueryContext(ctx, waitersSQL, model)
	if err != nil {
		return 0, fmt.Errorf("find the jobs waiting for model %s: %w", model, err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return 0, fmt.Errorf("find the jobs waiting for model %s: %w", model, err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, fmt.Errorf("find the jobs waiting for model %s: %w", model, err)
	}
	for _, id := range ids {
		if _, err := c.cfg.River.JobRetryTx(ctx, tx.Tx, id); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return 0, fmt.Errorf("wake vehicle %d waiting for model %s: %w", id, model, err)
		}
	}
	return len(ids), nil
}
