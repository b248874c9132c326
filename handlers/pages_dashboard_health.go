package handlers

import (
	"context"
	"sort"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/jobs"
	"asterion/views"
)

// dashPastDueGrace is how long a queued job may have been due before the health page calls it
// past due.
const dashPastDueGrace = time.Minute

// healthData gathers the queue-health page: counts, the last hour per minute, per-org figures,
// worker liveness and the backlog. Shared across viewers of the same scope for 2 s.
func (s *Server) healthData(ctx context.Context, v jobs.Viewer) (views.Health, error) {
	return s.dashboard.health.get(ctx, viewerKey(v), func(ctx context.Context) (views.Health, error) {
		return s.loadHealth(ctx, v)
	})
}

func viewerKey(v jobs.Viewer) string {
	if v.AllOrgs {
		return "all"
	}
	return strconv.FormatInt(v.OrgID, 10)
}

func (s *Server) loadHealth(ctx context.Context, v jobs.Viewer) (views.Health, error) {
	m, err := s.deps.Reads.QueueMetrics(ctx, v, time.Hour)
	if err != nil {
		return views.Health{}, err
	}
	series, err := s.deps.Reads.QueueSeries(ctx, v, time.Hour, time.Minute)
	if err != nil {
		return views.Health{}, err
	}
	live, err := s.deps.Reads.WorkerLivenessFor(ctx, v)
	if err != nil {
		return views.Health{}, err
	}
	draining, err := s.deps.Reads.DrainingWorkers(ctx, v)
	if err != nil {
		return views.Health{}, err
	}
	backlog, err := s.deps.Reads.QueueBacklog(ctx, v, dashPastDueGrace)
	if err != nil {
		return views.Health{}, err
	}
	h := views.Health{Window: "1h", Queued: m.Counts[string(jobs.StateQueued)], Due: backlog.Due, PastDue: backlog.PastDue,
		OldestDue: backlog.OldestDue, PastDueGrace: dashPastDueGrace, WorkerAlive: live.Alive, WorkerSeen: live.LastSeen,
		WorkerSource: live.Source, LeaderID: live.LeaderID, Now: live.Now}
	for _, d := range draining {
		h.Draining = append(h.Draining, views.DrainingWorker{ID: d.WorkerID, Since: d.Since, GraceEnds: d.GraceEnds})
	}
	for _, st := range dashJobStates {
		h.Counts = append(h.Counts, views.Count{Key: string(st), Label: string(st), N: m.Counts[string(st)], Href: "/admin/jobs?state=" + string(st)})
	}
	for _, p := range series {
		h.Series = append(h.Series, views.SeriesPoint{At: p.At, Finished: p.Finished, Failed: p.Failed,
			WaitP50: p.WaitP50, WaitP95: p.WaitP95, RunP50: p.RunP50, RunP95: p.RunP95})
	}
	kinds := map[string]int64{}
	for _, o := range m.Orgs {
		h.Finished += o.Finished
		h.Failed += o.Failed
		oh := views.OrgHealth{Org: o.OrgName, Finished: o.Finished, Failed: o.Failed, WaitP50: o.QueueWaitP50,
			WaitP95: o.QueueWaitP95, RunP50: o.RunTimeP50, RunP95: o.RunTimeP95, ErrorKinds: sortedKinds(o.ErrorsByKind)}
		h.Orgs = append(h.Orgs, oh)
		for k, n := range o.ErrorsByKind {
			kinds[k] += n
		}
	}
	h.ErrorKinds = sortedKinds(kinds)
	if h.Flow, err = s.loadFlow(ctx, v, live.Now); err != nil {
		return views.Health{}, err
	}
	doors, err := s.deps.Reads.FrontDoorJobs(ctx, v, time.Hour)
	if err != nil {
		return views.Health{}, err
	}
	for _, d := range doors {
		h.Doors = append(h.Doors, views.DoorCount{Door: d.Door, Active: d.Active, Window: d.Window})
	}
	return h, nil
}

func sortedKinds(m map[string]int64) []views.KindCount {
	out := make([]views.KindCount, 0, len(m))
	for k, n := range m {
		out = append(out, views.KindCount{Kind: k, N: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Kind < out[j].Kind
	})
	return out
}

// healthPage is GET /admin/health.
func (s *Server) healthPage(c *fiber.Ctx) error {
	h, err := s.healthData(c.UserContext(), viewerOf(principalOf(c)))
	if err != nil {
		return err
	}
	return render(c, views.HealthPage(dashPage(c, "Queue health", views.NavJobs), h, dashNoticeOf(c)))
}

// healthPanel is GET /admin/health/panel: the part the page refreshes every 5 s.
func (s *Server) healthPanel(c *fiber.Ctx) error {
	h, err := s.healthData(c.UserContext(), viewerOf(principalOf(c)))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return render(c, views.HealthPanel(h, csrfOf(c)))
}
