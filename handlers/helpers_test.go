package handlers

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/db/dbtest"
	"asterion/identity"
)

// testEnv is one server over its own database with a real identity service.
type testEnv struct {
	srv *Server
	ids *identity.Service
	db  *dbtest.DB
}

// newTestIdentity is the identity service of a test server: the real one, writing password
// hashes at the cheapest argon2id cost. At the default cost a hash takes a third of a second
// of a core under the race detector, and the package's tests sign hundreds of users in.
func newTestIdentity(t *testing.T, d *dbtest.DB) *identity.Service {
	t.Helper()
	ids, err := identity.New(d.Bun, identity.Config{PasswordCost: identity.PasswordCost{MemoryKiB: 8, Iterations: 1}})
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

// newTestEnv builds the real application (handlers.New) over a fresh database.
func newTestEnv(t *testing.T, deps Deps) *testEnv {
	t.Helper()
	d := dbtest.New(t)
	ids := newTestIdentity(t, d)
	deps.Identity = ids
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if deps.Jobs == nil {
		// The pages read through the jobs service (no workers, no hub: nothing here runs jobs).
		deps.Jobs = newTestJobs(t, d, nil, deps.Logger)
	}
	return &testEnv{srv: New(deps), ids: ids, db: d}
}

// user creates a user (and its org when missing) and returns its password.
func (e *testEnv) user(t *testing.T, org, name string, role identity.Role) string {
	t.Helper()
	ctx := context.Background()
	if _, err := e.ids.OrgByName(ctx, org); err != nil {
		if _, err := e.ids.CreateOrg(ctx, org); err != nil {
			t.Fatal(err)
		}
	}
	pw := name + "-password"
	if _, err := e.ids.CreateUser(ctx, org, name, role, pw); err != nil {
		t.Fatal(err)
	}
	return pw
}

// token creates a user and an API token for it.
func (e *testEnv) token(t *testing.T, org, name string, role identity.Role) string {
	t.Helper()
	e.user(t, org, name, role)
	tok, err := e.ids.CreateToken(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// do sends one request through the real Fiber app (no network) and reads the whole body.
func (e *testEnv) do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	return send(t, e.srv.App(), req)
}

func send(t *testing.T, app *fiber.App, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	checkAnswer(t, req, resp, b)
	return resp, string(b)
}

func get(path string) *http.Request { return httptest.NewRequest(http.MethodGet, path, nil) }

func postForm(path string, form url.Values) *http.Request {
	req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

func withBearer(req *http.Request, tok string) *http.Request {
	req.Header.Set("Authorization", "Bearer "+tok)
	return req
}

// browser carries cookies between requests like a browser would (ignoring cookie paths, which
// the tests check explicitly where they matter).
type browser struct {
	e       *testEnv
	app     *fiber.App
	cookies map[string]string
	// csrf is the session's CSRF token once signed in.
	csrf string
}

func (e *testEnv) browser() *browser {
	return &browser{e: e, app: e.srv.App(), cookies: map[string]string{}}
}

// on returns the same browser (same cookies) talking to another app.
func (b *browser) on(app *fiber.App) *browser {
	c := *b
	c.app = app
	return &c
}

func (b *browser) do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	for name, value := range b.cookies {
		req.AddCookie(&http.Cookie{Name: name, Value: value})
	}
	resp, body := send(t, b.app, req)
	for _, c := range resp.Cookies() {
		if c.MaxAge < 0 || c.Value == "" || (!c.Expires.IsZero() && c.Expires.Before(time.Now())) {
			delete(b.cookies, c.Name)
			continue
		}
		b.cookies[c.Name] = c.Value
	}
	return resp, body
}

var (
	csrfFieldRE  = regexp.MustCompile(`name="csrf_token" value="([^"]*)"`)
	nextFieldRE  = regexp.MustCompile(`name="next" value="([^"]*)"`)
	loginErrorRE = regexp.MustCompile(`(?s)id="login-error"[^>]*>(.*?)</p>`)
)

// hiddenCSRF returns the login form's hidden CSRF field.
func hiddenCSRF(t *testing.T, body string) string {
	t.Helper()
	m := csrfFieldRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no hidden csrf_token field in:\n%s", body)
	}
	return m[1]
}

// signIn goes through the login form as a browser would and returns the signed-in browser with
// its session's CSRF token.
func (e *testEnv) signIn(t *testing.T, name, password string) *browser {
	t.Helper()
	b := e.browser()
	resp, body := b.do(t, get("/login"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /login: %d", resp.StatusCode)
	}
	resp, body = b.do(t, postForm("/login", url.Values{
		"csrf_token": {hiddenCSRF(t, body)}, "username": {name}, "password": {password},
	}))
	if resp.StatusCode != http.StatusSeeOther || b.cookies[sessionCookie] == "" {
		t.Fatalf("sign in as %s: %d, cookies %v\n%s", name, resp.StatusCode, b.cookies, body)
	}
	_, csrf, err := e.ids.SessionPrincipal(context.Background(), b.cookies[sessionCookie])
	if err != nil {
		t.Fatalf("session after sign-in: %v", err)
	}
	b.csrf = csrf
	return b
}

// cookieNamed returns the Set-Cookie of that name in resp, or nil.
func cookieNamed(resp *http.Response, name string) *http.Cookie {
	for _, c := range resp.Cookies() {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// wantProblem checks an application/problem+json answer with that status.
func wantProblem(t *testing.T, resp *http.Response, body string, status int) Problem {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d; body %s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, body)
	}
	var p Problem
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("problem body %q: %v", body, err)
	}
	if p.Status != status || p.Title == "" || p.Type == "" {
		t.Fatalf("problem %+v: want status %d with type and title", p, status)
	}
	return p
}

func wantHTML(t *testing.T, resp *http.Response, body string, status int) {
	t.Helper()
	if resp.StatusCode != status {
		t.Fatalf("status %d, want %d; body %.300s", resp.StatusCode, status, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/html") {
		t.Fatalf("Content-Type %q, want text/html", ct)
	}
}
