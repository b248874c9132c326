package handlers

// The operator dashboard (issue 6): /admin/deferred-operations, /admin/jobs, /admin/health
// and River's own UI at /admin/river. This file holds what the dashboard pages share (the
// per-server cache, names, filters, dashNotices) and the operations pages; the jobs pages, the
// health page and the live streams are in the other pages_dashboard_*.go files.
//
// Access: every route is Operator (an operator sees its org, an admin every org; a member gets
// the 403 page from authorize); /admin/river is Admin. Another org's id answers 404 exactly
// like a missing one, because every read goes through a jobs.Viewer. Actions are POSTs with the
// session's CSRF token (checked by authorize) and answer with a redirect back to the page
// (post/redirect/get), carrying a notice code the page turns into a fixed message.

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/views"
)

// dashPageSize is how many rows a list page shows.
const dashPageSize = 50

// dashboardState is what the dashboard shares across requests and streams of one Server: a
// short-lived cache so that 200 open dashboards cost one query per change, not 200.
type dashboardState struct {
	cache *dashCache

	namesMu sync.Mutex
	orgs    map[int64]dashName
	users   map[int64]dashName

	riverOnce sync.Once
	river     fiber.Handler
}

type dashName struct {
	name string
	at   time.Time
}

// dashStates holds one dashboardState per Server (Server's own fields belong to server.go).
var dashStates sync.Map

func (s *Server) dash() *dashboardState {
	if st, ok := dashStates.Load(s); ok {
		return st.(*dashboardState)
	}
	st, _ := dashStates.LoadOrStore(s, &dashboardState{cache: newDashCache(), orgs: map[int64]dashName{},
		users: map[int64]dashName{}})
	return st.(*dashboardState)
}

// dashCache runs a load once per key for every concurrent and later caller until the
// result expires (single flight with a short TTL). A failed load is not kept.
type dashCache struct {
	mu    sync.Mutex
	m     map[string]*dashCall
	sweep time.Time
}

type dashCall struct {
	done    chan struct{}
	val     any
	err     error
	exp     time.Time
	started time.Time
}

func newDashCache() *dashCache { return &dashCache{m: map[string]*dashCall{}} }

func (c *dashCache) get(ctx context.Context, key string, ttl time.Duration, load func(ctx context.Context) (any, error)) (any, error) {
	return c.getFresh(ctx, key, ttl, time.Time{}, load)
}

