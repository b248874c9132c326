package handlers

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/db"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/readmodel"
	"asterion/views"
)

// opRowOf is an operation as a list row.
func opRowOf(op db.Operation, orgs map[int64]string) views.OpRow {
	return views.OpRow{ID: op.ID.String(), Kind: op.Kind, Owner: op.Owner, Status: op.Status, Org: orgs[op.OrgID],
		CorrelationID: op.CorrelationID.String(), AcceptedAt: op.AcceptedAt, UpdatedAt: op.UpdatedAt,
		ExpiresAt: op.ExpiresAt, Terminal: deferred.Status(op.Status).Terminal(), ErrorKind: deref(op.LastErrorKind)}
}

// opsCounts are the counts by status of the viewer's operations (of the filtered org for an
// admin), from the trigger-kept counters, shared across streams for a second.
func (s *Server) opsCounts(ctx context.Context, v jobs.Viewer, q opsQuery, notBefore time.Time) ([]views.Count, error) {
	m, err := s.dashboard.opCounts.getFresh(ctx, countsKeyOf(v, q.filter.OrgID), notBefore, func(ctx context.Context) (map[string]int64, error) {
		return s.deps.Reads.OrgOperationCounts(ctx, v, q.filter.OrgID)
	})
	if err != nil {
		return nil, err
	}
	var total int64
	out := []views.Count{}
	for _, st := range deferred.Statuses() {
		n := m[string(st)]
		total += n
		f := q.view
		f.Status = string(st)
		out = append(out, views.Count{Key: string(st), Label: strings.ReplaceAll(string(st), "-", " "), N: n,
			Href: views.OpsPath(f, ""), Current: q.view.Status == string(st)})
	}
	all := q.view
	all.Status = ""
	return append([]views.Count{{Key: "all", Label: "all", N: total, Href: views.OpsPath(all, ""), Current: q.view.Status == ""}}, out...), nil
}

// opsLive are the stream and polling URLs of an operations list.
func opsLive(q opsQuery) views.Live {
	v := q.view.Values()
	if q.filter.Cursor != "" {
		v.Set("cursor", q.filter.Cursor)
	}
	enc := ""
	if len(v) > 0 {
		enc = "?" + v.Encode()
	}
	return views.Live{StreamURL: "/admin/deferred-operations/events" + enc, PollURL: "/admin/deferred-operations/list" + enc}
}

// loadOpsList reads one page of operations with counts; a bad cursor restarts at the newest.
func (s *Server) loadOpsList(ctx context.Context, p identity.Principal, q opsQuery) (views.OpsList, []db.Operation, error) {
	v := viewerOf(p)
	ops, next, err := s.deps.Reads.ListOperations(ctx, v, q.filter)
	if errors.Is(err, readmodel.ErrBadCursor) {
		q.errs["cursor"] = "bad page link"
		q.filter.Cursor = ""
		ops, next, err = s.deps.Reads.ListOperations(ctx, v, q.filter)
	}
	if err != nil {
		return views.OpsList{}, nil, err
	}
	counts, err := s.opsCounts(ctx, v, q, time.Time{})
	if err != nil {
		return views.OpsList{}, nil, err
	}
	d := views.OpsList{Filter: q.view, Errors: q.errs, Counts: counts, NextCursor: next, Paged: q.filter.Cursor != "",
		ShowOrg: p.SeesAllOrgs(), Live: opsLive(q)}
	var orgIDs []int64
	if d.ShowOrg {
		for _, op := range ops {
			orgIDs = append(orgIDs, op.OrgID)
		}
	}
	orgs, _ := s.names(ctx, orgIDs, nil)
	for _, op := range ops {
		d.Rows = append(d.Rows, opRowOf(op, orgs))
	}
	return d, ops, nil
}

// dashOperationsPage is GET /admin/deferred-operations.
func (s *Server) dashOperationsPage(c *fiber.Ctx) error {
	p := principalOf(c)
	ctx := c.UserContext()
	q := s.parseOpsQuery(ctx, p, func(k string) string { return c.Query(k) }, time.Now())
	d, _, err := s.loadOpsList(ctx, p, q)
	if err != nil {
		return s.dashError(c, err, "page")
	}
	d.Notice = dashNoticeOf(c)
	for _, k := range s.deps.Reads.OperationKinds() {
		d.Kinds = append(d.Kinds, views.Option{Value: k, Label: k})
	}
	if d.ShowOrg {
		d.Orgs = s.orgOptions(ctx)
	}
	return render(c, views.OperationsPage(dashPage(c, "Deferred operations", views.NavOperations), d))
}
