package handlers

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/jobs/provider"
)

// dashEnv is the application on a loopback listener for the dashboard tests: its own database,
// identity, a jobs service on the instant sim provider, a running change-feed hub, and no
// workers unless startWorkers is called (so jobs stay queued until a test moves them).
type dashEnv struct {
	base string
	db   *dbtest.DB
	ids  *identity.Service
	svc  *jobs.Service
	rt   *jobs.Runtime
	deps Deps

	rtOnce   sync.Once
	rtCtx    context.Context
	rtCancel context.CancelFunc
}

// dashUser is a signed-in user: a session cookie with its CSRF token.
type dashUser struct {
	name   string
	role   identity.Role
	id     int64
	orgID  int64
	cookie string
	csrf   string
	viewer jobs.Viewer
}

// newDashEnv starts the server; mod may change Deps before it is built.
func newDashEnv(t *testing.T, mod ...func(*dashEnv)) *dashEnv {
	t.Helper()
	d := dbtest.New(t)
	log := testLogger()
	ids := identity.NewService(d.Bun)
	svc, err := jobs.NewService(jobs.Config{DB: d.Bun, Provider: provider.NewSim(provider.SimConfig{}), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	hub := feed.NewHub(d.Pool, d.Bun, log)
	stopHub := hub.Start(context.Background())
	e := &dashEnv{db: d, ids: ids, svc: svc, deps: Deps{Identity: ids, Jobs: svc, Hub: hub, Logger: log,
		Ready: func(ctx context.Context) error { return d.Bun.PingContext(ctx) }}}
	for _, m := range mod {
		m(e)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(e.deps)
	e.base = "http://" + ln.Addr().String()
	serveCtx, serveCancel := context.WithCancel(context.Background())
	serveDone := make(chan error, 1)
	go func() { serveDone <- srv.Serve(serveCtx, ln) }()
	e.rtCtx, e.rtCancel = context.WithCancel(context.Background())
	t.Cleanup(func() {
		serveCancel()
		select {
		case err := <-serveDone:
			if err != nil {
				t.Errorf("serve: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("Serve did not return within 15 s")
		}
		if e.rt != nil {
			_ = e.rt.Stop(context.Background(), time.Second)
		}
		e.rtCancel()
		stopHub()
	})
	select {
	case <-hub.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("hub not ready")
	}
	return e
}

// startWorkers starts a worker runtime (once).
func (e *dashEnv) startWorkers(t *testing.T) {
	t.Helper()
	e.rtOnce.Do(func() {
		rt, err := jobs.NewRuntime(e.svc, jobs.RuntimeConfig{Pool: e.db.Pool, Workers: 4, PriorityCeiling: -1})
		if err != nil {
			t.Fatal(err)
		}
		if err := rt.Start(e.rtCtx); err != nil {
			t.Fatal(err)
		}
		e.rt = rt
	})
}

// user creates a user (and org) and signs it in.
func (e *dashEnv) user(t *testing.T, org, name string, role identity.Role) *dashUser {
	t.Helper()
	ctx := context.Background()
	if _, err := e.ids.OrgByName(ctx, org); err != nil {
		if _, err := e.ids.CreateOrg(ctx, org); err != nil {
			t.Fatal(err)
		}
	}
	u, err := e.ids.CreateUser(ctx, org, name, role, name+"-password")
	if err != nil {
		t.Fatal(err)
	}
	cookie, sess, p, err := e.ids.Login(ctx, name, name+"-password")
	if err != nil {
		t.Fatal(err)
	}
	return &dashUser{name: name, role: role, id: u.ID, orgID: u.OrgID, cookie: cookie, csrf: sess.CSRFToken, viewer: viewerOf(p)}
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

type dashResp struct {
	status   int
	body     string
	location string
	ctype    string
}

// get requests path as u (anonymous when nil), without following redirects.
func (e *dashEnv) get(t *testing.T, u *dashUser, path string) dashResp {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, e.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e.do(t, u, req)
}

// post sends a form as u; the CSRF field is added when withCSRF.
func (e *dashEnv) post(t *testing.T, u *dashUser, path string, form url.Values, withCSRF bool) dashResp {
	t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if withCSRF && u != nil {
		form.Set("csrf_token", u.csrf)
	}
	req, err := http.NewRequest(http.MethodPost, e.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return e.do(t, u, req)
}

func (e *dashEnv) do(t *testing.T, u *dashUser, req *http.Request) dashResp {
	t.Helper()
	if u != nil {
		req.AddCookie(&http.Cookie{Name: sessionCookie, Value: u.cookie})
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return dashResp{status: resp.StatusCode, body: string(b), location: resp.Header.Get("Location"), ctype: resp.Header.Get("Content-Type")}
}

// submit submits a prompt as u through the jobs service and returns its ids.
func (e *dashEnv) submit(t *testing.T, u *dashUser, text string) jobs.Submitted {
	t.Helper()
	sub, err := e.svc.Submit(context.Background(), jobs.SubmitRequest{Viewer: u.viewer, Prompt: text})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return sub
}

// exec runs SQL in the test database.
func (e *dashEnv) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	if _, err := e.db.Bun.ExecContext(context.Background(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func wantStatus(t *testing.T, r dashResp, status int, what string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("%s: status %d, want %d; body %.600s", what, r.status, status, r.body)
	}
}

func wantContains(t *testing.T, body, want, what string) {
	t.Helper()
	if !strings.Contains(body, want) {
		t.Fatalf("%s: %q not found in:\n%.3000s", what, want, body)
	}
}

func wantNotContains(t *testing.T, body, bad, what string) {
	t.Helper()
	if strings.Contains(body, bad) {
		t.Fatalf("%s: %q found", what, bad)
	}
}

// dashFixture is two orgs with an operator each, a member, an admin, and one prompt in each org.
type dashFixture struct {
	e                      *dashEnv
	opA, opB, member, adm  *dashUser
	subA, subB             jobs.Submitted
	opIDA, opIDB           string
	jobIDA, jobIDB, textA  string
	promptIDA, promptIDB   string
	correlationA           string
	memberSub              jobs.Submitted
	memberOpID, memberJobs string
}

func newDashFixture(t *testing.T, mod ...func(*dashEnv)) *dashFixture {
	t.Helper()
	e := newDashEnv(t, mod...)
	f := &dashFixture{e: e}
	f.opA = e.user(t, "acme", "olga", identity.RoleOperator)
	f.member = e.user(t, "acme", "mia", identity.RoleMember)
	f.opB = e.user(t, "globex", "otto", identity.RoleOperator)
	f.adm = e.user(t, "globex", "ada", identity.RoleAdmin)
	f.textA = "secret prompt text " + uuid.NewString()
	f.subA = e.submit(t, f.member, f.textA)
	f.subB = e.submit(t, f.opB, "globex prompt")
	f.opIDA, f.opIDB = f.subA.Operation.OperationID.String(), f.subB.Operation.OperationID.String()
	f.jobIDA, f.jobIDB = f.subA.JobID.String(), f.subB.JobID.String()
	f.promptIDA, f.promptIDB = f.subA.PromptID.String(), f.subB.PromptID.String()
	return f
}

// TestDashboardAccessMatrix checks every page and fragment for each role: anonymous is sent to
// the login form, a member gets the 403 page, an operator sees its org and gets 404 for
// another org's ids (exactly as for a missing id), an admin sees every org.
func TestDashboardAccessMatrix(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	missing := uuid.NewString()
	type page struct {
		path string
		// wantIn is a string an operator of org A finds in the answer.
		wantIn string
		// otherOrg is the same page for org B's object (404 for org A's operator), or "".
		otherOrg string
		stream   bool
	}
	pages := []page{
		{path: "/admin/deferred-operations", wantIn: `id="ops-list"`},
		{path: "/admin/deferred-operations/list", wantIn: `id="ops-list"`},
		{path: "/admin/deferred-operations/events", stream: true},
		{path: "/admin/deferred-operations/" + f.opIDA, wantIn: `id="op-panel"`, otherOrg: "/admin/deferred-operations/" + f.opIDB},
		{path: "/admin/deferred-operations/" + f.opIDA + "/panel", wantIn: `Status history`, otherOrg: "/admin/deferred-operations/" + f.opIDB + "/panel"},
		{path: "/admin/deferred-operations/" + f.opIDA + "/events", stream: true, otherOrg: "/admin/deferred-operations/" + f.opIDB + "/events"},
		{path: "/admin/jobs", wantIn: `id="jobs-list"`},
		{path: "/admin/jobs/list", wantIn: `id="jobs-list"`},
		{path: "/admin/jobs/events", stream: true},
		{path: "/admin/jobs/bulk?action=cancel", wantIn: `data-bulk-count`},
		{path: "/admin/jobs/" + f.jobIDA, wantIn: `id="job-panel"`, otherOrg: "/admin/jobs/" + f.jobIDB},
		{path: "/admin/jobs/" + f.jobIDA + "/panel", wantIn: `Supersede chain`, otherOrg: "/admin/jobs/" + f.jobIDB + "/panel"},
		{path: "/admin/jobs/" + f.jobIDA + "/events", stream: true, otherOrg: "/admin/jobs/" + f.jobIDB + "/events"},
		{path: "/admin/health", wantIn: `id="health-panel"`},
		{path: "/admin/health/panel", wantIn: `chart-throughput`},
	}
	for _, p := range pages {
		t.Run(p.path, func(t *testing.T) {
			r := e.get(t, nil, p.path)
			if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "/login?next=") {
				t.Errorf("anonymous: %d Location %q, want 303 to the login form", r.status, r.location)
			}
			r = e.get(t, f.member, p.path)
			wantStatus(t, r, http.StatusForbidden, "member")
			wantContains(t, r.body, "Not allowed", "member's 403 page")
			if p.stream {
				for _, u := range []*dashUser{f.opA, f.adm} {
					ev := openDashStream(t, e, u, p.path)
					first := ev.next(t, 5*time.Second)
					if first.name != "snapshot" && first.name != "changed" {
						t.Errorf("%s: first event %q, want snapshot or changed", u.name, first.name)
					}
				}
			} else {
				r = e.get(t, f.opA, p.path)
				wantStatus(t, r, http.StatusOK, "operator")
				wantContains(t, r.body, p.wantIn, "operator")
				wantNotContains(t, r.body, f.opIDB, "operator A's page shows org B's operation")
				r = e.get(t, f.adm, p.path)
				wantStatus(t, r, http.StatusOK, "admin")
			}
			if p.otherOrg != "" {
				r = e.get(t, f.opA, p.otherOrg)
				wantStatus(t, r, http.StatusNotFound, "operator of another org")
				gone := strings.Replace(p.otherOrg, f.opIDB, missing, 1)
				gone = strings.Replace(gone, f.jobIDB, missing, 1)
				r2 := e.get(t, f.opA, gone)
				wantStatus(t, r2, http.StatusNotFound, "missing id")
				if r.body != r2.body {
					t.Errorf("another org's id and a missing id answer differently:\n%s\n---\n%s", r.body, r2.body)
				}
				if !p.stream {
					wantStatus(t, e.get(t, f.adm, p.otherOrg), http.StatusOK, "admin on org B's object")
				}
			}
		})
	}
	// The admin's list shows both orgs, with the org column; the operator's only its own.
	r := e.get(t, f.adm, "/admin/deferred-operations")
	wantContains(t, r.body, f.opIDA, "admin list")
	wantContains(t, r.body, f.opIDB, "admin list")
	wantContains(t, r.body, ">Org</th>", "admin org column")
	r = e.get(t, f.opA, "/admin/deferred-operations")
	wantContains(t, r.body, f.opIDA, "operator list")
	wantNotContains(t, r.body, ">Org</th>", "operator org column")
	// River's UI is for admins only.
	wantStatus(t, e.get(t, f.opA, "/admin/river/"), http.StatusForbidden, "operator on River UI")
	wantStatus(t, e.get(t, f.member, "/admin/river/"), http.StatusForbidden, "member on River UI")
	wantStatus(t, e.get(t, f.adm, "/admin/river/"), http.StatusNotFound, "admin on unmounted River UI")
}

// TestDashboardActionsNeedRoleAndCSRF checks every action: anonymous to the login form, a
// member refused, an operator without the CSRF token refused, another org's id 404.
func TestDashboardActionsNeedRoleAndCSRF(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	actions := []struct{ path, other string }{
		{"/admin/deferred-operations/" + f.opIDA + "/poll", "/admin/deferred-operations/" + f.opIDB + "/poll"},
		{"/admin/deferred-operations/" + f.opIDA + "/cancel", "/admin/deferred-operations/" + f.opIDB + "/cancel"},
		{"/admin/jobs/" + f.jobIDA + "/cancel", "/admin/jobs/" + f.jobIDB + "/cancel"},
		{"/admin/jobs/" + f.jobIDA + "/retry", "/admin/jobs/" + f.jobIDB + "/retry"},
		{"/admin/jobs/bulk", ""},
	}
	for _, a := range actions {
		r := e.post(t, nil, a.path, nil, false)
		if r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "/login") {
			t.Errorf("POST %s anonymous: %d %q", a.path, r.status, r.location)
		}
		wantStatus(t, e.post(t, f.member, a.path, url.Values{"action": {"cancel"}}, true), http.StatusForbidden, "member POST "+a.path)
		r = e.post(t, f.opA, a.path, url.Values{"action": {"cancel"}}, false)
		wantStatus(t, r, http.StatusForbidden, "POST without CSRF "+a.path)
		wantContains(t, r.body, "CSRF", "CSRF refusal")
		if a.other != "" {
			wantStatus(t, e.post(t, f.opA, a.other, nil, true), http.StatusNotFound, "POST on another org's id "+a.other)
		}
	}
	// Nothing of the above changed a job.
	if st := f.e.jobState(t, f.jobIDA); st != "queued" {
		t.Fatalf("job A is %s after refused actions", st)
	}
	if st := f.e.jobState(t, f.jobIDB); st != "queued" {
		t.Fatalf("job B is %s after refused actions", st)
	}
}

func (e *dashEnv) jobState(t *testing.T, id string) string {
	t.Helper()
	var st string
	if err := e.db.Bun.QueryRowContext(context.Background(), "SELECT state FROM sa_job WHERE id = ?", id).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestDashboardOperationsList covers counts, filters, search and keyset pagination.
func TestDashboardOperationsList(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	for i := 0; i < 51; i++ {
		e.submit(t, f.opA, "bulk prompt")
	}
	r := e.get(t, f.opA, "/admin/deferred-operations")
	wantStatus(t, r, http.StatusOK, "list")
	if n := strings.Count(r.body, `<tr id="op-`); n != 50 {
		t.Errorf("first page has %d rows, want 50", n)
	}
	wantContains(t, r.body, `data-count="pending"`, "counts bar")
	countRE := regexp.MustCompile(`data-count="pending"[^>]*>\s*<span>pending</span>\s*<span[^>]*>(\d+)</span>`)
	if m := countRE.FindStringSubmatch(r.body); m == nil || m[1] != "52" {
		t.Errorf("pending count = %v, want 52", m)
	}
	// Keyset pagination: the older page holds the rest, the oldest (org A's first prompt) last.
	older := regexp.MustCompile(`href="(/admin/deferred-operations\?cursor=[^"]+)"[^>]*rel="next"`).FindStringSubmatch(r.body)
	if older == nil {
		t.Fatalf("no Older link")
	}
	r2 := e.get(t, f.opA, strings.ReplaceAll(older[1], "&amp;", "&"))
	wantStatus(t, r2, http.StatusOK, "older page")
	if n := strings.Count(r2.body, `<tr id="op-`); n != 2 {
		t.Errorf("second page has %d rows, want 2", n)
	}
	wantContains(t, r2.body, f.opIDA, "second page")
	wantContains(t, r2.body, "← Newest", "second page")
	// A bad cursor restarts at the newest page instead of failing.
	wantStatus(t, e.get(t, f.opA, "/admin/deferred-operations?cursor=bogus"), http.StatusOK, "bad cursor")

	// Search by operation id and by correlation id (the prompt's).
	r = e.get(t, f.opA, "/admin/deferred-operations?q="+f.opIDA)
	if n := strings.Count(r.body, `<tr id="op-`); n != 1 {
		t.Errorf("search by id: %d rows", n)
	}
	r = e.get(t, f.opA, "/admin/deferred-operations?q="+f.promptIDA)
	wantContains(t, r.body, `<tr id="op-`+f.opIDA, "search by correlation id")
	r = e.get(t, f.opA, "/admin/deferred-operations?q=not-a-uuid")
	wantStatus(t, r, http.StatusOK, "bad search")
	wantContains(t, r.body, `aria-invalid="true"`, "bad search is flagged")
	wantContains(t, r.body, "enter a full operation or correlation id", "bad search message")

	// Status, kind, owner, time range.
	if n := strings.Count(e.get(t, f.opA, "/admin/deferred-operations?status=completed").body, `<tr id="op-`); n != 0 {
		t.Errorf("status=completed: %d rows", n)
	}
	if n := strings.Count(e.get(t, f.opA, "/admin/deferred-operations?kind=prompt.execute&owner=asterion.jobs&range=1h").body, `<tr id="op-`); n != 50 {
		t.Errorf("kind+owner+range: %d rows", n)
	}
	if n := strings.Count(e.get(t, f.opA, "/admin/deferred-operations?owner=someone.else").body, `<tr id="op-`); n != 0 {
		t.Errorf("owner filter: %d rows", n)
	}
	future := time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04")
	if n := strings.Count(e.get(t, f.opA, "/admin/deferred-operations?from="+future).body, `<tr id="op-`); n != 0 {
		t.Errorf("from in the future: %d rows", n)
	}
	// The admin filters by org; an operator's org filter is ignored (it sees only its org).
	r = e.get(t, f.adm, "/admin/deferred-operations?org=globex")
	wantContains(t, r.body, f.opIDB, "admin org filter")
	wantNotContains(t, r.body, f.opIDA, "admin org filter")
	r = e.get(t, f.opA, "/admin/deferred-operations?org=globex&q="+f.opIDB)
	wantNotContains(t, r.body, `<tr id="op-`+f.opIDB, "operator asking for org B")
}

// TestDashboardOperationDetailAndActions covers the operator view and poll, cancel, retry.
func TestDashboardOperationDetailAndActions(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	path := "/admin/deferred-operations/" + f.opIDA
	r := e.get(t, f.opA, path)
	wantStatus(t, r, http.StatusOK, "detail")
	for _, want := range []string{"prompt.execute", "asterion.jobs", "Status history", `data-chain="verified"`,
		"Continuation digest", "Diagnostics digest", "Correlation id", f.jobIDA, `data-history-status="pending"`,
		`action="/admin/deferred-operations/` + f.opIDA + `/poll"`, `data-dialog-open="cancel-dialog"`, "mia", "acme"} {
		wantContains(t, r.body, want, "detail page")
	}
	// Never the raw payload: the prompt's text is not on the page.
	wantNotContains(t, r.body, f.textA, "detail page shows the prompt text")

	r = e.post(t, f.opA, path+"/poll", nil, true)
	wantStatus(t, r, http.StatusSeeOther, "poll")
	wantContains(t, r.location, "notice=op-polled", "poll redirect")
	wantContains(t, e.get(t, f.opA, r.location).body, "Polled the owning runtime", "poll notice")

	r = e.post(t, f.opA, path+"/cancel", nil, true)
	wantStatus(t, r, http.StatusSeeOther, "cancel")
	r = e.get(t, f.opA, r.location)
	wantContains(t, r.body, "Cancelled: the owner stopped the operation.", "cancel notice")
	wantContains(t, r.body, `id="op-status" data-status="cancelled"`, "cancelled status")
	wantContains(t, r.body, `disabled aria-describedby="cancel-unavailable"`, "disabled cancel")
	wantContains(t, r.body, "The operation has already finished (cancelled).", "cancel reason")
	if st := e.jobState(t, f.jobIDA); st != "cancelled" {
		t.Fatalf("job is %s after cancelling its operation", st)
	}
	// Cancelling again is refused with the reason, 409.
	r = e.post(t, f.opA, path+"/cancel", nil, true)
	wantStatus(t, r, http.StatusConflict, "second cancel")
	wantContains(t, r.body, "already finished", "second cancel reason")

	// A not-cancelable operation shows its reason and a disabled button.
	e.exec(t, "UPDATE sa_operation SET cancel_unavailable_reason = 'the provider call cannot be interrupted' WHERE id = ?", f.opIDB)
	r = e.get(t, f.adm, "/admin/deferred-operations/"+f.opIDB)
	wantContains(t, r.body, "the provider call cannot be interrupted", "cancel reason")
	wantContains(t, r.body, `disabled aria-describedby="cancel-unavailable"`, "disabled cancel")
	r = e.post(t, f.adm, "/admin/deferred-operations/"+f.opIDB+"/cancel", nil, true)
	wantStatus(t, r, http.StatusConflict, "not cancelable")
	wantContains(t, r.body, "Not cancelled: the provider call cannot be interrupted", "409 reason")

	// Retry the cancelled prompt job from the operation page: on to the new operation.
	r = e.get(t, f.opA, path)
	wantContains(t, r.body, `action="/admin/jobs/`+f.jobIDA+`/retry"`, "retry button")
	r = e.post(t, f.opA, "/admin/jobs/"+f.jobIDA+"/retry", url.Values{"return": {"operation"}}, true)
	wantStatus(t, r, http.StatusSeeOther, "retry")
	if !strings.HasPrefix(r.location, "/admin/deferred-operations/") || strings.Contains(r.location, f.opIDA) {
		t.Fatalf("retry went to %q, want the new operation", r.location)
	}
	r = e.get(t, f.opA, r.location)
	wantContains(t, r.body, "Retried", "retry notice")
	wantContains(t, r.body, `data-state="superseded"`, "the old job is superseded in the chain")
	r = e.get(t, f.opA, path)
	wantContains(t, r.body, "Retried as", "old operation links its successor")
}

// TestDashboardJobs covers the jobs list, detail, cancel, retry and the bulk actions.
func TestDashboardJobs(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	var ids []string
	for i := 0; i < 4; i++ {
		ids = append(ids, e.submit(t, f.opA, "job").JobID.String())
	}
	r := e.get(t, f.opA, "/admin/jobs")
	if n := strings.Count(r.body, `<tr id="job-`); n != 5 {
		t.Errorf("jobs list: %d rows, want 5", n)
	}
	wantContains(t, r.body, "waiting", "waiting time")
	wantContains(t, r.body, "data-elapsed-since", "live timer")
	wantContains(t, r.body, "mia", "creator")
	r = e.get(t, f.opA, "/admin/jobs?state=succeeded")
	if n := strings.Count(r.body, `<tr id="job-`); n != 0 {
		t.Errorf("state=succeeded: %d rows", n)
	}
	// Going to a job or prompt id.
	r = e.get(t, f.opA, "/admin/jobs?q="+f.promptIDA)
	if r.status != http.StatusSeeOther || r.location != "/admin/jobs/"+f.jobIDA {
		t.Errorf("q=prompt id: %d %q", r.status, r.location)
	}
	r = e.get(t, f.opA, "/admin/jobs?q="+f.jobIDB)
	wantStatus(t, r, http.StatusOK, "q=other org's job")
	wantContains(t, r.body, "no job or prompt you can see has this id", "other org's job")

	// Detail, cancel, retry.
	r = e.get(t, f.opA, "/admin/jobs/"+ids[0])
	for _, want := range []string{`data-state="queued"`, "Supersede chain", `aria-current="true"`, "olga"} {
		wantContains(t, r.body, want, "job page")
	}
	r = e.post(t, f.opA, "/admin/jobs/"+ids[0]+"/cancel", nil, true)
	wantStatus(t, r, http.StatusSeeOther, "cancel job")
	wantContains(t, e.get(t, f.opA, r.location).body, "Cancelled the job.", "cancel notice")
	r = e.post(t, f.opA, "/admin/jobs/"+ids[0]+"/cancel", nil, true)
	wantContains(t, r.location, "notice=job-finished", "cancel a cancelled job")
	r = e.post(t, f.opA, "/admin/jobs/"+ids[1]+"/retry", nil, true)
	wantContains(t, r.location, "notice=retry-conflict", "retry a queued job")
	r = e.post(t, f.opA, "/admin/jobs/"+ids[0]+"/retry", nil, true)
	wantStatus(t, r, http.StatusSeeOther, "retry")
	newJob := strings.TrimPrefix(strings.Split(r.location, "?")[0], "/admin/jobs/")
	r = e.get(t, f.opA, r.location)
	wantContains(t, r.body, "this new job supersedes the old one", "retry notice")
	wantContains(t, r.body, ids[0], "chain shows the superseded job")
	if st := e.jobState(t, ids[0]); st != "superseded" {
		t.Errorf("retried job is %s", st)
	}

	// Bulk cancel: the confirmation states the count (queued jobs of org A only).
	r = e.get(t, f.opA, "/admin/jobs/bulk?action=cancel&state=queued")
	wantStatus(t, r, http.StatusOK, "bulk confirm")
	wantContains(t, r.body, `<span data-bulk-count>5</span>`, "bulk count") // ids[1..3], job A, the retry
	wantContains(t, r.body, `name="csrf_token"`, "bulk form CSRF")
	r = e.post(t, f.opA, "/admin/jobs/bulk", url.Values{"action": {"cancel"}, "state": {"queued"}, "expected": {"5"}}, true)
	wantStatus(t, r, http.StatusSeeOther, "bulk cancel")
	r = e.get(t, f.opA, r.location)
	wantContains(t, r.body, "5 jobs cancelled.", "bulk notice")
	for _, id := range append(ids[1:], f.jobIDA, newJob) {
		if st := e.jobState(t, id); st != "cancelled" {
			t.Errorf("job %s is %s after bulk cancel", id, st)
		}
	}
	if st := e.jobState(t, f.jobIDB); st != "queued" {
		t.Errorf("org B's job is %s after org A's bulk cancel", st)
	}
	// Bulk retry of the cancelled ones; nothing left to cancel.
	r = e.get(t, f.opA, "/admin/jobs/bulk?action=cancel")
	wantContains(t, r.body, "Nothing to cancel", "empty bulk")
	r = e.get(t, f.opA, "/admin/jobs/bulk?action=retry&state=cancelled")
	wantContains(t, r.body, `<span data-bulk-count>5</span>`, "bulk retry count")
	r = e.post(t, f.opA, "/admin/jobs/bulk", url.Values{"action": {"retry"}, "state": {"cancelled"}, "expected": {"5"}}, true)
	wantContains(t, e.get(t, f.opA, r.location).body, "5 jobs retried.", "bulk retry notice")
	wantStatus(t, e.get(t, f.opA, "/admin/jobs/bulk?action=explode"), http.StatusBadRequest, "unknown bulk action")
}

// TestDashboardHealth covers the queue-health page: counts, charts, banners.
func TestDashboardHealth(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	// Work is queued and no worker ever ran: the no-worker banner.
	r := e.get(t, f.opA, "/admin/health")
	wantStatus(t, r, http.StatusOK, "health")
	for _, want := range []string{`data-banner="no-worker"`, `id="chart-throughput"`, `id="chart-wait"`, `id="chart-run"`,
		`role="img"`, `data-stat="queued"`, `data-alive="false"`, `hx-trigger="every 5s"`} {
		wantContains(t, r.body, want, "health page")
	}
	wantNotContains(t, r.body, `data-banner="past-due"`, "past-due banner without past-due work")
	// A job due for ten minutes is past due.
	e.exec(t, "UPDATE sa_job SET scheduled_at = now() - interval '10 minutes' WHERE id = ?", f.jobIDA)
	time.Sleep(2100 * time.Millisecond) // the health figures are shared for 2 s
	r = e.get(t, f.opA, "/admin/health/panel")
	wantContains(t, r.body, `data-banner="past-due"`, "past-due banner")
	wantContains(t, r.body, "1 job is past due", "past-due count")

	// With workers, the queue drains; the no-worker banner goes and the chart has data.
	e.startWorkers(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		r = e.get(t, f.adm, "/admin/health/panel")
		if strings.Contains(r.body, `data-alive="true"`) && !strings.Contains(r.body, `data-banner="`) &&
			strings.Contains(r.body, "<rect") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health never showed live workers, no banner and finished jobs:\n%.4000s", r.body)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// dashEvent is one event of a dashboard stream.
type dashEvent struct{ name, data string }

type dashStream struct {
	c    chan dashEvent
	stop func()
}

// openDashStream opens an SSE stream as u; it closes when the test ends.
func openDashStream(t *testing.T, e *dashEnv, u *dashUser, path string) *dashStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: u.cookie})
	resp, err := noRedirect.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("open %s: %d %s %.300s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &dashStream{c: make(chan dashEvent, 256)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(s.c)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64*1024), 4<<20)
		var ev dashEvent
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev.name != "" || len(data) > 0 {
					ev.data = strings.Join(data, "\n")
					s.c <- ev
				}
				ev, data = dashEvent{}, nil
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				data = append(data, strings.TrimPrefix(line, "data: "))
			}
		}
	}()
	s.stop = func() { cancel(); <-done }
	t.Cleanup(s.stop)
	return s
}

// next returns the next event within timeout.
func (s *dashStream) next(t *testing.T, timeout time.Duration) dashEvent {
	t.Helper()
	select {
	case ev, ok := <-s.c:
		if !ok {
			t.Fatal("stream ended")
		}
		return ev
	case <-time.After(timeout):
		t.Fatalf("no event within %v", timeout)
	}
	return dashEvent{}
}

// waitFor reads events until one satisfies ok.
func (s *dashStream) waitFor(t *testing.T, what string, timeout time.Duration, ok func(dashEvent) bool) dashEvent {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("no %s within %v", what, timeout)
		}
		select {
		case ev, open := <-s.c:
			if !open {
				t.Fatalf("stream ended waiting for %s", what)
			}
			if ok(ev) {
				return ev
			}
		case <-time.After(left):
			t.Fatalf("no %s within %v", what, timeout)
		}
	}
}

// TestDashboardOperationsStream: a snapshot on connect, new rows prepended, changed rows
// swapped out of band, counts following, nothing of another org.
func TestDashboardOperationsStream(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	s := openDashStream(t, e, f.opA, "/admin/deferred-operations/events")
	snap := s.next(t, 5*time.Second)
	if snap.name != "snapshot" || !strings.Contains(snap.data, `id="ops-list"`) || !strings.Contains(snap.data, `hx-swap-oob="true"`) ||
		!strings.Contains(snap.data, `<tr id="op-`+f.opIDA) {
		t.Fatalf("first event %q is not the snapshot of the page:\n%.2000s", snap.name, snap.data)
	}
	meta := s.next(t, 5*time.Second)
	if meta.name != "meta" || !strings.Contains(meta.data, `id="ops-counts"`) {
		t.Fatalf("second event %q is not the counts", meta.name)
	}
	// Org B's new operation never shows; org A's is prepended.
	subB := e.submit(t, f.opB, "other org")
	subA := e.submit(t, f.member, "new")
	newID := subA.Operation.OperationID.String()
	ev := s.waitFor(t, "the new row", 10*time.Second, func(ev dashEvent) bool {
		if strings.Contains(ev.data, subB.Operation.OperationID.String()) {
			t.Fatalf("org B's operation reached org A's stream: %s", ev.data)
		}
		return ev.name == "row" && strings.Contains(ev.data, newID)
	})
	wantContains(t, ev.data, `hx-swap-oob="afterbegin:#ops-rows"`, "prepend")
	wantContains(t, ev.data, `data-status="pending"`, "new row status")
	// A change of a shown row is an out-of-band swap of that row.
	if _, err := e.svc.Cancel(context.Background(), f.opA.viewer, subA.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	ev = s.waitFor(t, "the cancelled row", 10*time.Second, func(ev dashEvent) bool {
		return ev.name == "row" && strings.Contains(ev.data, `<tr id="op-`+newID+`"`) && strings.Contains(ev.data, `data-status="cancelled"`)
	})
	wantContains(t, ev.data, `hx-swap-oob="true"`, "row swap")
	s.waitFor(t, "updated counts", 5*time.Second, func(ev dashEvent) bool {
		return ev.name == "meta" && strings.Contains(ev.data, `data-count="cancelled"`)
	})

	// A filtered stream: a row that stops matching is marked stale; new non-matching rows stay out.
	s2 := openDashStream(t, e, f.opA, "/admin/deferred-operations/events?status=pending")
	s2.next(t, 5*time.Second)
	if _, err := e.svc.Cancel(context.Background(), f.opA.viewer, f.subA.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	ev = s2.waitFor(t, "stale row", 10*time.Second, func(ev dashEvent) bool {
		return ev.name == "row" && strings.Contains(ev.data, f.opIDA)
	})
	wantContains(t, ev.data, "data-stale", "stale marker")

	// The detail stream says "changed" on connect and when the operation changes.
	d := openDashStream(t, e, f.opA, "/admin/deferred-operations/"+f.opIDA+"/events")
	if ev := d.next(t, 5*time.Second); ev.name != "changed" {
		t.Fatalf("detail stream first event %q", ev.name)
	}
	if _, err := e.svc.Retry(context.Background(), f.opA.viewer, f.subA.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	d.waitFor(t, "changed after retry", 5*time.Second, func(ev dashEvent) bool { return ev.name == "changed" })
}

// TestDashboardJobsStream: the jobs list stream follows a job from queued to succeeded.
func TestDashboardJobsStream(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	s := openDashStream(t, e, f.opA, "/admin/jobs/events")
	if ev := s.next(t, 5*time.Second); ev.name != "snapshot" || !strings.Contains(ev.data, `<tr id="job-`+f.jobIDA) {
		t.Fatalf("jobs snapshot: %q %.500s", ev.name, ev.data)
	}
	sub := e.submit(t, f.opA, "watch me")
	id := sub.JobID.String()
	s.waitFor(t, "new job row", 10*time.Second, func(ev dashEvent) bool {
		return ev.name == "row" && strings.Contains(ev.data, `afterbegin:#jobs-rows`) && strings.Contains(ev.data, id)
	})
	e.startWorkers(t)
	s.waitFor(t, "succeeded job row", 15*time.Second, func(ev dashEvent) bool {
		return ev.name == "row" && strings.Contains(ev.data, `<tr id="job-`+id+`"`) && strings.Contains(ev.data, `data-state="succeeded"`)
	})
}

// TestDashboardLiveListKeepsItsSize: once a live list holds its cap of rows, new matching rows
// are counted in a notice linking to the newest page instead of being prepended.
func TestDashboardLiveListKeepsItsSize(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	srv := New(e.deps)
	p, _, err := e.ids.SessionPrincipal(context.Background(), f.opA.cookie)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := srv.parseOpsQuery(ctx, p, func(string) string { return "" }, time.Now())
	st := &opsStreamer{s: srv, p: p, v: viewerOf(p), q: q, rowCap: 1}
	var buf strings.Builder
	w := bufio.NewWriter(&buf)
	if err := st.snapshot(ctx, w); err != nil {
		t.Fatal(err)
	}
	sub := e.submit(t, f.member, "one too many")
	ev := feed.Event{Seq: 1 << 40, Topic: feed.TopicJob, OrgID: f.opA.orgID, OperationID: &sub.Operation.OperationID,
		Payload: []byte(`{"state":"queued","operation_status":"pending"}`)}
	buf.Reset()
	w.Reset(&buf)
	for i := 0; i < 2; i++ {
		if err := st.event(ctx, w, ev); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	out := buf.String()
	wantNotContains(t, out, "afterbegin", "row prepended past the cap")
	wantContains(t, out, `id="ops-newer" hx-swap-oob="true"`, "newer notice")
	wantContains(t, out, "2 newer rows match the filter.", "newer count")
	// A change of a row on the page still swaps in place.
	ev.OperationID = &f.subA.Operation.OperationID
	buf.Reset()
	w.Reset(&buf)
	if err := st.event(ctx, w, ev); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	wantContains(t, buf.String(), `<tr id="op-`+f.opIDA+`" data-status="pending"`, "row swap")
}
