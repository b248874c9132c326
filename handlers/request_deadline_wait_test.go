package handlers

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/jobs/provider"
)

// A Prefer: wait on a route that does not honour it leaves the request its deadline: the header
// alone stretches nothing.
func TestPreferWaitElsewhereKeepsTheDeadline(t *testing.T) {
	t.Parallel()
	base, _, ended := slowQueryServer(t, Limits{RequestTimeout: 300 * time.Millisecond})
	req, _ := http.NewRequest(http.MethodGet, base+"/slow", nil)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Prefer", "wait=60")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p := wantProblem(t, resp, string(body), http.StatusServiceUnavailable)
	if !strings.Contains(p.Detail, "longer than 300ms") {
		t.Errorf("503 detail %q does not say the deadline", p.Detail)
	}
	if err := <-ended; err == nil {
		t.Error("the statement ran to its end: Prefer: wait stretched a route that does not honour it")
	}
}

// On the routes that honour it, a wait longer than the request deadline is served whole: a
// submit and a status GET that wait past a short deadline still get their 200.
func TestPreferWaitOutlivesTheDeadline(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveServerConfig{
		Provider: provider.NewSim(provider.SimConfig{}),
		Deps:     func(_ *dbtest.DB, d *Deps) { d.Limits.RequestTimeout = 2 * time.Second },
	})
	u := f.user(t, "acme", "patient", identity.RoleMember)
	r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "slowish #sim:latency=3s"}, "Prefer", "wait=20")
	if r.StatusCode != http.StatusOK || r.Header.Get("Preference-Applied") != "wait=20" {
		t.Fatalf("a waiting submit past the deadline: %s", r)
	}
	s := f.submit(t, u, "slowish too #sim:latency=3s")
	href := strings.TrimPrefix(mustDecode[struct {
		StatusHref string `json:"status_href"`
	}](t, s.Operation).StatusHref, f.Base)
	r = f.do(t, "GET", href, u.Tok, nil, "Prefer", "wait=20")
	if r.StatusCode != http.StatusOK || r.Header.Get("Preference-Applied") != "wait=20" {
		t.Fatalf("a waiting status GET past the deadline: %s", r)
	}
}
