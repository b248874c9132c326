package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	"asterion/identity"
)

// lockedBuffer is a log sink safe for concurrent writers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Five wrong passwords, then the sixth attempt is 429 with Retry-After and the page says when,
// even with the right password; each failure is logged at info with the user and address.
func TestLoginLimitAnswers429(t *testing.T) {
	t.Parallel()
	logs := &lockedBuffer{}
	e := newTestEnv(t, Deps{Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	pw := e.user(t, "acme", "alice", identity.RoleMember)
	for i := range 5 {
		if resp, body := loginAttempt(t, e, "alice", "wrong-"+strconv.Itoa(i), ""); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d %.200s", i+1, resp.StatusCode, body)
		}
	}
	resp, body := loginAttempt(t, e, "alice", pw, "")
	wantHTML(t, resp, body, http.StatusTooManyRequests)
	ra, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || ra < 14*60 || ra > 15*60+1 {
		t.Fatalf("Retry-After %q, want about 900 seconds", resp.Header.Get("Retry-After"))
	}
	m := loginErrorRE.FindStringSubmatch(body)
	if m == nil || !strings.Contains(m[1], "Try again at") || !strings.Contains(m[1], "UTC") {
		t.Fatalf("the page does not say when to try again:\n%s", body)
	}
	if c := cookieNamed(resp, sessionCookie); c != nil && c.Value != "" {
		t.Fatal("a refused sign-in set a session cookie")
	}
	failed := 0
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if rec["msg"] == "sign-in failed" {
			failed++
			if rec["level"] != "INFO" || rec["user"] != "alice" || rec["address"] == nil || rec["address"] == "" {
				t.Errorf("failure log %v: want INFO with user and address", rec)
			}
		}
		if strings.Contains(l, pw) || strings.Contains(l, "wrong-") {
			t.Errorf("a password reached the log: %s", l)
		}
	}
	if failed != 5 {
		t.Fatalf("%d failures logged, want 5:\n%s", failed, logs)
	}
	// After the window the right password works.
	if _, err := e.db.Bun.ExecContext(context.Background(), "UPDATE login_failures SET at = at - interval '15 minutes'"); err != nil {
		t.Fatal(err)
	}
	if resp, _ := loginAttempt(t, e, "alice", pw, ""); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after the window: %d", resp.StatusCode)
	}
}

// Neither the CSRF token nor the credentials are read from the query string.
func TestCredentialsNotFromQueryString(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	pw := e.user(t, "acme", "olga", identity.RoleOperator)

	b := e.browser()
	_, form := b.do(t, get("/login"))
	token := hiddenCSRF(t, form)
	q := url.Values{csrfField: {token}, "username": {"olga"}, "password": {pw}}
	// Everything in the query, an empty form body.
	resp, body := b.do(t, postForm("/login?"+q.Encode(), url.Values{}))
	if resp.StatusCode == http.StatusSeeOther || b.cookies[sessionCookie] != "" {
		t.Fatalf("sign-in from the query string: %d", resp.StatusCode)
	}
	wantHTML(t, resp, body, http.StatusForbidden)
	// The token in the body, the password in the query.
	_, form = b.do(t, get("/login"))
	resp, _ = b.do(t, postForm("/login?password="+url.QueryEscape(pw), url.Values{csrfField: {hiddenCSRF(t, form)}, "username": {"olga"}}))
	if resp.StatusCode != http.StatusUnauthorized || b.cookies[sessionCookie] != "" {
		t.Fatalf("password from the query string: %d", resp.StatusCode)
	}

	s := e.signIn(t, "olga", pw)
	resp, _ = s.do(t, postForm("/logout?"+url.Values{csrfField: {s.csrf}}.Encode(), url.Values{}))
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("logout with the CSRF token in the query: %d, want 403", resp.StatusCode)
	}
	// A multipart body is read.
	var mb bytes.Buffer
	mb.WriteString("--xx\r\nContent-Disposition: form-data; name=\"csrf_token\"\r\n\r\n" + s.csrf + "\r\n--xx--\r\n")
	req, _ := http.NewRequest(http.MethodPost, "/logout", &mb)
	req.Header.Set("Content-Type", "multipart/form-data; boundary=xx")
	if resp, _ := s.do(t, req); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout with the token in a multipart body: %d", resp.StatusCode)
	}
}

// An unreadable sign-in body is a client mistake: 400 with a fresh form, never 500.
func TestLoginUnreadableForm(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	for name, req := range map[string]*http.Request{
		"json":           jsonPost("/login", `{"username":"a"}`),
		"bad escape":     rawForm("/login", "username=%zz"),
		"password twice": rawForm("/login", "password=a&password=b"),
	} {
		resp, body := e.do(t, req)
		wantHTML(t, resp, body, http.StatusBadRequest)
		if !strings.Contains(body, `name="csrf_token"`) {
			t.Errorf("%s: no fresh form", name)
		}
	}
}

func jsonPost(path, body string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return req
}

func rawForm(path, body string) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return req
}

// A page request with a session that ended elsewhere is signed out: redirected to sign in, and
// the dead cookie is cleared.
func TestEndedSessionIsSignedOut(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	pw := e.user(t, "acme", "olga", identity.RoleOperator)
	b := e.signIn(t, "olga", pw)
	cookie := b.cookies[sessionCookie]
	if _, err := e.ids.RevokeSessions(context.Background(), "olga"); err != nil {
		t.Fatal(err)
	}
	req := get("/mission")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: cookie})
	resp, _ := e.do(t, req)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login") {
		t.Fatalf("ended session: %d %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	if c := cookieNamed(resp, sessionCookie); c == nil || c.Value != "" || c.Path != "/" {
		t.Fatalf("the dead cookie is not cleared: %+v", c)
	}
}
