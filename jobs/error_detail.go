package jobs

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// recordErrorDetail keeps the full text of a job's latest failure for operators.
func recordErrorDetail(ctx context.Context, tx bun.Tx, jobID uuid.UUID, attempt int, detail string) error {
	_, err := tx.ExecContext(ctx, `INSERT INTO sa_job_error (job_id, attempt, detail) VALUES (?, ?, ?)
		ON CONFLICT (job_id) DO UPDATE SET attempt = EXCLUDED.attempt, detail = EXCLUDED.detail, at = now()`,
		jobID, attempt, detail)
	if err != nil {
		return fmt.Errorf("record error detail of job %s: %w", jobID, err)
	}
	return nil
}
