package handlers

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"asterion/identity"
)

// probeApp mounts the real authorize middleware of e's server on API routes of each access level,
// so the API behaviour is tested even before the route table has protected API routes of its own
// (TestRouteTableAuthorization covers those as they are added).
func (e *testEnv) probeApp() *fiber.App {
	app := fiber.New(fiber.Config{ErrorHandler: e.srv.handleError, BodyLimit: BodyLimit})
	ok := func(c *fiber.Ctx) error {
		p := principalOf(c)
		return c.JSON(fiber.Map{"user": p.UserName, "role": p.Role})
	}
	app.Get("/sa-core/v1/probe", e.srv.authorize(Member, API), ok)
	app.Post("/sa-core/v1/probe", e.srv.authorize(Member, API), ok)
	app.Get("/sa-core/v1/operator-probe", e.srv.authorize(Operator, API), ok)
	app.Get("/sa-core/v1/admin-probe", e.srv.authorize(Admin, API), ok)
	return app
}

func TestAPIWithoutCredentialsIs401(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	app := e.probeApp()
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		resp, body := send(t, app, httptest.NewRequest(method, "/sa-core/v1/probe", nil))
		p := wantProblem(t, resp, body, http.StatusUnauthorized)
		if p.Detail == "" {
			t.Errorf("401 problem without detail: %s", body)
		}
		if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, "Bearer") {
			t.Errorf("WWW-Authenticate %q, want a Bearer challenge", got)
		}
	}
	// A session cookie that is not a session is no identity either.
	req := get("/sa-core/v1/probe")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: identity.NewSecret("")})
	resp, body := send(t, app, req)
	wantProblem(t, resp, body, http.StatusUnauthorized)
}

func TestAPIWrongTokenIs401(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	app := e.probeApp()
	good := e.token(t, "acme", "bob", identity.RoleMember)
	for name, header := range map[string]string{
		"random token":   "Bearer " + identity.NewSecret("ast_"),
		"altered token":  "Bearer " + good[:len(good)-2] + "zz",
		"empty bearer":   "Bearer ",
		"basic scheme":   "Basic Ym9iOmJvYi1wYXNzd29yZA==",
		"token alone":    good,
		"session cookie": "Bearer " + identity.NewSecret(""),
	} {
		req := get("/sa-core/v1/probe")
		req.Header.Set("Authorization", header)
		resp, body := send(t, app, req)
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 401; %s", name, resp.StatusCode, body)
			continue
		}
		wantProblem(t, resp, body, http.StatusUnauthorized)
	}
	resp, body := send(t, app, withBearer(get("/sa-core/v1/probe"), good))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"user":"bob"`) {
		t.Fatalf("good token: %d %s", resp.StatusCode, body)
	}
}

func TestAPIRevokedTokenIs401(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	app := e.probeApp()
	tok := e.token(t, "acme", "bob", identity.RoleMember)
	if resp, body := send(t, app, withBearer(get("/sa-core/v1/probe"), tok)); resp.StatusCode != http.StatusOK {
		t.Fatalf("before revoking: %d %s", resp.StatusCode, body)
	}
	if err := e.ids.RevokeToken(context.Background(), tok); err != nil {
		t.Fatal(err)
	}
	resp, body := send(t, app, withBearer(get("/sa-core/v1/probe"), tok))
	wantProblem(t, resp, body, http.StatusUnauthorized)
}

func TestAPIRoles(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	app := e.probeApp()
	tokens := map[identity.Role]string{
		identity.RoleMember:   e.token(t, "acme", "mem", identity.RoleMember),
		identity.RoleOperator: e.token(t, "acme", "op", identity.RoleOperator),
		identity.RoleAdmin:    e.token(t, "acme", "adm", identity.RoleAdmin),
	}
	paths := map[string]identity.Role{
		"/sa-core/v1/probe":          identity.RoleMember,
		"/sa-core/v1/operator-probe": identity.RoleOperator,
		"/sa-core/v1/admin-probe":    identity.RoleAdmin,
	}
	for role, tok := range tokens {
		for path, need := range paths {
			resp, body := send(t, app, withBearer(get(path), tok))
			if role.Allows(need) {
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s on %s: %d, want 200; %s", role, path, resp.StatusCode, body)
				}
				continue
			}
			if resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s on %s: %d, want 403; %s", role, path, resp.StatusCode, body)
				continue
			}
			wantProblem(t, resp, body, http.StatusForbidden)
		}
	}
}

// A cookie session must prove with its CSRF token any request that changes state; a bearer token
// needs none (a browser never sends it on its own).
func TestSessionWritesNeedCSRF(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	pw := e.user(t, "acme", "alice", identity.RoleMember)
	b := e.signIn(t, "alice", pw).on(e.probeApp())

	if resp, body := b.do(t, get("/sa-core/v1/probe")); resp.StatusCode != http.StatusOK {
		t.Fatalf("session GET: %d %s", resp.StatusCode, body)
	}
	resp, body := b.do(t, httptest.NewRequest(http.MethodPost, "/sa-core/v1/probe", nil))
	wantProblem(t, resp, body, http.StatusForbidden)

	wrong := httptest.NewRequest(http.MethodPost, "/sa-core/v1/probe", nil)
	wrong.Header.Set(csrfHeader, identity.NewSecret(""))
	resp, body = b.do(t, wrong)
	wantProblem(t, resp, body, http.StatusForbidden)

	// Another session's token is no good either.
	other := e.signIn(t, "alice", pw)
	if other.csrf == b.csrf {
		t.Fatal("two sessions share a CSRF token")
	}
	foreign := httptest.NewRequest(http.MethodPost, "/sa-core/v1/probe", nil)
	foreign.Header.Set(csrfHeader, other.csrf)
	resp, body = b.do(t, foreign)
	wantProblem(t, resp, body, http.StatusForbidden)

	byHeader := httptest.NewRequest(http.MethodPost, "/sa-core/v1/probe", nil)
	byHeader.Header.Set(csrfHeader, b.csrf)
	if resp, body := b.do(t, byHeader); resp.StatusCode != http.StatusOK {
		t.Fatalf("session POST with X-CSRF-Token: %d %s", resp.StatusCode, body)
	}
	if resp, body := b.do(t, postForm("/sa-core/v1/probe", url.Values{csrfField: {b.csrf}})); resp.StatusCode != http.StatusOK {
		t.Fatalf("session POST with csrf_token field: %d %s", resp.StatusCode, body)
	}

	tok := e.token(t, "acme", "script", identity.RoleMember)
	if resp, body := send(t, e.probeApp(), withBearer(httptest.NewRequest(http.MethodPost, "/sa-core/v1/probe", nil), tok)); resp.StatusCode != http.StatusOK {
		t.Fatalf("bearer POST without CSRF: %d %s", resp.StatusCode, body)
	}
}

func TestMemberOnOperatorPageIs403(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	const page = "/admin/deferred-operations"

	pw := e.user(t, "acme", "alice", identity.RoleMember)
	b := e.signIn(t, "alice", pw)
	resp, body := b.do(t, get(page))
	wantHTML(t, resp, body, http.StatusForbidden)
	if !strings.Contains(body, "Not allowed") || strings.Contains(body, `id="operations`) {
		t.Fatalf("member's 403 page:\n%s", body)
	}

	tok := e.token(t, "acme", "mtok", identity.RoleMember)
	resp, _ = e.do(t, withBearer(get(page), tok))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("member bearer on %s: %d, want 403", page, resp.StatusCode)
	}

	// Operators and admins get the page, by session and by token.
	opw := e.user(t, "acme", "olga", identity.RoleOperator)
	if resp, body := e.signIn(t, "olga", opw).do(t, get(page)); resp.StatusCode != http.StatusOK {
		t.Fatalf("operator session: %d %.300s", resp.StatusCode, body)
	}
	atok := e.token(t, "globex", "root", identity.RoleAdmin)
	if resp, body := e.do(t, withBearer(get(page), atok)); resp.StatusCode != http.StatusOK {
		t.Fatalf("admin bearer: %d %.300s", resp.StatusCode, body)
	}
}