// getFresh is get, but reuses only a load that started at or after notBefore (so a caller who
// learned of a change at notBefore sees it).
func (c *dashCache) getFresh(ctx context.Context, key string, ttl time.Duration, notBefore time.Time, load func(ctx context.Context) (any, error)) (any, error) {
	now := time.Now()
	c.mu.Lock()
	if now.After(c.sweep) {
		for k, call := range c.m {
			if !call.exp.IsZero() && now.After(call.exp) {
				delete(c.m, k)
			}
		}
		c.sweep = now.Add(10 * time.Second)
	}
	if call, ok := c.m[key]; ok && (call.exp.IsZero() || now.Before(call.exp)) && !call.started.Before(notBefore) {
		c.mu.Unlock()
		select {
		case <-call.done:
			return call.val, call.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	call := &dashCall{done: make(chan struct{}), started: now}
	c.m[key] = call
	c.mu.Unlock()

	// The load outlives any one caller's cancellation: others may be waiting for it.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	val, err := load(lctx)
	cancel()
	c.mu.Lock()
	call.val, call.err = val, err
	call.exp = time.Now().Add(ttl)
	if err != nil && c.m[key] == call {
		delete(c.m, key)
	}
	c.mu.Unlock()
	close(call.done)
	return val, err
}

// dashAllOrgs is the viewer the shared loads run as; every result is checked against the
// requesting viewer before it is shown.
var dashAllOrgs = jobs.Viewer{AllOrgs: true}

// names resolves org and user ids for display, caching them for five minutes.
func (s *Server) names(ctx context.Context, orgIDs, userIDs []int64) (orgs, users map[int64]string) {
	st := s.dash()
	orgs, users = map[int64]string{}, map[int64]string{}
	var missOrgs, missUsers []int64
	now := time.Now()
	st.namesMu.Lock()
	for _, id := range orgIDs {
		if n, ok := st.orgs[id]; ok && now.Sub(n.at) < 5*time.Minute {
			orgs[id] = n.name
		} else {
			missOrgs = append(missOrgs, id)
		}
	}
	for _, id := range userIDs {
		if n, ok := st.users[id]; ok && now.Sub(n.at) < 5*time.Minute {
			users[id] = n.name
		} else {
			missUsers = append(missUsers, id)
		}
	}
	st.namesMu.Unlock()
	if len(missOrgs)+len(missUsers) == 0 {
		return orgs, users
	}
	o, u, err := s.deps.Jobs.DisplayNames(ctx, missOrgs, missUsers)
	if err != nil {
		s.log.Warn("dashboard names", "err", err)
		return orgs, users
	}
	st.namesMu.Lock()
	for id, n := range o {
		orgs[id] = n
		st.orgs[id] = dashName{n, now}
	}
	for id, n := range u {
		users[id] = n
		st.users[id] = dashName{n, now}
	}
	st.namesMu.Unlock()
	return orgs, users
}

// orgOptions lists every org for an admin's filter (cached for 30 s).
func (s *Server) orgOptions(ctx context.Context) []views.Option {
	v, err := s.dash().cache.get(ctx, "orgs", 30*time.Second, func(ctx context.Context) (any, error) {
		return s.deps.Jobs.OrgDirectory(ctx)
	})
	if err != nil {
		s.log.Warn("dashboard org list", "err", err)
		return nil
	}
	orgs := v.([]jobs.OrgName)
	out := make([]views.Option, len(orgs))
	for i, o := range orgs {
		out[i] = views.Option{Value: o.Name, Label: o.Name}
	}
	return out
}

// dashPage builds the layout data of a dashboard page.
func dashPage(c *fiber.Ctx, title, nav string) views.Page { return pageFor(c, title, nav) }

// notFoundPage answers 404 for a missing object and for another org's, identically.
func (s *Server) notFoundPage(c *fiber.Ctx, what string) error {
	return s.errorPage(c, fiber.StatusNotFound, "Not found", "There is no such "+what+".")
}

// dashError turns errors of the jobs package into pages.
func (s *Server) dashError(c *fiber.Ctx, err error, what string) error {
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return s.notFoundPage(c, what)
	case errors.Is(err, jobs.ErrBadCursor):
		return s.errorPage(c, fiber.StatusBadRequest, "Bad page link", "This page link is not one the server gave out; start again from the newest page.")
	case errors.Is(err, jobs.ErrInvalid):
		return s.errorPage(c, fiber.StatusBadRequest, "Bad request", "The request is not understood.")
	}
	return err
}

// dashNotices are the fixed messages an action's redirect may ask a page to show.
var dashNotices = map[string]views.Notice{
	"op-cancelled":    {Tone: "ok", Text: "Cancelled: the owner stopped the operation."},
	"op-polled":       {Tone: "ok", Text: "Polled the owning runtime; the status below is current."},
	"op-finished":     {Tone: "error", Text: "The operation had already finished; nothing was cancelled."},
	"job-cancelled":   {Tone: "ok", Text: "Cancelled the job."},
	"job-retried":     {Tone: "ok", Text: "Retried: this new job supersedes the old one."},
	"op-retried":      {Tone: "ok", Text: "Retried: this is the operation of the new job, which supersedes the old one."},
	"job-finished":    {Tone: "error", Text: "The job had already finished; nothing was cancelled."},
	"retry-conflict":  {Tone: "error", Text: "Only a succeeded, failed or cancelled job that no retry has superseded can be retried."},
	"q-not-found":     {Tone: "error", Text: "No job or prompt you can see has this id."},
	"bulk-none":       {Tone: "error", Text: "No job matched; nothing was done."},
	"action-conflict": {Tone: "error", Text: "The state changed meanwhile; nothing was done."},
}

// dashNoticeOf reads the notice of a redirect; unknown codes show nothing. A bulk action's notice
// is built from its numbers only.
func dashNoticeOf(c *fiber.Ctx) *views.Notice {
	code := c.Query("notice")
	if code == "bulk" {
		action := "cancelled"
		if c.Query("action") == "retry" {
			action = "retried"
		}
		done, _ := strconv.Atoi(c.Query("done"))
		skipped, _ := strconv.Atoi(c.Query("skipped"))
		failed, _ := strconv.Atoi(c.Query("failed"))
		text := strconv.Itoa(max(done, 0)) + " " + dashPlural(done, "job", "jobs") + " " + action + "."
		if skipped > 0 {
			text += " " + strconv.Itoa(skipped) + " skipped: their state changed meanwhile."
		}
		tone := "ok"
		if failed > 0 {
			text += " " + strconv.Itoa(failed) + " failed; see the server log."
			tone = "error"
		}
		return &views.Notice{Tone: tone, Text: text}
	}
	if n, ok := dashNotices[code]; ok {
		return &n
	}
	return nil
}

func dashPlural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// dashWithNotice appends notice=code to a local path.
func dashWithNotice(path, code string) string {
	sep := "?"
	if strings.Contains(path, "?") {
		sep = "&"
	}
	return path + sep + "notice=" + url.QueryEscape(code)
}

// dashRanges are the time ranges of the list filters.
var dashRanges = map[string]time.Duration{
	"15m": 15 * time.Minute, "1h": time.Hour, "24h": 24 * time.Hour, "7d": 7 * 24 * time.Hour,
}

// dashParseTime reads a datetime-local value (taken as UTC) or an RFC 3339 time.
func dashParseTime(s string) (time.Time, bool) {
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), true
		}
	}
	return time.Time{}, false
}

