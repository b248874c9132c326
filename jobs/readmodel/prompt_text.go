package readmodel

import (
	"context"
	"fmt"

	"asterion/db"
	"asterion/jobs"
)

// PromptText returns the whole text of the prompt job runs, for the job document: the mission
// reads carry only its first MissionTextCap characters. The viewer must see the job (else
// jobs.ErrNotFound); every job of a prompt has its prompt's org and creator.
func (s *Reads) PromptText(ctx context.Context, v jobs.Viewer, job db.Job) (string, error) {
	if !v.Sees(job.OrgID, job.CreatedBy) {
		return "", fmt.Errorf("prompt of job %s: %w", job.ID, jobs.ErrNotFound)
	}
	var text string
	if err := s.db.NewSelect().Model((*db.Entity)(nil)).Column("body").Where("id = ?", job.PromptID).
		Scan(ctx, &text); err != nil {
		return "", fmt.Errorf("read the prompt of job %s: %w", job.ID, err)
	}
	return text, nil
}
