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

// opsLiveList is the operations list with one filter, as its stream and its polling fallback
// keep it current.
type opsLiveList struct {
	s *Server
	p identity.Principal
	v jobs.Viewer
	q opsQuery
}

func (s *Server) opsLiveList(c *fiber.Ctx) opsLiveList {
	p := principalOf(c)
	// The stream keeps the query after the handler returns: copies, not views of the
	// request buffer the connection's next request rewrites.
	q := s.parseOpsQuery(c.UserContext(), p, func(k string) string { return strings.Clone(c.Query(k)) }, time.Now())
	return opsLiveList{s: s, p: p, v: viewerOf(p), q: q}
}

func (l opsLiveList) load(ctx context.Context) (listPage[db.Operation], error) {
	d, ops, err := l.s.loadOpsList(ctx, l.p, l.q)
	if err != nil {
		return listPage[db.Operation]{}, err
	}
	return listPage[db.Operation]{items: ops, counts: d.Counts,
		fragment: func(oob bool) templ.Component { return views.OpsListFragment(d, oob) }}, nil
}

func (l opsLiveList) item(ctx context.Context, e feed.Event) (db.Operation, bool, error) {
	return l.s.eventOperation(ctx, e)
}

func (l opsLiveList) key(op db.Operation) (uuid.UUID, int64, int64) {
	return op.ID, op.OrgID, op.CreatedBy
}

func (l opsLiveList) matches(op db.Operation) bool { return l.q.filter.Matches(op) }

func (l opsLiveList) opRow(ctx context.Context, op db.Operation) views.OpRow {
	orgs, _ := l.s.names(ctx, []int64{op.OrgID}, nil)
	return opRowOf(op, orgs)
}

func (l opsLiveList) row(ctx context.Context, op db.Operation, stale bool) templ.Component {
	r := l.opRow(ctx, op)
	r.Stale = stale
	return views.OpRowTR(r, l.p.SeesAllOrgs(), true)
}

func (l opsLiveList) prepend(ctx context.Context, op db.Operation) templ.Component {
	return views.RowPrepend(l.view(), views.OpRowTR(l.opRow(ctx, op), l.p.SeesAllOrgs(), false))
}

func (l opsLiveList) counts(ctx context.Context, notBefore time.Time) ([]views.Count, error) {
	return l.s.opsCounts(ctx, l.v, l.q, notBefore)
}

func (l opsLiveList) view() views.ListView { return views.OpsView(l.q.view, l.q.filter.Cursor != "") }

// operationsList is GET /admin/deferred-operations/list: the table fragment the polling
// fallback swaps in, with the counts out of band.
func (s *Server) operationsList(c *fiber.Ctx) error {
	return listFragment(s, c, s.opsLiveList(c))
}

// operationsEvents is GET /admin/deferred-operations/events?<filter>: the list's stream.
func (s *Server) operationsEvents(c *fiber.Ctx) error {
	l := s.opsLiveList(c)
	streamList(s, c, l.v, l, feed.TopicJob, feed.TopicOperation)
	return nil
}
