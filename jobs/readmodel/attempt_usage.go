package readmodel

import (
	"context"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs/usage"
)

// JobUsage returns the usage of every attempt of a job, oldest first, and their sum; nothing
// when no meter is configured.
func (s *Reads) JobUsage(ctx context.Context, jobID uuid.UUID) ([]db.Attempt, usage.Total, error) {
	if s.meter == nil {
		return nil, usage.Total{}, nil
	}
	return s.meter.JobAttempts(ctx, jobID)
}
