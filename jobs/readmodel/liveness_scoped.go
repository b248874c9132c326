package readmodel

import (
	"asterion/jobs"
	"context"
	"fmt"
	"time"
)

// WorkerLivenessFor is WorkerLiveness as v may see it. An admin sees every sign of life. Anyone
// else sees the River leader's lease (that some worker process is alive, a fact about the
// service, without the leader's id) and the signs of life of their own org's jobs only: the
// heartbeat of its running jobs and the last of its jobs a worker finished, never another org's
// activity.
func (s *Reads) WorkerLivenessFor(ctx context.Context, v jobs.Viewer) (Liveness, error) {
	if v.AllOrgs {
		return s.WorkerLiveness(ctx)
	}
	var row struct {
		Now       time.Time  `bun:"now"`
		LeaseAt   *time.Time `bun:"lease_at"`
		Heartbeat *time.Time `bun:"heartbeat"`
		Finished  *time.Time `bun:"finished"`
	}
	err := s.db.NewRaw(orgLivenessSQL, v.OrgID).Scan(ctx, &row)
	if err != nil {
		return Liveness{}, fmt.Errorf("read worker liveness of org %d: %w", v.OrgID, err)
	}
	l := Liveness{Now: row.Now.UTC()}
	for _, c := range []struct {
		t   *time.Time
		src string
	}{{row.LeaseAt, "river leader lease"}, {row.Heartbeat, "job heartbeat"}, {row.Finished, "finished job"}} {
		if c.t != nil && (l.LastSeen == nil || c.t.After(*l.LastSeen)) {
			t := c.t.UTC()
			l.LastSeen, l.Source = &t, c.src
		}
	}
	l.Alive = l.LastSeen != nil && l.Now.Sub(*l.LastSeen) <= WorkerAliveWithin
	return l, nil
}
