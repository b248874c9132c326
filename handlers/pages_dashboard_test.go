package handlers

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/provider"
)

// dashEnv is the one server harness (liveServer) as the dashboard tests use it: the instant
// sim provider and no workers unless StartWorkers is called (so jobs stay queued until a test
// moves them); users sign in with a session cookie.
type dashEnv struct{ *liveServer }

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
func newDashEnv(t *testing.T, mod ...func(d *dbtest.DB, deps *Deps)) *dashEnv {
	t.Helper()
	return &dashEnv{startLiveServerWith(t, liveServerConfig{Provider: provider.NewSim(provider.SimConfig{}), HoldWorkers: true,
		Deps: func(d *dbtest.DB, deps *Deps) {
			for _, m := range mod {
				m(d, deps)
			}
		}})}
}

// user creates a user (and org) and signs it in.
func (e *dashEnv) user(t *testing.T, org, name string, role identity.Role) *dashUser {
	t.Helper()
	ctx := context.Background()
	if _, err := e.IDs.OrgByName(ctx, org); err != nil {
		if _, err := e.IDs.CreateOrg(ctx, org); err != nil {
			t.Fatal(err)
		}
	}
	u, err := e.IDs.CreateUser(ctx, org, name, role, name+"-password")
	if err != nil {
		t.Fatal(err)
	}
	cookie, sess, p, err := e.IDs.Login(ctx, name, name+"-password")
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
	req, err := http.NewRequest(http.MethodGet, e.Base+path, nil)
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
	req, err := http.NewRequest(http.MethodPost, e.Base+path, strings.NewReader(form.Encode()))
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
	sub, err := e.Jobs.Submit(context.Background(), jobs.SubmitRequest{Viewer: u.viewer, Prompt: text})
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return sub
}

// exec runs SQL in the test database.
func (e *dashEnv) exec(t *testing.T, query string, args ...any) {
	t.Helper()
	if _, err := e.DB.Bun.ExecContext(context.Background(), query, args...); err != nil {
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
	e                     *dashEnv
	opA, opB, member, adm *dashUser
	subA, subB            jobs.Submitted
	opIDA, opIDB          string
	jobIDA, jobIDB, textA string
	promptIDA, promptIDB  string
}

func newDashFixture(t *testing.T, mod ...func(d *dbtest.DB, deps *Deps)) *dashFixture {
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
	if err := e.DB.Bun.QueryRowContext(context.Background(), "SELECT state FROM sa_job WHERE id = ?", id).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}
