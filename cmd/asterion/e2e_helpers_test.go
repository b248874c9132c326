package main

// Helpers for end-to-end tests: the real program (run) serving on a free port against a test
// database, and the built binary (internal/testbin) for subprocess tests. This file owns the package's TestMain;
// add no other.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/internal/testbin"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}

// asterionBin is the built asterion binary for subprocess tests, built on first use.
func asterionBin(t testing.TB) string {
	t.Helper()
	return testbin.Asterion(t)
}

// syncBuffer is an io.Writer safe for the server's goroutines and the test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testServer is `asterion serve` running in-process on a free port.
type testServer struct {
	// BaseURL is http://127.0.0.1:PORT.
	BaseURL string
	// DatabaseURL is the server's own test database.
	DatabaseURL string
	// DB is that database, for setting up and checking state directly.
	DB *dbtest.DB
	// AdminPassword is the bootstrap admin's password ("" when the test asked for a generated one).
	AdminPassword string
	// Logs is what the server wrote to stderr (JSON log lines).
	Logs *syncBuffer
	// Stdout is what the server wrote to stdout.
	Stdout *syncBuffer
}

// startServer runs the real run(ctx, ["serve","--addr",addr], …) against a fresh migrated test
// database and waits for /readyz. extraEnv adds to or overrides the environment (an empty value
// unsets: {"ASTERION_ADMIN_PASSWORD": ""} makes the server generate one). When the test ends the
// context is cancelled and run must return nil within 10 s.
func startServer(t *testing.T, extraEnv map[string]string) *testServer {
	t.Helper()
	d := dbtest.New(t)
	s := &testServer{DatabaseURL: d.URL.String(), DB: d, AdminPassword: "admin-password-" + identity.NewSecret("")[:8],
		Logs: &syncBuffer{}, Stdout: &syncBuffer{}}
	addr := freeAddr(t)
	s.BaseURL = "http://" + addr
	env := map[string]string{
		"DATABASE_URL":            s.DatabaseURL,
		"ASTERION_ADMIN_PASSWORD": s.AdminPassword,
		"ASTERION_LOG_LEVEL":      "info",
		"ASTERION_DB_WAIT":        "10s",
	}
	for k, v := range extraEnv {
		env[k] = v
	}
	s.AdminPassword = env["ASTERION_ADMIN_PASSWORD"]
	getenv := func(k string) string { return env[k] }

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"serve", "--addr", addr}, getenv, strings.NewReader(""), s.Stdout, s.Logs)
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve returned %v after shutdown; logs:\n%s", err, s.Logs)
			}
		case <-time.After(10 * time.Second):
			t.Errorf("serve did not shut down within 10 s; logs:\n%s", s.Logs)
		}
	})

	client := &http.Client{Timeout: 5 * time.Second}
	defer client.CloseIdleConnections()
	dbtest.WaitForDetail(t, 60*time.Second, "/readyz to answer 200", func() (bool, string) {
		select {
		case err := <-done:
			done <- nil // the run has ended: the cleanup must not wait for it, nor report it again
			t.Fatalf("serve ended before it was ready: %v; logs:\n%s", err, s.Logs)
		default:
		}
		resp, err := client.Get(s.BaseURL + "/readyz")
		if err != nil {
			return false, fmt.Sprintf("last: %v; logs:\n%s", err, s.Logs)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("last: %d; logs:\n%s", resp.StatusCode, s.Logs)
	})
	return s
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// webSession is a signed-in browser: a client with a cookie jar that does not follow redirects,
// and the session's CSRF token for state-changing requests.
type webSession struct {
	base   string
	Client *http.Client
	// Cookie is the session cookie's value.
	Cookie string
	// CSRF is the session's CSRF token (send as X-CSRF-Token or the csrf_token form field).
	CSRF string
}

var loginCSRFRE = regexp.MustCompile(`name="csrf_token" value="([^"]*)"`)

// newClient returns a client with a cookie jar that hands redirects back to the caller.
func newClient() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// Login signs in through the real login form and fails the test when it does not work.
func (s *testServer) Login(t *testing.T, name, password string) *webSession {
	t.Helper()
	w := &webSession{base: s.BaseURL, Client: newClient()}
	t.Cleanup(w.Client.CloseIdleConnections)
	resp, body := w.Get(t, "/login")
	m := loginCSRFRE.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("GET /login: %d, csrf field %v", resp.StatusCode, m)
	}
	resp, body = w.PostForm(t, "/login", url.Values{"csrf_token": {m[1]}, "username": {name}, "password": {password}})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in as %s: %d\n%s", name, resp.StatusCode, body)
	}
	u, _ := url.Parse(s.BaseURL)
	for _, c := range w.Client.Jar.Cookies(u) {
		if c.Name == "asterion_session" {
			w.Cookie = c.Value
		}
	}
	if w.Cookie == "" {
		t.Fatalf("sign in as %s set no session cookie", name)
	}
	_, csrf, err := identity.NewService(s.DB.Bun).SessionPrincipal(context.Background(), w.Cookie)
	if err != nil {
		t.Fatalf("session of %s: %v", name, err)
	}
	w.CSRF = csrf
	return w
}

