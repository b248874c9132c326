package handlers

// The operator dashboard: /admin/deferred-operations, /admin/jobs, /admin/health and River's
// own UI at /admin/river, one handler per action in the pages_dashboard_*.go files. This file
// holds what the dashboard's pages and streams share.
//
// Access: every route is Operator (an operator sees its org, an admin every org; a member gets
// the 403 page from authorize); /admin/river is Admin. Another org's id answers 404 exactly
// like a missing one, because every read goes through a jobs.Viewer. Actions are POSTs with the
// session's CSRF token (checked by authorize) and answer with a redirect back to the page
// (post/redirect/get), carrying a notice code the page turns into a fixed message.

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"
	"github.com/valyala/fasthttp/fasthttpadaptor"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/readmodel"
	"asterion/views"
)

// dashNamesTTL is how long a resolved org or user name is shown without reading it again.
const dashNamesTTL = 5 * time.Minute

// dashboardState is what the dashboard shares across the requests and streams of one Server:
// short-lived caches, so that 200 open dashboards cost one query per change, not 200, and the
// mounted River UI.
type dashboardState struct {
	// orgs is the admin's organisation filter list.
	orgs *cache[struct{}, []readmodel.OrgName]
	// opCounts and jobCounts are the counts bars, by viewer and filtered org.
	opCounts  *cache[dashCountsKey, map[string]int64]
	jobCounts *cache[dashCountsKey, map[string]int64]
	// eventOps and eventJobs are the rows a change-feed event is about, read once per event
	// for every stream of the server.
	eventOps  *cache[dashEventKey, map[uuid.UUID]db.Operation]
	eventJobs *cache[dashEventKey, map[uuid.UUID]db.Job]
	// health is the queue-health page's figures, by viewer scope.
	health *cache[string, views.Health]

	namesMu  sync.Mutex
	orgNames map[int64]dashName
	users    map[int64]dashName

	// river serves River's own UI (nil when the server runs without it).
	river fiber.Handler
}

// dashCountsKey identifies one counts bar: the viewer's scope and the org filter.
type dashCountsKey struct {
	allOrgs     bool
	orgID       int64
	filterOrgID int64
}

func countsKeyOf(v jobs.Viewer, filterOrgID int64) dashCountsKey {
	return dashCountsKey{allOrgs: v.AllOrgs, orgID: v.OrgID, filterOrgID: filterOrgID}
}

// dashEventKey identifies the object of one change-feed event.
type dashEventKey struct {
	seq int64
	id  uuid.UUID
}

type dashName struct {
	name string
	at   time.Time
}

// newDashboardState builds the dashboard's shared state for a server with deps.
func newDashboardState(deps Deps) *dashboardState {
	return &dashboardState{
		orgs:      newCache[struct{}, []readmodel.OrgName](30 * time.Second),
		opCounts:  newCache[dashCountsKey, map[string]int64](time.Second),
		jobCounts: newCache[dashCountsKey, map[string]int64](time.Second),
		eventOps:  newCache[dashEventKey, map[uuid.UUID]db.Operation](10 * time.Second),
		eventJobs: newCache[dashEventKey, map[uuid.UUID]db.Job](10 * time.Second),
		health:    newCache[string, views.Health](2 * time.Second),
		orgNames:  map[int64]dashName{},
		users:     map[int64]dashName{},
		river:     riverHandler(deps.RiverUI),
	}
}

// riverHandler mounts River's UI, or returns nil without one.
func riverHandler(ui http.Handler) fiber.Handler {
	if ui == nil {
		return nil
	}
	// The adaptor hands fasthttp's RequestCtx to the handler as its context; deriving from it
	// (as River UI's endpoints do) reads fasthttp's server state unlocked while a shutdown
	// writes it. Detach the request from it, with a timeout of its own.
	detached := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 30*time.Second)
		defer cancel()
		ui.ServeHTTP(w, r.WithContext(ctx))
	})
	h := fasthttpadaptor.NewFastHTTPHandler(detached)
	return func(c *fiber.Ctx) error {
		h(c.Context())
		return nil
	}
}

// dashAllOrgs is the viewer the shared loads run as; every result is checked against the
// requesting viewer before it is shown.
var dashAllOrgs = jobs.Viewer{AllOrgs: true}

// names resolves org and user ids for display, caching them for dashNamesTTL.
func (s *Server) names(ctx context.Context, orgIDs, userIDs []int64) (orgs, users map[int64]string) {
	st := s.dashboard
	orgs, users = map[int64]string{}, map[int64]string{}
	var missOrgs, missUsers []int64
	now := time.Now()
	st.namesMu.Lock()
	for _, id := range orgIDs {
		if n, ok := st.orgNames[id]; ok && now.Sub(n.at) < dashNamesTTL {
			orgs[id] = n.name
		} else {
			missOrgs = append(missOrgs, id)
		}
	}
	for _, id := range userIDs {
		if n, ok := st.users[id]; ok && now.Sub(n.at) < dashNamesTTL {
			users[id] = n.name
		} else {
			missUsers = append(missUsers, id)
		}
	}
	st.namesMu.Unlock()
	if len(missOrgs)+len(missUsers) == 0 {
		return orgs, users
	}
	o, u, err := s.deps.Reads.DisplayNames(ctx, missOrgs, missUsers)
	if err != nil {
		s.log.Warn("dashboard names", "err", err)
		return orgs, users
	}
	st.namesMu.Lock()
	for id, n := range o {
		orgs[id] = n
		st.orgNames[id] = dashName{n, now}
	}
	for id, n := range u {
		users[id] = n
		st.users[id] = dashName{n, now}
	}
	st.namesMu.Unlock()
	return orgs, users
}

// orgOptions lists every org for an admin's filter.
func (s *Server) orgOptions(ctx context.Context) []views.Option {
	orgs, err := s.dashboard.orgs.get(ctx, struct{}{}, s.deps.Reads.OrgDirectory)
	if err != nil {
		s.log.Warn("dashboard org list", "err", err)
		return nil
	}
	out := make([]views.Option, len(orgs))
	for i, o := range orgs {
		out[i] = views.Option{Value: o.Name, Label: o.Name}
	}
	return out
}
