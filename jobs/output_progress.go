package jobs

import (
	"context"

	"asterion/db"
)

// OutputProgress returns how many chunks j's current attempt has written and about how many
// tokens they hold (the provider's pieces). j comes from a read scoped to its viewer.
func (s *Reads) OutputProgress(ctx context.Context, j db.Job) (chunks, tokens int, err error) {
	return db.OutputProgress(ctx, s.db, j.ID, j.Attempt)
}
