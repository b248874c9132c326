package readmodel

import (
	"asterion/jobs"
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/google/uuid"

	"asterion/db"
)

// MaxOutputChunks is the most chunks one output read returns.
const MaxOutputChunks = 1000

// JobOutput is a job's live output after some seq.
type JobOutput struct {
	Job    db.Job
	Chunks []db.OutputChunk
	// Complete is true once the job is terminal and no chunk is left to read after these.
	Complete bool
}

// Output returns up to limit (at most MaxOutputChunks) chunks of the job's current attempt
// after seq, for a viewer who may see the job; another org's job is jobs.ErrNotFound.
func (s *Reads) Output(ctx context.Context, v jobs.Viewer, id uuid.UUID, after, limit int) (JobOutput, error) {
	if limit <= 0 || limit > MaxOutputChunks {
		limit = MaxOutputChunks
	}
	var job db.Job
	err := s.db.NewSelect().Model(&job).Where("id = ?", id).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Sees(job.OrgID, job.CreatedBy)) {
		return JobOutput{}, fmt.Errorf("job %s: %w", id, jobs.ErrNotFound)
	}
	if err != nil {
		return JobOutput{}, fmt.Errorf("get job %s: %w", id, err)
	}
	// One more than asked tells whether anything is left after the page.
	chunks, err := db.OutputAfter(ctx, s.db, job.ID, job.Attempt, max(after, 0), limit+1)
	if err != nil {
		return JobOutput{}, err
	}
	more := len(chunks) > limit
	if more {
		chunks = chunks[:limit]
	}
	// The job's state was read before its chunks: a job terminal then wrote its last chunk
	// before it settled, so nothing can follow these.
	return JobOutput{Job: job, Chunks: chunks, Complete: jobs.State(job.State).Terminal() && !more}, nil
}
