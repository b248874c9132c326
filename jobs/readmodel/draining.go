package readmodel

import (
	"context"
	"fmt"
	"time"

	"asterion/jobs"
)

// DrainingWorker is a worker process in a graceful stop: it claims nothing new and hands its
// running calls back once its grace ends.
type DrainingWorker struct {
	// WorkerID is the process's id ("" for a viewer who may not see it).
	WorkerID string
	// Since is when it began draining; GraceEnds when its calls still running are cut.
	Since, GraceEnds time.Time
}

// drainingListedFor is how long past its grace a process that never recorded its stop (it was
// killed while draining) is still listed.
const drainingListedFor = 2 * time.Minute

// DrainingWorkers lists the worker processes draining now, oldest first. Only an admin sees
// their ids: to anyone else they are a fact about the service, counted but not named.
func (s *Reads) DrainingWorkers(ctx context.Context, v jobs.Viewer) ([]DrainingWorker, error) {
	var rows []struct {
		WorkerID  string    `bun:"worker_id"`
		StartedAt time.Time `bun:"started_at"`
		GraceEnds time.Time `bun:"grace_ends"`
	}
	err := s.db.NewRaw(drainingWorkersSQL, fmt.Sprintf("%d seconds", int(drainingListedFor.Seconds()))).Scan(ctx, &rows)
	if err != nil {
		return nil, fmt.Errorf("read draining workers: %w", err)
	}
	out := make([]DrainingWorker, len(rows))
	for i, r := range rows {
		out[i] = DrainingWorker{Since: r.StartedAt.UTC(), GraceEnds: r.GraceEnds.UTC()}
		if v.AllOrgs {
			out[i].WorkerID = r.WorkerID
		}
	}
	return out, nil
}