// resolveOrg maps an admin's org filter (a name) onto an id; an operator's is ignored (it
// sees only its own org anyway).
func (s *Server) resolveOrg(ctx context.Context, p identity.Principal, name string) (id int64, view string, errMsg string) {
	name = strings.TrimSpace(name)
	if name == "" || !p.SeesAllOrgs() {
		return 0, "", ""
	}
	org, err := s.deps.Identity.OrgByName(ctx, name)
	if err != nil {
		return 0, "", "no such organisation"
	}
	return org.ID, name, ""
}

// opsQuery is a parsed operations filter.
type opsQuery struct {
	view   views.OpsFilter
	filter jobs.OperationFilter
	errs   map[string]string
	// search is the id searched for (uuid.Nil when none).
	search uuid.UUID
}

// parseOpsQuery reads the operations filter from get (query or form values). Values that are
// not understood are reported in errs and left out of the filter.
func (s *Server) parseOpsQuery(ctx context.Context, p identity.Principal, get func(string) string, now time.Time) opsQuery {
	q := opsQuery{errs: map[string]string{}}
	q.filter.Limit = dashPageSize
	if v := strings.TrimSpace(get("status")); v != "" {
		if _, err := deferred.ParseStatus(v); err != nil {
			q.errs["status"] = "not a deferred-operation status"
		} else {
			q.view.Status, q.filter.Status = v, v
		}
	}
	if v := strings.TrimSpace(get("kind")); v != "" {
		if len(v) > 64 {
			q.errs["kind"] = "at most 64 characters"
		} else {
			q.view.Kind, q.filter.Kind = v, v
		}
	}
	if v := strings.TrimSpace(get("owner")); v != "" {
		if len(v) > 128 {
			q.errs["owner"] = "at most 128 characters"
		} else {
			q.view.Owner, q.filter.Owner = v, v
		}
	}
	if id, name, msg := s.resolveOrg(ctx, p, get("org")); msg != "" {
		q.errs["org"] = msg
	} else if id != 0 {
		q.view.Org, q.filter.OrgID = name, id
	}
	if v := get("range"); v != "" {
		if d, ok := dashRanges[v]; ok {
			from := now.Add(-d)
			q.view.Range, q.filter.From = v, &from
		} else {
			q.errs["range"] = "not a known range"
		}
	}
	if v := strings.TrimSpace(get("from")); v != "" {
		if t, ok := dashParseTime(v); ok {
			q.view.From, q.filter.From = v, &t
		} else {
			q.errs["from"] = "not a date and time"
		}
	}
	if v := strings.TrimSpace(get("to")); v != "" {
		if t, ok := dashParseTime(v); ok {
			q.view.To, q.filter.To = v, &t
		} else {
			q.errs["to"] = "not a date and time"
		}
	}
	if v := strings.TrimSpace(get("q")); v != "" {
		if id, err := uuid.Parse(v); err == nil {
			q.view.Q, q.filter.Search, q.search = id.String(), id.String(), id
		} else {
			q.errs["q"] = "enter a full operation or correlation id (a UUID)"
		}
	}
	q.filter.Cursor = get("cursor")
	return q
}

