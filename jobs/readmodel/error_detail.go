package readmodel

import (
	"asterion/jobs"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"
)

// ErrorDetail returns the full text of the job's latest provider failure ("" when it has none)
// for a viewer who sees the whole org (an operator or admin); anyone else gets jobs.ErrNotFound, as
// for a job they cannot see.
func (s *Reads) ErrorDetail(ctx context.Context, v jobs.Viewer, jobID uuid.UUID) (string, error) {
	if !v.OrgWide && !v.AllOrgs {
		return "", jobs.ErrNotFound
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
