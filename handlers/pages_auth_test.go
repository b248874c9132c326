package handlers

import (
	"context"
	"errors"
	"html"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"asterion/identity"
)

func TestLoginFormSetsCSRFCookie(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	resp, body := e.do(t, get("/login"))
	wantHTML(t, resp, body, http.StatusOK)
	c := cookieNamed(resp, loginCSRF)
	if c == nil || c.Value == "" {
		t.Fatalf("GET /login set no %s cookie: %v", loginCSRF, resp.Header.Values("Set-Cookie"))
	}
	if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/login" || c.Secure {
		t.Errorf("login CSRF cookie %+v: want HttpOnly, SameSite=Lax, Path=/login, not Secure", c)
	}
	if field := hiddenCSRF(t, body); field != c.Value {
		t.Fatalf("hidden field %q differs from cookie %q", field, c.Value)
	}
	if cookieNamed(resp, sessionCookie) != nil {
		t.Fatal("GET /login set a session cookie")
	}
	resp2, _ := e.do(t, get("/login"))
	if c2 := cookieNamed(resp2, loginCSRF); c2 == nil || c2.Value == c.Value {
		t.Fatal("two login forms got the same CSRF token")
	}
}

func TestLoginRequiresCSRF(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	pw := e.user(t, "acme", "alice", identity.RoleMember)
	creds := url.Values{"username": {"alice"}, "password": {pw}}
	withField := func(v string) url.Values {
		f := url.Values{}
		for k, vs := range creds {
			f[k] = vs
		}
		f.Set(csrfField, v)
		return f
	}
	token := identity.NewSecret("")
	cases := []struct {
		name   string
		cookie string
		form   url.Values
	}{
		{"neither cookie nor field", "", creds},
		{"cookie without field", token, creds},
		{"field without cookie", "", withField(token)},
		{"field differs from cookie", token, withField(identity.NewSecret(""))},
		{"both empty", "", withField("")},
	}
	for _, c := range cases {
		req := postForm("/login", c.form)
		if c.cookie != "" {
			req.AddCookie(&http.Cookie{Name: loginCSRF, Value: c.cookie})
		}
		resp, body := e.do(t, req)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d, want 403", c.name, resp.StatusCode)
		}
		if sc := cookieNamed(resp, sessionCookie); sc != nil && sc.Value != "" {
			t.Errorf("%s: a session cookie was set", c.name)
		}
		if !strings.Contains(body, `name="csrf_token"`) {
			t.Errorf("%s: the refused form does not offer a fresh one", c.name)
		}
	}
	var n int
	if err := e.db.Bun.NewSelect().TableExpr("sessions").ColumnExpr("count(*)").Scan(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d sessions opened without CSRF", n)
	}
}

// loginAttempt fetches the form and posts it with the given credentials and next.
func loginAttempt(t *testing.T, e *testEnv, name, password, next string) (*http.Response, string) {
	t.Helper()
	b := e.browser()
	_, body := b.do(t, get("/login"))
	form := url.Values{csrfField: {hiddenCSRF(t, body)}, "username": {name}, "password": {password}}
	if next != "" {
		form.Set("next", next)
	}
	return b.do(t, postForm("/login", form))
}

func TestLoginFailuresLookTheSame(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	pw := e.user(t, "acme", "alice", identity.RoleMember)

	wrongResp, wrongBody := loginAttempt(t, e, "alice", pw+"x", "")
	unknownResp, unknownBody := loginAttempt(t, e, "mallory", pw, "")
	if wrongResp.StatusCode != unknownResp.StatusCode || wrongResp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password %d, unknown user %d; want both 401", wrongResp.StatusCode, unknownResp.StatusCode)
	}
	msg := func(body string) string {
		m := loginErrorRE.FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no login error shown:\n%s", body)
		}
		return strings.TrimSpace(html.UnescapeString(m[1]))
	}
	if a, b := msg(wrongBody), msg(unknownBody); a != b || a == "" {
		t.Fatalf("wrong password says %q, unknown user says %q", a, b)
	}
	for _, r := range []*http.Response{wrongResp, unknownResp} {
		if c := cookieNamed(r, sessionCookie); c != nil && c.Value != "" {
			t.Fatal("a failed login set a session cookie")
		}
	}
	// The name is kept in the form, the password never.
	if !strings.Contains(wrongBody, `value="alice"`) || strings.Contains(wrongBody, pw) {
		t.Fatal("failed form should keep the user name and drop the password")
	}
}