// LoginAdmin signs in as the bootstrap admin.
func (s *testServer) LoginAdmin(t *testing.T) *webSession {
	t.Helper()
	if s.AdminPassword == "" {
		t.Fatal("LoginAdmin: the server generated the admin password; use Login with it")
	}
	return s.Login(t, "admin", s.AdminPassword)
}

// Get fetches path and reads the body.
func (w *webSession) Get(t *testing.T, path string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, w.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w.Do(t, req)
}

// PostForm posts a form, adding the session's CSRF token when signed in.
func (w *webSession) PostForm(t *testing.T, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	if w.CSRF != "" && form.Get("csrf_token") == "" {
		form.Set("csrf_token", w.CSRF)
	}
	req, err := http.NewRequest(http.MethodPost, w.base+path, strings.NewReader(form.Encode()))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	return w.Do(t, req)
}

// Do sends req with the session's cookies and reads the whole body.
func (w *webSession) Do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := w.Client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

// httpGet is a plain GET without cookies or redirects.
func httpGet(t *testing.T, u string) (*http.Response, string) {
	t.Helper()
	w := &webSession{Client: newClient()}
	defer w.Client.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	return w.Do(t, req)
}

// binResult is what one run of the built binary did.
type binResult struct {
	stdout, stderr string
	code           int
}

// runBinary runs the built asterion with args, the given environment on top of this process's
// (minus DATABASE_URL and every ASTERION_ variable, which `make` exports), and stdin.
func runBinary(t *testing.T, env map[string]string, stdin string, args ...string) binResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, asterionBin(t), args...)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "ASTERION_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := binResult{stdout: stdout.String(), stderr: stderr.String()}
	if ctx.Err() != nil {
		t.Fatalf("asterion %s did not finish within 90 s; stderr:\n%s", strings.Join(args, " "), r.stderr)
	}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("run asterion: %v", err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// lines splits output into its non-empty lines.
func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// wantFailure checks the exit code and that stderr is exactly one "asterion: " line with no
// trace of a panic, and returns that line.
func wantFailure(t *testing.T, r binResult, code int) string {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d; stdout %q stderr %q", r.code, code, r.stdout, r.stderr)
	}
	ls := lines(r.stderr)
	if len(ls) != 1 || !strings.HasPrefix(ls[0], "asterion: ") {
		t.Fatalf("stderr is not one \"asterion: …\" line:\n%s", r.stderr)
	}
	noPanic(t, r.stderr)
	return ls[0]
}

func noPanic(t *testing.T, s string) {
	t.Helper()
	for _, bad := range []string{"panic", "goroutine ", ".go:"} {
		if strings.Contains(s, bad) {
			t.Fatalf("output shows %q:\n%s", bad, s)
		}
	}
}
