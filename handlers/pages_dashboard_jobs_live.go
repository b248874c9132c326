package handlers

import (
	"context"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/views"
)

// jobsLiveList is the jobs list with one filter, as its stream and its polling fallback keep
// it current.
type jobsLiveList struct {
	s *Server
	p identity.Principal
	v jobs.Viewer
	q jobsQuery
}

func (s *Server) jobsLiveList(c *fiber.Ctx) jobsLiveList {
	p := principalOf(c)
	// The stream keeps the query after the handler returns: copies, not views of the
	// request buffer the connection's next request rewrites.
	q := s.parseJobsQuery(c.UserContext(), p, func(k string) string { return strings.Clone(c.Query(k)) }, time.Now())
	return jobsLiveList{s: s, p: p, v: viewerOf(p), q: q}
}

func (l jobsLiveList) load(ctx context.Context) (listPage[db.Job], error) {
	d, list, err := l.s.loadJobsList(ctx, l.p, l.q)
	if err != nil {
		return listPage[db.Job]{}, err
	}
	return listPage[db.Job]{items: list, counts: d.Counts,
		fragment: func(oob bool) templ.Component { return views.JobsListFragment(d, oob) }}, nil
}

func (l jobsLiveList) item(ctx context.Context, e feed.Event) (db.Job, bool, error) {
	return l.s.eventJob(ctx, e)
}

func (l jobsLiveList) key(j db.Job) (uuid.UUID, int64, int64) { return j.ID, j.OrgID, j.CreatedBy }

func (l jobsLiveList) matches(j db.Job) bool { return l.q.filter.Matches(j, time.Now()) }

func (l jobsLiveList) row(ctx context.Context, j db.Job, stale bool) templ.Component {
	r := l.s.jobRows(ctx, []db.Job{j})[0]
	r.Stale = stale
	return views.JobRowTR(r, l.p.SeesAllOrgs(), true)
}

func (l jobsLiveList) prepend(ctx context.Context, j db.Job) templ.Component {
	return views.RowPrepend(l.view(), views.JobRowTR(l.s.jobRows(ctx, []db.Job{j})[0], l.p.SeesAllOrgs(), false))
}

func (l jobsLiveList) counts(ctx context.Context, notBefore time.Time) ([]views.Count, error) {
	return l.s.jobsCounts(ctx, l.v, l.q, notBefore)
}

func (l jobsLiveList) view() views.ListView { return views.JobsView(l.q.view, l.q.filter.Cursor != "") }

// jobsList is GET /admin/jobs/list: the table fragment for the polling fallback.
func (s *Server) jobsList(c *fiber.Ctx) error {
	return listFragment(s, c, s.jobsLiveList(c))
}

// jobsEvents is GET /admin/jobs/events?<filter>: the jobs list's stream.
func (s *Server) jobsEvents(c *fiber.Ctx) error {
	l := s.jobsLiveList(c)
	streamList(s, c, l.v, l, feed.TopicJob)
	return nil
}