// matches reports whether op passes the filter (for rows that arrive over the stream).
func (q opsQuery) matches(op db.Operation) bool {
	f := q.filter
	switch {
	case f.Status != "" && op.Status != f.Status,
		f.Kind != "" && op.Kind != f.Kind,
		f.Owner != "" && op.Owner != f.Owner,
		f.OrgID != 0 && op.OrgID != f.OrgID,
		f.From != nil && op.AcceptedAt.Before(*f.From),
		f.To != nil && !op.AcceptedAt.Before(*f.To),
		q.search != uuid.Nil && op.ID != q.search && op.CorrelationID != q.search:
		return false
	}
	return true
}

// opRowOf is an operation as a list row.
func opRowOf(op db.Operation, orgs map[int64]string) views.OpRow {
	return views.OpRow{ID: op.ID.String(), Kind: op.Kind, Owner: op.Owner, Status: op.Status, Org: orgs[op.OrgID],
		CorrelationID: op.CorrelationID.String(), AcceptedAt: op.AcceptedAt, UpdatedAt: op.UpdatedAt,
		ExpiresAt: op.ExpiresAt, Terminal: deferred.Status(op.Status).Terminal(), ErrorKind: deref(op.LastErrorKind)}
}

// opsCounts are the counts by status of the viewer's operations (of the filtered org for an
// admin), from the trigger-kept counters, shared across streams for a second.
func (s *Server) opsCounts(ctx context.Context, v jobs.Viewer, q opsQuery, notBefore time.Time) ([]views.Count, error) {
	key := "opcounts:" + strconv.FormatBool(v.AllOrgs) + ":" + strconv.FormatInt(v.OrgID, 10) + ":" + strconv.FormatInt(q.filter.OrgID, 10)
	val, err := s.dash().cache.getFresh(ctx, key, time.Second, notBefore, func(ctx context.Context) (any, error) {
		return s.deps.Jobs.OrgOperationCounts(ctx, v, q.filter.OrgID)
	})
	if err != nil {
		return nil, err
	}
	m := val.(map[string]int64)
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
	ops, next, err := s.deps.Jobs.ListOperations(ctx, v, q.filter)
	if errors.Is(err, jobs.ErrBadCursor) {
		q.errs["cursor"] = "bad page link"
		q.filter.Cursor = ""
		ops, next, err = s.deps.Jobs.ListOperations(ctx, v, q.filter)
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
	for _, k := range s.deps.Jobs.OperationKinds() {
		d.Kinds = append(d.Kinds, views.Option{Value: k, Label: k})
	}
	if d.ShowOrg {
		d.Orgs = s.orgOptions(ctx)
	}
	return render(c, views.OperationsPage(dashPage(c, "Deferred operations", views.NavOperations), d))
}

// operationsList is GET /admin/deferred-operations/list: the table fragment the polling
// fallback swaps in, with the counts out of band.
func (s *Server) operationsList(c *fiber.Ctx) error {
	p := principalOf(c)
	ctx := c.UserContext()
	q := s.parseOpsQuery(ctx, p, func(k string) string { return c.Query(k) }, time.Now())
	d, _, err := s.loadOpsList(ctx, p, q)
	if err != nil {
		return s.dashError(c, err, "page")
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	if err := render(c, views.OpsListFragment(d, false)); err != nil {
		return err
	}
	return views.OpsCounts(d.Counts).Render(ctx, c.Response().BodyWriter())
}

// operationDetail builds the operator view of one operation.
func (s *Server) operationDetail(ctx context.Context, v jobs.Viewer, id uuid.UUID) (views.OperationDetail, error) {
	od, err := s.deps.Jobs.GetOperation(ctx, v, id)
	if err != nil {
		return views.OperationDetail{}, err
	}
	op := od.Operation
	st := deferred.Status(op.Status)
	d := views.OperationDetail{ID: op.ID.String(), Kind: op.Kind, Owner: op.Owner, Status: op.Status, Terminal: st.Terminal(),
		CorrelationID: op.CorrelationID.String(), AcceptedAt: op.AcceptedAt, UpdatedAt: op.UpdatedAt, ExpiresAt: op.ExpiresAt,
		TerminalAt: op.TerminalAt, RetryAfterSeconds: op.RetryAfterSeconds, PollCount: op.PollCount,
		ContinuationDigest: deref(op.ContinuationDigest), DiagnosticsDigest: deref(op.DiagnosticsDigest),
		ErrorKind: deref(op.LastErrorKind), ErrorMessage: deref(op.LastErrorMessage),
		ChainVerified: od.ChainBrokenAt < 0, ChainError: od.ChainError,
		Live: views.Live{StreamURL: "/admin/deferred-operations/" + op.ID.String() + "/events",
			PollURL: "/admin/deferred-operations/" + op.ID.String() + "/panel"}}
	if !st.Terminal() {
		next := op.NextPollAt
		d.NextPollAt = &next
		d.CancelReason = deref(op.CancelUnavailableReason)
	}
	if op.SuccessorID != nil {
		d.SuccessorID = op.SuccessorID.String()
	}
	var subject map[string]string
	_ = json.Unmarshal(op.Subject, &subject)
	d.SubjectPromptID, d.SubjectJobID = dashUUID(subject["prompt_id"]), dashUUID(subject["job_id"])
	for i, h := range od.History {
		d.History = append(d.History, views.HistoryItem{Seq: h.Seq, Status: string(h.Status), At: h.At,
			DocDigest: h.DocDigest, PrevDigest: h.PrevDigest, EntryDigest: h.EntryDigest, Broken: i == od.ChainBrokenAt})
	}
	orgIDs, userIDs := []int64{op.OrgID}, []int64{op.CreatedBy}
	for _, j := range od.Jobs {
		userIDs = append(userIDs, j.CreatedBy)
	}
	orgs, users := s.names(ctx, orgIDs, userIDs)
	d.Org, d.Creator = orgs[op.OrgID], users[op.CreatedBy]
	for _, j := range od.Jobs {
		r := jobRowOf(j, orgs, users)
		r.Current = j.OperationID != nil && *j.OperationID == op.ID
		d.Jobs = append(d.Jobs, r)
	}
	// A retry supersedes the newest job of the prompt, when it has finished.
	if n := len(d.Jobs); n > 0 && d.Jobs[n-1].Retryable() {
		d.RetryJobID = d.Jobs[n-1].ID
	}
	return d, nil
}

// dashUUID returns s when it is a UUID, else "" (a subject is data; only ids are shown).
func dashUUID(s string) string {
	if id, err := uuid.Parse(s); err == nil {
		return id.String()
	}
	return ""
}

// operationPage is GET /admin/deferred-operations/:id.
func (s *Server) operationPage(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "operation")
	}
	d, err := s.operationDetail(c.UserContext(), viewerOf(principalOf(c)), id)
	if err != nil {
		return s.dashError(c, err, "operation")
	}
	d.Notice = dashNoticeOf(c)
	return render(c, views.OperationDetailPage(dashPage(c, "Operation "+views.ShortID(d.ID), views.NavOperations), d))
}