func TestAnonymousPageRedirectsToLogin(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	resp, body := e.do(t, get("/admin/deferred-operations?view=all&x=a%20b"))
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("status %d, want 303; %s", resp.StatusCode, body)
	}
	loc, err := url.Parse(resp.Header.Get("Location"))
	if err != nil {
		t.Fatal(err)
	}
	if loc.Path != "/login" || loc.Host != "" {
		t.Fatalf("Location %q, want /login?next=…", loc)
	}
	if next := loc.Query().Get("next"); next != "/admin/deferred-operations?view=all&x=a%20b" {
		t.Fatalf("next = %q, want the page asked for with its query", next)
	}
	// The login form carries it on, so signing in lands there.
	_, body = e.do(t, get(loc.String()))
	if m := nextFieldRE.FindStringSubmatch(body); m == nil || m[1] != "/admin/deferred-operations?view=all&amp;x=a%20b" {
		t.Fatalf("login form next field %v", m)
	}
}

var routeParamRE = regexp.MustCompile(`:[A-Za-z_][A-Za-z0-9_]*\??|\*|\+`)

// TestRouteTableAuthorization checks every protected route of the real route table: anonymous
// callers get 401 (API) or the login redirect (pages), a revoked token the same, and a role below
// the route's gets 403. It grows with the route table.
func TestRouteTableAuthorization(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	member := e.token(t, "acme", "mem", identity.RoleMember)
	operator := e.token(t, "acme", "op", identity.RoleOperator)
	revoked := e.token(t, "acme", "gone", identity.RoleAdmin)
	if err := e.ids.RevokeToken(context.Background(), revoked); err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, r := range e.srv.Routes() {
		if r.Access == Public {
			continue
		}
		checked++
		path := routeParamRE.ReplaceAllString(r.Path, "00000000-0000-4000-8000-000000000000")
		name := r.Method + " " + r.Path
		newReq := func() *http.Request { return httptest.NewRequest(r.Method, path, nil) }

		for _, tok := range []string{"", revoked, identity.NewSecret("ast_")} {
			req := newReq()
			if tok != "" {
				req = withBearer(req, tok)
			}
			resp, body := e.do(t, req)
			switch r.Surface {
			case API:
				if resp.StatusCode != http.StatusUnauthorized {
					t.Errorf("%s with token %q: %d, want 401", name, tok, resp.StatusCode)
				} else {
					wantProblem(t, resp, body, http.StatusUnauthorized)
				}
			case OpenAI:
				if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"code":"invalid_api_key"`) {
					t.Errorf("%s with token %q: %d %s, want 401 with OpenAI's invalid_api_key error", name, tok, resp.StatusCode, body)
				}
			case Page:
				if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
					t.Errorf("%s with token %q: %d Location %q, want 303 to /login?next=", name, tok, resp.StatusCode, resp.Header.Get("Location"))
				}
			}
		}
		if r.Access >= Operator {
			if resp, _ := e.do(t, withBearer(newReq(), member)); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s as member: %d, want 403", name, resp.StatusCode)
			}
		}
		if r.Access >= Admin {
			if resp, _ := e.do(t, withBearer(newReq(), operator)); resp.StatusCode != http.StatusForbidden {
				t.Errorf("%s as operator: %d, want 403", name, resp.StatusCode)
			}
		}
	}
	if checked == 0 {
		t.Fatal("the route table has no protected route")
	}
}
