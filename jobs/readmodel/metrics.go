package readmodel

import (
	"asterion/jobs"
	"context"
	"fmt"
	"time"

	"asterion/jobs/usage"
)

// OrgMetrics are one org's figures over a window.
type OrgMetrics struct {
	OrgID         int64            `json:"org_id"`
	OrgName       string           `json:"org"`
	Finished      int64            `json:"finished"`
	Failed        int64            `json:"failed"`
	ErrorRate     float64          `json:"error_rate"`
	QueueWaitP50  float64          `json:"queue_wait_p50_seconds"`
	QueueWaitP95  float64          `json:"queue_wait_p95_seconds"`
	RunTimeP50    float64          `json:"run_time_p50_seconds"`
	RunTimeP95    float64          `json:"run_time_p95_seconds"`
	ErrorsByKind  map[string]int64 `json:"errors_by_kind"`
	ThroughputMin float64          `json:"finished_per_minute"`
	// Usage is the tokens and cost of the org's attempts that finished in the window, in all
	// and per model.
	Usage usage.OrgUsage `json:"usage"`
}

// QueueMetrics are counts by state and per-org figures over a window, as
// GET /sa-core/v1/metrics/queue and asterion queue-metrics show them.
type QueueMetrics struct {
	Window string           `json:"window"`
	Counts map[string]int64 `json:"counts"`
	Orgs   []OrgMetrics     `json:"orgs"`
}

// QueueMetrics computes the figures visible to v. Counts come from the trigger-kept counters;
// the window figures read only jobs finished inside the window.
func (s *Reads) QueueMetrics(ctx context.Context, v jobs.Viewer, window time.Duration) (QueueMetrics, error) {
	out := QueueMetrics{Window: window.String(), Counts: map[string]int64{}}
	for _, st := range []jobs.State{jobs.StateQueued, jobs.StateRunning, jobs.StateSucceeded, jobs.StateFailed, jobs.StateCancelled, jobs.StateSuperseded} {
		out.Counts[string(st)] = 0
	}
	cq := s.db.NewSelect().Table("sa_job_count").ColumnExpr("state, sum(n) AS n").GroupExpr("state")
	if !v.AllOrgs {
		cq = cq.Where("org_id = ?", v.OrgID)
	}
	var counts []struct {
		State string `bun:"state"`
		N     int64  `bun:"n"`
	}
	if err := cq.Scan(ctx, &counts); err != nil {
		return out, fmt.Errorf("count jobs by state: %w", err)
	}
	for _, c := range counts {
		out.Counts[c.State] = c.N
	}
	q := s.db.NewSelect().TableExpr("sa_job AS j").Join("JOIN orgs AS o ON o.id = j.org_id").
		ColumnExpr("j.org_id, o.name AS org_name").
		ColumnExpr("count(*) AS finished").
		ColumnExpr("count(*) FILTER (WHERE j.state = 'failed') AS failed").
		ColumnExpr("coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.claimed_at - j.scheduled_at)), 0) AS wait_p50").
		ColumnExpr("coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM j.claimed_at - j.scheduled_at)), 0) AS wait_p95").
		ColumnExpr("coalesce(percentile_cont(0.5) WITHIN GROUP (ORDER BY extract(epoch FROM j.finished_at - j.started_at)), 0) AS run_p50").
		ColumnExpr("coalesce(percentile_cont(0.95) WITHIN GROUP (ORDER BY extract(epoch FROM j.finished_at - j.started_at)), 0) AS run_p95").
		Where("j.finished_at >= now() - ?::interval", fmt.Sprintf("%d seconds", int64(window.Seconds()))).
		Where("j.state IN ('succeeded', 'failed', 'superseded', 'cancelled')").
		GroupExpr("j.org_id, o.name").OrderExpr("o.name")
	if !v.AllOrgs {
		q = q.Where("j.org_id = ?", v.OrgID)
	}
	var rows []struct {
		OrgID    int64   `bun:"org_id"`
		OrgName  string  `bun:"org_name"`
		Finished int64   `bun:"finished"`
		Failed   int64   `bun:"failed"`
		WaitP50  float64 `bun:"wait_p50"`
		WaitP95  float64 `bun:"wait_p95"`
		RunP50   float64 `bun:"run_p50"`
		RunP95   float64 `bun:"run_p95"`
	}
	if err := q.Scan(ctx, &rows); err != nil {
		return out, fmt.Errorf("queue metrics: %w", err)
	}
	kq := s.db.NewSelect().TableExpr("sa_job AS j").ColumnExpr("j.org_id, j.error_kind, count(*) AS n").
		Where("j.finished_at >= now() - ?::interval", fmt.Sprintf("%d seconds", int64(window.Seconds()))).
		Where("j.state = 'failed' AND j.error_kind IS NOT NULL").GroupExpr("j.org_id, j.error_kind")
	if !v.AllOrgs {
		kq = kq.Where("j.org_id = ?", v.OrgID)
	}
	var kinds []struct {
		OrgID int64  `bun:"org_id"`
		Kind  string `bun:"error_kind"`
		N     int64  `bun:"n"`
	}
	if err := kq.Scan(ctx, &kinds); err != nil {
		return out, fmt.Errorf("errors by kind: %w", err)
	}
	var orgFilter int64
	if !v.AllOrgs {
		orgFilter = v.OrgID
	}
	used, err := usage.Window(ctx, s.db, time.Now().Add(-window), orgFilter)
	if err != nil {
		return out, err
	}
	for _, r := range rows {
		m := OrgMetrics{OrgID: r.OrgID, OrgName: r.OrgName, Finished: r.Finished, Failed: r.Failed,
			QueueWaitP50: r.WaitP50, QueueWaitP95: r.WaitP95, RunTimeP50: r.RunP50, RunTimeP95: r.RunP95,
			ErrorsByKind: map[string]int64{}, ThroughputMin: float64(r.Finished) / window.Minutes()}
		if r.Finished > 0 {
			m.ErrorRate = float64(r.Failed) / float64(r.Finished)
		}
		for _, k := range kinds {
			if k.OrgID == r.OrgID {
				m.ErrorsByKind[k.Kind] = k.N
			}
		}
		m.Usage = usedOf(used, r.OrgID)
		delete(used, r.OrgID)
		out.Orgs = append(out.Orgs, m)
	}
	// An org whose attempts used tokens in the window without a job finishing there.
	for orgID := range used {
		var name string
		if err := s.db.NewSelect().Table("orgs").Column("name").Where("id = ?", orgID).Scan(ctx, &name); err != nil {
			return out, fmt.Errorf("name of org %d: %w", orgID, err)
		}
		out.Orgs = append(out.Orgs, OrgMetrics{OrgID: orgID, OrgName: name, ErrorsByKind: map[string]int64{},
			Usage: usedOf(used, orgID)})
	}
	if out.Orgs == nil {
		out.Orgs = []OrgMetrics{}
	}
	return out, nil
}

// usedOf is an org's usage in used, with an empty model map when it used nothing.
func usedOf(used map[int64]usage.OrgUsage, orgID int64) usage.OrgUsage {
	u, ok := used[orgID]
	if !ok {
		u.Models = map[string]usage.Total{}
	}
	return u
}
