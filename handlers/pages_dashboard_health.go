package handlers

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"asterion/jobs"
	"asterion/views"
)

// dashPastDueGrace is how long a queued job may have been due before the health page calls it
// past due.
const dashPastDueGrace = time.Minute

// healthData gathers the queue-health page: counts, the last hour per minute, per-org figures,
// worker liveness and the backlog. Shared across viewers of the same scope for 2 s.
func (s *Server) healthData(ctx context.Context, v jobs.Viewer) (views.Health, error) {
	key := "health:" + viewerKey(v)
	val, err := s.dash().cache.get(ctx, key, 2*time.Second, func(ctx context.Context) (any, error) {
		return s.loadHealth(ctx, v)
	})
	if err != nil {
		return views.Health{}, err
	}
	return val.(views.Health), nil
}

func viewerKey(v jobs.Viewer) string {
	if v.AllOrgs {
		return "all"
	}
	return strconv.FormatInt(v.OrgID, 10)
}

func (s *Server) loadHealth(ctx context.Context, v jobs.Viewer) (views.Health, error) {
	m, err := s.deps.Jobs.QueueMetrics(ctx, v, time.Hour)
	if err != nil {
		return views.Health{}, err
	}
	series, err := s.deps.Jobs.QueueSeries(ctx, v, time.Hour, time.Minute)
	if err != nil {
		return views.Health{}, err
	}
	live, err := s.deps.Jobs.WorkerLivenessFor(ctx, v)
	if err != nil {
		return views.Health{}, err
	}
	backlog, err := s.deps.Jobs.QueueBacklog(ctx, v, dashPastDueGrace)
	if err != nil {
		return views.Health{}, err
	}
	h := views.Health{Window: "1h", Queued: m.Counts[string(jobs.StateQueued)], Due: backlog.Due, PastDue: backlog.PastDue,
		OldestDue: backlog.OldestDue, PastDueGrace: dashPastDueGrace, WorkerAlive: live.Alive, WorkerSeen: live.LastSeen,
		WorkerSource: live.Source, LeaderID: live.LeaderID, Now: live.Now}
	for _, st := range []jobs.State{jobs.StateQueued, jobs.StateRunning, jobs.StateSucceeded, jobs.StateFailed, jobs.StateCancelled, jobs.StateSuperseded} {
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
	return render(c, views.HealthPage(dashPage(c, "Queue health", views.NavJobs), h))
}

// healthPanel is GET /admin/health/panel: the part the page refreshes every 5 s.
func (s *Server) healthPanel(c *fiber.Ctx) error {
	h, err := s.healthData(c.UserContext(), viewerOf(principalOf(c)))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return render(c, views.HealthPanel(h))
}

// riverUI is GET /admin/river and below (admins): River's own web UI, mounted read-only.
// Only GET routes reach it, so its cancel, retry, delete and pause buttons fail: acting on the
// queue goes through /admin/jobs, which keeps sa_job (the truth) and River's vehicle in step.
func (s *Server) riverUI(c *fiber.Ctx) error {
	if s.deps.RiverUI == nil {
		return s.errorPage(c, fiber.StatusNotFound, "River UI is not mounted",
			"This server runs without River's own UI; the Jobs and Queue health pages show the queue.")
	}
	st := s.dash()
	st.riverOnce.Do(func() {
		ui := s.deps.RiverUI
		// The adaptor hands fasthttp's RequestCtx to the handler as its context; deriving from
		// it (as River UI's endpoints do) reads fasthttp's server state unlocked while a
		// shutdown writes it. Detach the request from it, with a timeout of its own.
		detached := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
			defer cancel()
			ui.ServeHTTP(w, r.WithContext(ctx))
		})
		h := fasthttpadaptor.NewFastHTTPHandler(detached)
		st.river = func(c *fiber.Ctx) error {
			h(c.Context())
			return nil
		}
	})
	return st.river(c)
}
