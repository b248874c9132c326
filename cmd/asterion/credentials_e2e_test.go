package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// apiStatus calls a member API route with a bearer token and returns the status.
func apiStatus(t *testing.T, s *testServer, tok string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.BaseURL+"/sa-core/v1/deferred-operations", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	w := &webSession{Client: newClient()}
	defer w.Client.CloseIdleConnections()
	resp, _ := w.Do(t, req)
	return resp.StatusCode
}

// pageStatus fetches a signed-in page with the session's cookie.
func pageStatus(t *testing.T, w *webSession) int {
	t.Helper()
	resp, _ := w.Get(t, "/mission")
	return resp.StatusCode
}

// tryLogin posts the login form once and returns the status.
func tryLogin(t *testing.T, s *testServer, name, password string) int {
	t.Helper()
	w := &webSession{base: s.BaseURL, Client: newClient()}
	defer w.Client.CloseIdleConnections()
	_, body := w.Get(t, "/login")
	m := loginCSRFRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no login form: %s", body)
	}
	resp, _ := w.PostForm(t, "/login", url.Values{"csrf_token": {m[1]}, "username": {name}, "password": {password}})
	return resp.StatusCode
}

func okRun(t *testing.T, env map[string]string, stdin string, args ...string) string {
	t.Helper()
	r := runBinary(t, env, stdin, args...)
	if r.code != 0 {
		t.Fatalf("asterion %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
	}
	return r.stdout
}

func listTokens(t *testing.T, env map[string]string, user string) []tokenJSON {
	t.Helper()
	var out []tokenJSON
	if err := json.Unmarshal([]byte(okRun(t, env, "", "token", "list", "--user", user, "--json")), &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Every credential command against a running server: its effect is seen on the next request.
func TestCredentialCommands(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	env := map[string]string{"DATABASE_URL": s.DatabaseURL}
	okRun(t, env, "alice-password-1\n", "user", "create", "--org", "default", "--name", "alice", "--role", "member", "--password-stdin")

	// create, use, list (with last use), revoke.
	tok := strings.TrimSpace(okRun(t, env, "", "token", "create", "--user", "alice"))
	used := time.Now()
	if got := apiStatus(t, s, tok); got != http.StatusOK {
		t.Fatalf("fresh token: %d", got)
	}
	list := listTokens(t, env, "alice")
	if len(list) != 1 || list[0].ID == 0 || !strings.HasPrefix(tok, list[0].Prefix) || len(list[0].Prefix) < 8 ||
		list[0].LastUsedAt == nil || list[0].ExpiresAt != nil || list[0].State != "active" {
		t.Fatalf("token list %+v", list)
	}
	if lu := *list[0].LastUsedAt; lu.Before(used.Truncate(time.Minute)) || lu.After(time.Now()) || lu.Truncate(time.Minute) != lu {
		t.Fatalf("last used %v: want the minute of the use (%v), to the minute", lu, used)
	}
	table := okRun(t, env, "", "token", "list", "--user", "alice")
	if strings.Contains(table, tok) || strings.Contains(table, tok[len(list[0].Prefix):]) || !strings.Contains(table, strconv.FormatInt(list[0].ID, 10)) ||
		!strings.Contains(table, "LAST USED") {
		t.Fatalf("token list table:\n%s", table)
	}
	id := strconv.FormatInt(list[0].ID, 10)
	if out := okRun(t, env, "", "token", "revoke", id); !strings.Contains(out, "revoked token "+id) {
		t.Fatalf("revoke printed %q", out)
	}
	if got := apiStatus(t, s, tok); got != http.StatusUnauthorized {
		t.Fatalf("revoked token: %d, want 401", got)
	}
	if out := okRun(t, env, "", "token", "revoke", id); !strings.Contains(out, "already revoked") {
		t.Fatalf("second revoke printed %q", out)
	}
	if l := listTokens(t, env, "alice"); l[0].State != "revoked" || l[0].RevokedAt == nil {
		t.Fatalf("list after revoke %+v", l)
	}
	wantFailure(t, runBinary(t, env, "", "token", "revoke", "999999"), 1)
	wantFailure(t, runBinary(t, env, "", "token", "revoke", "abc"), 2)

	// Expiry: a 30-day token carries its expiry; a short one stops working once it passes.
	before30 := time.Now().Add(-time.Second)
	tok30 := strings.TrimSpace(okRun(t, env, "", "token", "create", "--user", "alice", "--expires", "30d"))
	after30 := time.Now().Add(time.Second)
	if got := apiStatus(t, s, tok30); got != http.StatusOK {
		t.Fatalf("30-day token: %d", got)
	}
	const month = 30 * 24 * time.Hour
	if l := listTokens(t, env, "alice"); l[0].ExpiresAt == nil || l[0].ExpiresAt.Before(before30.Add(month)) ||
		l[0].ExpiresAt.After(after30.Add(month)) {
		t.Fatalf("30-day token listed as %+v", l[0])
	}
	short := strings.TrimSpace(okRun(t, env, "", "token", "create", "--user", "alice", "--expires", "2s"))
	dbtest.WaitFor(t, 30*time.Second, "a 2-second token to stop working", func() bool {
		return apiStatus(t, s, short) == http.StatusUnauthorized
	})
	if l := listTokens(t, env, "alice"); l[0].State != "expired" {
		t.Fatalf("expired token listed as %+v", l[0])
	}
	for _, bad := range []string{"0d", "-1h", "soon", "4000d"} {
		wantFailure(t, runBinary(t, env, "", "token", "create", "--user", "alice", "--expires", bad), 2)
	}

	// disable: the token and the browser session are refused at once; enable restores the token.
	web := s.Login(t, "alice", "alice-password-1")
	if got := pageStatus(t, web); got != http.StatusOK {
		t.Fatalf("signed-in page: %d", got)
	}
	if out := okRun(t, env, "", "user", "disable", "alice"); !strings.Contains(out, "1 sessions ended") {
		t.Fatalf("disable printed %q", out)
	}
	if got := apiStatus(t, s, tok30); got != http.StatusUnauthorized {
		t.Fatalf("token of a disabled user: %d, want 401", got)
	}
	if got := pageStatus(t, web); got != http.StatusSeeOther {
		t.Fatalf("session of a disabled user: %d, want the redirect to sign in", got)
	}
	if got := tryLogin(t, s, "alice", "alice-password-1"); got != http.StatusUnauthorized {
		t.Fatalf("a disabled user signs in: %d", got)
	}
	okRun(t, env, "", "user", "enable", "alice")
	if got := apiStatus(t, s, tok30); got != http.StatusOK {
		t.Fatalf("token after enable: %d, want 200", got)
	}

	// set-password: the old password fails, the new one works, the old session ended.
	web = s.Login(t, "alice", "alice-password-1")
	okRun(t, env, "alice-password-2\n", "user", "set-password", "alice", "--password-stdin")
	if got := pageStatus(t, web); got != http.StatusSeeOther {
		t.Fatalf("session after set-password: %d, want the redirect to sign in", got)
	}
	if got := tryLogin(t, s, "alice", "alice-password-1"); got != http.StatusUnauthorized {
		t.Fatalf("old password: %d, want 401", got)
	}
	web = s.Login(t, "alice", "alice-password-2")

	// session revoke: the browser's cookie is refused.
	if out := okRun(t, env, "", "session", "revoke", "--user", "alice"); !strings.Contains(out, "ended 1 sessions") {
		t.Fatalf("session revoke printed %q", out)
	}
	if got := pageStatus(t, web); got != http.StatusSeeOther {
		t.Fatalf("revoked session: %d, want the redirect to sign in", got)
	}
	if got := apiStatus(t, s, tok30); got != http.StatusOK {
		t.Fatalf("session revoke touched the token: %d", got)
	}

	// Mistakes.
	wantFailure(t, runBinary(t, env, "short\n", "user", "set-password", "alice", "--password-stdin"), 1)
	wantFailure(t, runBinary(t, env, "", "user", "set-password", "alice"), 2)
	wantFailure(t, runBinary(t, env, "", "user", "disable"), 2)
	wantFailure(t, runBinary(t, env, "", "user", "disable", "nobody"), 1)
	wantFailure(t, runBinary(t, env, "", "session", "revoke"), 2)
	wantFailure(t, runBinary(t, env, "", "token", "list"), 2)
	wantFailure(t, runBinary(t, env, "", "token", "list", "--user", "nobody"), 1)
}
