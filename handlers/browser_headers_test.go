package handlers

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"asterion/identity"
)

// cspDirectives are the directives every Content-Security-Policy must hold at least.
var cspDirectives = []string{
	"default-src 'self'", "script-src 'self'", "object-src 'none'", "base-uri 'none'",
	"frame-ancestors 'none'", "form-action 'self'",
}

// checkBrowserHeaders requires the browser headers every answer carries on h, with
// Cache-Control: no-store (or, on a stream, no-cache, which the stream sets itself).
func checkBrowserHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	csp := h.Get("Content-Security-Policy")
	got := map[string]bool{}
	for _, d := range strings.Split(csp, ";") {
		got[strings.Join(strings.Fields(d), " ")] = true
	}
	for _, d := range cspDirectives {
		if !got[d] {
			t.Errorf("%s: Content-Security-Policy %q lacks %q", what, csp, d)
		}
	}
	if strings.Contains(csp, "unsafe-eval") || strings.Contains(csp, "script-src 'self' 'unsafe-inline'") {
		t.Errorf("%s: Content-Security-Policy %q allows script eval or inline script", what, csp)
	}
	if v := h.Get("X-Content-Type-Options"); v != "nosniff" {
		t.Errorf("%s: X-Content-Type-Options %q", what, v)
	}
	if v := h.Get("Referrer-Policy"); v != "same-origin" && v != "no-referrer" {
		t.Errorf("%s: Referrer-Policy %q", what, v)
	}
	if v := h.Get("X-Frame-Options"); v != "DENY" {
		t.Errorf("%s: X-Frame-Options %q", what, v)
	}
	if v := h.Get("Cache-Control"); v != "no-store" && !(strings.HasPrefix(h.Get("Content-Type"), "text/event-stream") && v == "no-cache") {
		t.Errorf("%s: Cache-Control %q, want no-store", what, v)
	}
}

// TestBrowserHeadersOnEveryPageRoute calls every page route of the route table (so a page added
// later is covered without touching this test) as an admin and as an anonymous caller, over
// real HTTP, and requires the contract's browser headers and no-store on each answer. Error
// pages (an unknown page, an unknown object) carry them too.
func TestBrowserHeadersOnEveryPageRoute(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	admin := f.user(t, "headers-org", "headers-admin", identity.RoleAdmin)
	sub := f.submit(t, admin, "headers prompt")
	client := &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	pages := 0
	for _, r := range New(Deps{}).Routes() {
		if r.Surface != Page {
			continue
		}
		pages++
		path := strings.Replace(strings.Replace(r.Path, ":id", sub.JobID, 1), "*", "", 1)
		for _, tok := range []string{admin.Tok, ""} {
			what := r.Method + " " + r.Path
			if tok == "" {
				what += " (anonymous)"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			req, _ := http.NewRequestWithContext(ctx, r.Method, f.Base+path, strings.NewReader("job_id="+sub.JobID))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if tok != "" {
				req.Header.Set("Authorization", "Bearer "+tok)
			}
			resp, err := client.Do(req)
			if err != nil {
				cancel()
				t.Errorf("%s: %v", what, err)
				continue
			}
			// Streams never end: the headers are all this test needs.
			resp.Body.Close()
			cancel()
			checkBrowserHeaders(t, what, resp.Header)
		}
	}
	if pages < 10 {
		t.Fatalf("only %d page routes found in the route table", pages)
	}
	for _, path := range []string{"/no-such-page", "/admin/jobs/00000000-0000-4000-8000-000000000000"} {
		r := f.do(t, "GET", path, admin.Tok, nil)
		if r.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, r.StatusCode)
		}
		checkBrowserHeaders(t, "GET "+path, r.Header)
	}
}
