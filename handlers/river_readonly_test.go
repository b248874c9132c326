package handlers

import (
	"asterion/db/dbtest"
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"riverqueue.com/riverui"
)

// TestRiverUIIsReadOnly: River's own UI at /admin/river is read-only only because the route
// table mounts it for GET and nothing else. This test says so: every /admin/river route is a
// GET, and every one of River UI's writing endpoints (cancel, delete, retry, pause, resume,
// queue update), asked by an admin with a valid CSRF token, answers 404 or 405 and changes
// nothing in River.
func TestRiverUIIsReadOnly(t *testing.T) {
	t.Parallel()
	for _, r := range New(Deps{}).Routes() {
		if strings.HasPrefix(r.Path, "/admin/river") && r.Method != http.MethodGet {
			t.Errorf("route %s %s mounts River UI for a writing method", r.Method, r.Path)
		}
	}
	f := newDashFixture(t, func(d *dbtest.DB, deps *Deps) {
		client, err := river.NewClient(riverpgxv5.New(d.Pool), &river.Config{Logger: testLogger()})
		if err != nil {
			t.Fatal(err)
		}
		h, err := riverui.NewHandler(&riverui.HandlerOpts{Endpoints: riverui.NewEndpoints(client, nil),
			Logger: testLogger(), Prefix: "/admin/river", JobListHideArgsByDefault: true})
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
	var riverID int64
	var queue, before string
	if err := e.DB.Bun.QueryRowContext(context.Background(),
		"SELECT r.id, r.queue, r.state FROM river_job r JOIN sa_job j ON j.river_job_id = r.id WHERE j.id = ?", f.jobIDA).
		Scan(&riverID, &queue, &before); err != nil {
		t.Fatal(err)
	}
	ids := `{"job_ids":["` + strconv.FormatInt(riverID, 10) + `"]}`
	for _, c := range []struct{ method, path, body string }{
		{"POST", "/admin/river/api/jobs/cancel", ids},
		{"POST", "/admin/river/api/jobs/delete", ids},
		{"POST", "/admin/river/api/jobs/retry", ids},
		{"PUT", "/admin/river/api/queues/" + queue + "/pause", `{}`},
		{"PUT", "/admin/river/api/queues/" + queue + "/resume", `{}`},
		{"PATCH", "/admin/river/api/queues/" + queue, `{"concurrency":null}`},
		{"DELETE", "/admin/river/api/jobs/" + strconv.FormatInt(riverID, 10), ``},
		{"POST", "/admin/river/", `{}`},
	} {
		req, err := http.NewRequest(c.method, e.Base+c.path, strings.NewReader(c.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(csrfHeader, f.adm.csrf)
		r := e.do(t, f.adm, req)
		if r.status != http.StatusNotFound && r.status != http.StatusMethodNotAllowed {
			t.Errorf("%s %s as an admin: %d, want 404 or 405", c.method, c.path, r.status)
		}
	}
	var after string
	var paused int
	if err := e.DB.Bun.QueryRowContext(context.Background(), "SELECT state FROM river_job WHERE id = ?", riverID).Scan(&after); err != nil {
		t.Fatalf("River job after the attempts: %v", err)
	}
	if after != before {
		t.Errorf("River job went from %s to %s", before, after)
	}
	if err := e.DB.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM river_queue WHERE paused_at IS NOT NULL").Scan(&paused); err != nil {
		t.Fatal(err)
	}
	if paused != 0 {
		t.Errorf("%d River queues paused", paused)
	}
}
