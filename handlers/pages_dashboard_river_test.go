package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"

	"asterion/db/dbtest"
)

// TestDashboardRiverUI mounts River's own UI as cmd/asterion does (riverui.NewHandler over a
// River client on the pgx pool, prefix /admin/river) and checks it is served to admins only,
// read-only.
func TestDashboardRiverUI(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t, func(d *dbtest.DB, deps *Deps) {
		client, err := river.NewClient(riverpgxv5.New(d.Pool), &river.Config{Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		h, err := riverui.NewHandler(&riverui.HandlerOpts{
			Endpoints:                riverui.NewEndpoints(client, nil),
			Logger:                   testLogger(),
			Prefix:                   "/admin/river",
			JobListHideArgsByDefault: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		if err := h.Start(ctx); err != nil {
			t.Fatal(err)
		}
		deps.RiverUI = h
	})
	e := f.e
	r := e.get(t, f.adm, "/admin/river")
	if r.status != http.StatusMovedPermanently || r.location != "/admin/river/" {
		t.Errorf("GET /admin/river: %d %q, want a redirect to /admin/river/", r.status, r.location)
	}
	r = e.get(t, f.adm, "/admin/river/")
	wantStatus(t, r, http.StatusOK, "River UI index")
	wantContains(t, r.ctype, "text/html", "River UI content type")
	wantContains(t, r.body, "/admin/river", "River UI knows its prefix")
	r = e.get(t, f.adm, "/admin/river/api/jobs?state=available&limit=5")
	wantStatus(t, r, http.StatusOK, "River UI API")
	wantContains(t, r.ctype, "application/json", "River UI API content type")
	wantContains(t, r.body, f.jobIDA, "River UI lists the prompt job's vehicle")
	r = e.get(t, f.adm, "/admin/river/api/queues")
	wantStatus(t, r, http.StatusOK, "River UI queues")

	for _, u := range []*dashUser{f.opA, f.member} {
		wantStatus(t, e.get(t, u, "/admin/river/"), http.StatusForbidden, u.name+" on River UI")
		wantStatus(t, e.get(t, u, "/admin/river/api/queues"), http.StatusForbidden, u.name+" on River UI API")
	}
	if r := e.get(t, nil, "/admin/river/"); r.status != http.StatusSeeOther || !strings.HasPrefix(r.location, "/login") {
		t.Errorf("anonymous on River UI: %d %q", r.status, r.location)
	}
	// Read-only: River's cancel does not reach River (the dashboard cancels through sa_job).
	r = e.post(t, f.adm, "/admin/river/api/jobs/cancel", url.Values{}, true)
	if r.status < 400 {
		t.Errorf("POST to River UI's cancel: %d, want a refusal", r.status)
	}
	if st := e.jobState(t, f.jobIDA); st != "queued" {
		t.Errorf("job is %s after River UI cancel attempt", st)
	}
}
