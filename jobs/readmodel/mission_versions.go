package readmodel

import (
	"asterion/jobs"
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"asterion/db"
)

// MissionVersion names what one drop of the mission field shows: its prompt and that prompt's
// newest job, with the job's state and last change. Every write to a job sets its updated_at
// to the writing transaction's start, and whatever else a drop shows is fixed once its newest
// job is terminal (the prompt, the job's response, the output of a finished attempt, the jobs
// it superseded), or comes with a new newest job (a retry): so a terminal drop read once is the
// same as long as its job id and updated_at are.
type MissionVersion struct {
	PromptID  uuid.UUID
	JobID     uuid.UUID
	State     string
	UpdatedAt time.Time
}

// preparedWatermarkSQL is changeWatermarkSQL with its placeholder numbered, for database/sql.
var preparedWatermarkSQL = db.Numbered(changeWatermarkSQL)

// MissionVersions returns the versions of the drops MissionField would return for v (the
// newest limit prompts, at most MissionFieldMax, oldest first) and the as_of of the read, read
// first like MissionField's. Both statements run prepared: a page that already has the
// terminal drops rendered reads only this, and MissionPrompts for the others.
func (s *Reads) MissionVersions(ctx context.Context, v jobs.Viewer, limit int) (time.Time, []MissionVersion, error) {
	if limit <= 0 || limit > MissionFieldMax {
		limit = MissionFieldMax
	}
	var asOf time.Time
	if err := s.db.DB.QueryRowContext(ctx, preparedWatermarkSQL, clientBackend).Scan(&asOf); err != nil {
		return time.Time{}, nil, fmt.Errorf("read change watermark: %w", err)
	}
	rows, err := s.db.DB.QueryContext(ctx, missionVersionsSQL, v.OrgID, v.UserID, limit)
	if err != nil {
		return time.Time{}, nil, fmt.Errorf("read the mission field's versions: %w", err)
	}
	defer rows.Close()
	out := make([]MissionVersion, 0, limit)
	for rows.Next() {
		var mv MissionVersion
		var micros int64
		if err := rows.Scan(&mv.PromptID, &mv.JobID, &mv.State, &micros); err != nil {
			return time.Time{}, nil, fmt.Errorf("scan a mission version: %w", err)
		}
		mv.UpdatedAt = time.UnixMicro(micros)
		out = append(out, mv)
	}
	if err := rows.Err(); err != nil {
		return time.Time{}, nil, fmt.Errorf("read the mission field's versions: %w", err)
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return asOf, out, nil
}

// MissionPrompts returns, like MissionField, the items of v's prompts in ids (at most
// MissionFieldMax, the newest among them), oldest first, in one query; a prompt that is not
// v's, or has no job, is left out.
func (s *Reads) MissionPrompts(ctx context.Context, v jobs.Viewer, ids []uuid.UUID) ([]MissionItem, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	return s.missionRead(ctx, v, nil, ids, MissionFieldMax)
}
