package jobs

import (
	"context"
	"database/sql"
	"errors"
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

// ErrorDetail returns the full text of the job's latest provider failure ("" when it has none)
// for a viewer who sees the whole org (an operator or admin); anyone else gets ErrNotFound, as
// for a job they cannot see.
func (s *Reads) ErrorDetail(ctx context.Context, v Viewer, jobID uuid.UUID) (string, error) {
	if !v.OrgWide && !v.AllOrgs {
		return "", ErrNotFound
	}
	q := s.db.NewSelect().TableExpr("sa_job_error AS e").Join("JOIN sa_job AS j ON j.id = e.job_id").
		ColumnExpr("e.detail").Where("e.job_id = ?", jobID).
		Where("j.error_message IS NOT NULL") // a job that succeeded on a later attempt has no failure to explain
	if !v.AllOrgs {
		q = q.Where("j.org_id = ?", v.OrgID)
	}
	var detail string
	err := q.Scan(ctx, &detail)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read error detail of job %s: %w", jobID, err)
	}
	return detail, nil
}
