package flowctl

import (
	"context"
	"errors"
	"fmt"

	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"
)

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
