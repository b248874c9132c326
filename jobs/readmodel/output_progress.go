package readmodel

import (
	"asterion/jobs"
	"context"

	"asterion/db"
)

// OutputProgress returns how many chunks j's current attempt has written and about how many
// tokens they hold (the provider's pieces). A running job's figures are what its last
// heartbeat carried, read with the job; a settled job's are counted from its stored output,
// which is then complete. j comes from a read scoped to its viewer.
func (s *Reads) OutputProgress(ctx context.Context, j db.Job) (chunks, tokens int, err error) {
	if j.State == string(jobs.StateRunning) {
		return j.ProgressChunks, j.ProgressTokens, nil
	}
	return db.OutputProgress(ctx, s.db, j.ID, j.Attempt)
}
