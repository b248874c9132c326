package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

func TestServeHealthAndReadiness(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	resp, body := httpGet(t, s.BaseURL+"/readyz")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"ready"`) {
		t.Fatalf("/readyz: %d %s", resp.StatusCode, body)
	}
	resp, body = httpGet(t, s.BaseURL+"/healthz")
	var h struct{ Status, Version string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &h) != nil || h.Status != "ok" || h.Version == "" {
		t.Fatalf("/healthz: %d %s", resp.StatusCode, body)
	}
}

func TestServeLoginPage(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	resp, body := httpGet(t, s.BaseURL+"/login")
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("/login: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, want := range []string{`<form method="post" action="/login"`, `name="csrf_token"`, `name="username"`, `name="password"`, `/static/css/app.css`} {
		if !strings.Contains(body, want) {
			t.Errorf("login page lacks %s", want)
		}
	}
	// The page's stylesheet is served from the embedded files.
	resp, css := httpGet(t, s.BaseURL+"/static/css/app.css")
	if resp.StatusCode != http.StatusOK || len(css) < 1000 {
		t.Fatalf("/static/css/app.css: %d, %d bytes", resp.StatusCode, len(css))
	}
}

func TestServeMetrics(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	httpGet(t, s.BaseURL+"/login")
	resp, body := httpGet(t, s.BaseURL+"/metrics")
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/metrics: %d", resp.StatusCode)
	}
	for _, want := range []string{
		`asterion_http_requests_total{method="GET",route="/login",status="200"} 1`,
		`asterion_http_requests_total{method="GET",route="/readyz",status="200"}`,
		"go_goroutines",
		"process_resident_memory_bytes",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func TestServeAdminSignsIn(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)

	anon := &webSession{base: s.BaseURL, Client: newClient()}
	resp, _ := anon.Get(t, "/admin/deferred-operations")
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
		t.Fatalf("anonymous dashboard: %d %q", resp.StatusCode, resp.Header.Get("Location"))
	}

	w := s.LoginAdmin(t)
	resp, body := w.Get(t, "/admin/deferred-operations")
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "Deferred operations") || !strings.Contains(body, ">admin<") {
		t.Fatalf("admin dashboard: %d\n%.500s", resp.StatusCode, body)
	}

	resp, _ = w.PostForm(t, "/logout", url.Values{})
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp, _ := w.Get(t, "/admin/deferred-operations"); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("dashboard after logout: %d, want the login redirect", resp.StatusCode)
	}
}

// Without ASTERION_ADMIN_PASSWORD the first start generates one and prints it once on stderr,
// outside the JSON log: no log record carries it.
func TestServeGeneratesAdminPassword(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"ASTERION_ADMIN_PASSWORD": ""})
	var password string
	n := 0
	var records []string
	for _, l := range lines(s.Logs.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err == nil {
			records = append(records, l)
			continue
		}
		p, ok := strings.CutPrefix(l, "asterion: generated password of user admin (shown only this once): ")
		if !ok {
			t.Fatalf("stderr line is neither JSON nor the password line: %s", l)
		}
		password = p
		n++
	}
	if n != 1 || len(password) < 16 {
		t.Fatalf("generated password printed %d times:\n%s", n, s.Logs)
	}
	for _, r := range records {
		if strings.Contains(r, password) {
			t.Fatalf("a log record carries the password: %s", r)
		}
	}
	w := s.Login(t, "admin", password)
	if resp, _ := w.Get(t, "/admin/deferred-operations"); resp.StatusCode != http.StatusOK {
		t.Fatalf("admin with the generated password: %d", resp.StatusCode)
	}
}