// operationPanel is GET /admin/deferred-operations/:id/panel: the refreshable part.
func (s *Server) operationPanel(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "operation")
	}
	d, err := s.operationDetail(c.UserContext(), viewerOf(principalOf(c)), id)
	if err != nil {
		return s.dashError(c, err, "operation")
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return render(c, views.OperationPanel(d, csrfOf(c)))
}

// operationPollAction is POST /admin/deferred-operations/:id/poll.
func (s *Server) operationPollAction(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "operation")
	}
	if _, err := s.deps.Jobs.PollOperation(c.UserContext(), viewerOf(principalOf(c)), id); err != nil {
		return s.dashError(c, err, "operation")
	}
	return c.Redirect(dashWithNotice("/admin/deferred-operations/"+id.String(), "op-polled"), fiber.StatusSeeOther)
}

// operationCancelAction is POST /admin/deferred-operations/:id/cancel. A refusal answers 409
// with the page and the owner's reason.
func (s *Server) operationCancelAction(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "operation")
	}
	p := principalOf(c)
	v := viewerOf(p)
	_, err := s.deps.Jobs.CancelOperation(c.UserContext(), v, id, actorOf(p))
	var nc *jobs.ErrNotCancelable
	switch {
	case err == nil:
		return c.Redirect(dashWithNotice("/admin/deferred-operations/"+id.String(), "op-cancelled"), fiber.StatusSeeOther)
	case errors.As(err, &nc), errors.Is(err, jobs.ErrConflict):
		d, derr := s.operationDetail(c.UserContext(), v, id)
		if derr != nil {
			return s.dashError(c, derr, "operation")
		}
		n := dashNotices["op-finished"]
		if nc != nil {
			n = views.Notice{Tone: "error", Text: "Not cancelled: " + nc.Reason}
		}
		d.Notice = &n
		c.Status(fiber.StatusConflict)
		return render(c, views.OperationDetailPage(dashPage(c, "Operation "+views.ShortID(d.ID), views.NavOperations), d))
	}
	return s.dashError(c, err, "operation")
}
