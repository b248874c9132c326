package jobs

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// recordErrorDetail keeps the full text of a job's latest failure for operators.
func recordErrorDetail(ctx context.Context, tx bun.Tx, jobID uuid.UUID, attempt int, detail string) error {
	_, err := tx.Tx.ExecContext(ctx, recordErrorDetailSQL, jobID.String(), attempt, detail)
	if err != nil {
		return fmt.Errorf("record error detail of job %s: %w", jobID, err)
	}
	return nil
}
