package maintenance

import (
	"context"
	"fmt"
	"time"

	"github.com/uptrace/bun"
)

// jobColumns are the columns sa_job and sa_job_archive share, named so that the archive's
// column order (its own archived_at among them) never matters.
const jobColumns = `id, prompt_id, state, priority, attempt, max_attempts, execution_options, worker_claim,
    claimed_at, started_at, running_heartbeat_at, finished_at, response_id, error_kind, error_message, supersedes,
    org_id, created_by, created_at, updated_at, river_job_id, scheduled_at, operation_id, cancel_outcome,
    waiting_for, scheduled_for`

// archiveSQL moves one batch of old terminal jobs, with their live output, to the archive.
const archiveSQL = `
WITH picked AS (
    SELECT j.id FROM sa_job j
    WHERE j.state IN ('succeeded', 'failed', 'cancelled', 'superseded') AND j.created_at < ?
      AND NOT EXISTS (SELECT 1 FROM sa_job k WHERE k.supersedes = j.id)
    ORDER BY j.created_at LIMIT ? FOR UPDATE SKIP LOCKED
), moved_output AS (
    DELETE FROM sa_job_output o USING picked WHERE o.job_id = picked.id
    RETURNING o.job_id, o.attempt, o.seq, o.text, o.pieces, o.prompt_id, o.org_id, o.created_by, o.at
), archived_output AS (
    INSERT INTO sa_job_output_archive (job_id, attempt, seq, text, pieces, prompt_id, org_id, created_by, at)
    SELECT * FROM moved_output
), moved AS (
    DELETE FROM sa_job j USING picked WHERE j.id = picked.id RETURNING j.*
), archived AS (
    INSERT INTO sa_job_archive (` + jobColumns + `, archived_at)
    SELECT ` + jobColumns + `, now() FROM moved RETURNING 1
)
SELECT count(*) FROM archived`

// ArchiveOldJobs moves terminal jobs created before cutoff into sa_job_archive, and their live
// output into sa_job_output_archive, in batches of batch (default 1000), and returns how many
// jobs moved. A job that a live job supersedes stays until that successor is archived too, so
// supersede links never dangle.
func ArchiveOldJobs(ctx context.Context, idb bun.IDB, cutoff time.Time, batch int) (int64, error) {
	if batch <= 0 {
		batch = 1000
	}
	var total int64
	for {
		var n int64
		err := idb.QueryRowContext(ctx, archiveSQL, cutoff, batch).Scan(&n)
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
