package jobs

import (
	"context"
	"fmt"
	"time"
)

// ArchiveOldJobs moves terminal jobs created before cutoff into sa_job_archive in batches and
// returns how many moved. A job that a live job supersedes stays until that successor is
// archived too, so supersede links never dangle.
func (s *Service) ArchiveOldJobs(ctx context.Context, cutoff time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	var total int64
	for {
		var n int64
		err := s.db.QueryRowContext(ctx, `
WITH picked AS (
    SELECT j.id FROM sa_job j
    WHERE j.state IN ('succeeded', 'failed', 'cancelled', 'superseded') AND j.created_at < ?
      AND NOT EXISTS (SELECT 1 FROM sa_job k WHERE k.supersedes = j.id)
    ORDER BY j.created_at LIMIT ? FOR UPDATE SKIP LOCKED
), moved AS (
    DELETE FROM sa_job j USING picked WHERE j.id = picked.id RETURNING j.*
), archived AS (
    INSERT INTO sa_job_archive SELECT moved.*, now() FROM moved RETURNING 1
)
SELECT count(*) FROM archived`, cutoff, batch).Scan(&n)
		if err != nil {
			return total, fmt.Errorf("archive jobs before %s: %w", cutoff.Format(time.RFC3339), err)
		}
		total += n
		// A batch frees the predecessors of what it moved, so keep going until one moves nothing.
		if n == 0 {
			return total, nil
		}
	}
}