func TestLoginSetsSessionCookie(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		name := "plain"
		if secure {
			name = "secure"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newTestEnv(t, Deps{SecureCookies: secure})
			pw := e.user(t, "acme", "olga", identity.RoleOperator)

			resp, _ := e.do(t, get("/login"))
			if c := cookieNamed(resp, loginCSRF); c == nil || c.Secure != secure {
				t.Fatalf("login CSRF cookie %+v: want Secure=%v", c, secure)
			}
			b := e.browser()
			_, form := b.do(t, get("/login"))
			resp, body := b.do(t, postForm("/login", url.Values{csrfField: {hiddenCSRF(t, form)},
				"username": {"olga"}, "password": {pw}, "next": {"/admin/deferred-operations"}}))
			if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/admin/deferred-operations" {
				t.Fatalf("login: %d Location %q; %s", resp.StatusCode, resp.Header.Get("Location"), body)
			}
			c := cookieNamed(resp, sessionCookie)
			if c == nil || c.Value == "" {
				t.Fatalf("no session cookie: %v", resp.Header.Values("Set-Cookie"))
			}
			if !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Path != "/" || c.Secure != secure {
				t.Fatalf("session cookie %+v: want HttpOnly, SameSite=Lax, Path=/, Secure=%v", c, secure)
			}
			if c.Expires.IsZero() {
				t.Error("session cookie has no expiry")
			}
			if _, _, err := e.ids.SessionPrincipal(context.Background(), c.Value); err != nil {
				t.Fatalf("cookie is not a live session: %v", err)
			}
			if resp, body := b.do(t, get("/admin/deferred-operations")); resp.StatusCode != http.StatusOK {
				t.Fatalf("signed-in page: %d %.300s", resp.StatusCode, body)
			}
		})
	}
}

// onSite reports whether a Location stays on this site, reading it the way a browser does
// (WHATWG URL: tabs and newlines are dropped, backslashes count as slashes).
func onSite(loc string) bool {
	clean := strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return -1
		}
		if r == '\\' {
			return '/'
		}
		return r
	}, strings.TrimLeft(loc, " \x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10\x11\x12\x13\x14\x15\x16\x17\x18\x19\x1a\x1b\x1c\x1d\x1e\x1f"))
	u, err := url.Parse(clean)
	return err == nil && u.Scheme == "" && u.Host == "" && strings.HasPrefix(clean, "/") && !strings.HasPrefix(clean, "//")
}

var offSiteNexts = []string{
	"//evil.example",
	"https://evil.example",
	"//evil.example/mission",
	"/\\evil.example",
	"\\\\evil.example",
	"/\t/evil.example",
	"/\n/evil.example",
	" //evil.example",
	"http:evil.example",
	"javascript:alert(1)",
	"evil.example",
}

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for _, next := range offSiteNexts {
		if got := safeNext(next); got != "/mission" {
			t.Errorf("safeNext(%q) = %q, want /mission", next, got)
		}
	}
	for _, next := range []string{"/mission", "/admin/deferred-operations?tab=2", "/a/b#c"} {
		if got := safeNext(next); got != next {
			t.Errorf("safeNext(%q) = %q, want it kept", next, got)
		}
	}
}

func TestLoginNextCannotLeaveTheSite(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	pw := e.user(t, "acme", "alice", identity.RoleMember)
	// The form never carries an off-site next on.
	for _, next := range offSiteNexts {
		_, body := e.do(t, get("/login?next="+url.QueryEscape(next)))
		if m := nextFieldRE.FindStringSubmatch(body); m == nil || !onSite(html.UnescapeString(m[1])) {
			t.Errorf("next %q: form carries %v", next, m)
		}
	}
	// Signing in with one lands on /mission; each login costs an argon2 hash, so a few suffice
	// here (TestSafeNext has the full list).
	for _, next := range []string{"//evil.example", "https://evil.example", "/\t/evil.example", "/\n/evil.example"} {
		resp, _ := loginAttempt(t, e, "alice", pw, next)
		if loc := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || loc != "/mission" || !onSite(loc) {
			t.Errorf("next %q: %d Location %q; want 303 to /mission", next, resp.StatusCode, loc)
		}
	}
	resp, _ := loginAttempt(t, e, "alice", pw, "/admin/deferred-operations?tab=2")
	if loc := resp.Header.Get("Location"); loc != "/admin/deferred-operations?tab=2" {
		t.Errorf("a local next goes to %q", loc)
	}
}

func TestLogout(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	pw := e.user(t, "acme", "olga", identity.RoleOperator)
	b := e.signIn(t, "olga", pw)
	cookie := b.cookies[sessionCookie]

	resp, body := b.do(t, postForm("/logout", url.Values{}))
	wantHTML(t, resp, body, http.StatusForbidden)
	resp, body = b.do(t, postForm("/logout", url.Values{csrfField: {identity.NewSecret("")}}))
	wantHTML(t, resp, body, http.StatusForbidden)
	if _, _, err := e.ids.SessionPrincipal(context.Background(), cookie); err != nil {
		t.Fatalf("a refused logout ended the session: %v", err)
	}

	resp, _ = b.do(t, postForm("/logout", url.Values{csrfField: {b.csrf}}))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Fatalf("logout: %d Location %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	if c := cookieNamed(resp, sessionCookie); c == nil || c.Value != "" || c.Path != "/" {
		t.Fatalf("logout does not clear the session cookie: %+v", c)
	}
	if _, _, err := e.ids.SessionPrincipal(context.Background(), cookie); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("session after logout: %v", err)
	}
	// Replaying the old cookie gets nowhere.
	req := get("/admin/deferred-operations")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie})
	if resp, _ := e.do(t, req); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("old cookie after logout: %d, want 303 to the login", resp.StatusCode)
	}

	// htmx sends the token as a header.
	b2 := e.signIn(t, "olga", pw)
	req = postForm("/logout", url.Values{})
	req.Header.Set(csrfHeader, b2.csrf)
	if resp, _ := b2.do(t, req); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout with X-CSRF-Token: %d", resp.StatusCode)
	}
}
