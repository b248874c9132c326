package handlers

import (
	"context"

	"asterion/db"
	"asterion/jobs"
)

// operatorErrorText is the failure text the operator dashboard shows for job: the provider's
// full detail when there is one (operators may see it; members see error_message only), else
// error_message.
func (s *Server) operatorErrorText(ctx context.Context, v jobs.Viewer, job db.Job) (string, error) {
	if job.ErrorMessage == nil {
		return "", nil
	}
	detail, err := s.deps.Reads.ErrorDetail(ctx, v, job.ID)
	if err != nil || detail == "" {
		return *job.ErrorMessage, err
	}
	return detail, nil
}
