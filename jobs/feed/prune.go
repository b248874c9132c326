package feed

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"asterion/db"
)

// Prune deletes numbered events older than keep; readers that fall further behind resync from
// a snapshot instead. It deletes the events numbered before the first one created at or after
// now-keep, so the kept events always run without a gap from the oldest to the newest number
// (Replay's check of what is retained relies on it): an old event numbered after a young one
// waits for the next prune. The feed has no index on its creation time, which every event would
// pay for twice (written, then numbered); the walk in number order visits what it deletes, and
// the delete names both ends of its range of numbers, which keeps it on the numbers' index
// even before the planner has statistics of the table.
func Prune(ctx context.Context, bunDB bun.IDB, keep time.Duration) (int64, error) {
	var oldest, young sql.NullInt64
	var last int64
	if err := bunDB.QueryRowContext(ctx, pruneBoundsSQL, time.Now().Add(-keep)).Scan(&oldest, &young, &last); err != nil {
		return 0, fmt.Errorf("prune events: find the oldest event to keep: %w", err)
	}
	below := last + 1
	if young.Valid {
		below = young.Int64
	}
	if !oldest.Valid || oldest.Int64 >= below {
		return 0, nil
	}
	res, err := bunDB.NewDelete().Model((*db.Event)(nil)).
		Where("seq IS NOT NULL AND seq >= ? AND seq < ?", oldest.Int64, below).Exec(ctx)
	if err != nil {
		return 0, fmt.Errorf("prune events numbered %d to %d: %w", oldest.Int64, below-1, err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
