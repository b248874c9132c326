package readmodel

import (
	"context"
	"fmt"
	"time"

	"asterion/jobs"
)

// DoorCount is the jobs of one front door: unfinished now and created in the window.
type DoorCount struct {
	Door   string `bun:"door"`
	Active int64  `bun:"active"`
	Window int64  `bun:"in_window"`
}

// FrontDoorJobs counts the jobs v may see that came through a front door (the OpenAI-compatible
// API, a batch), by door: those queued or running, and those created in the last window.
func (s *Reads) FrontDoorJobs(ctx context.Context, v jobs.Viewer, window time.Duration) ([]DoorCount, error) {
	q := s.db.NewSelect().TableExpr("sa_job_door AS d").Join("JOIN sa_job AS j ON j.id = d.job_id").
		ColumnExpr("d.door").
		ColumnExpr("count(*) FILTER (WHERE j.state IN ('queued', 'running')) AS active").
		ColumnExpr("count(*) FILTER (WHERE j.created_at > now() - ?::interval) AS in_window",
			fmt.Sprintf("%d milliseconds", window.Milliseconds())).
		Where("j.state IN ('queued', 'running') OR j.created_at > now() - ?::interval",
			fmt.Sprintf("%d milliseconds", window.Milliseconds())).
		GroupExpr("d.door").OrderExpr("d.door")
	if !v.AllOrgs {
		q = q.Where("j.org_id = ?", v.OrgID)
	}
	var out []DoorCount
	if err := q.Scan(ctx, &out); err != nil {
		return nil, fmt.Errorf("count the front door's jobs: %w", err)
	}
	return out, nil
}
