package handlers

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"asterion/jobs/jobstest"
)

// TestDashboardHealth covers the queue-health page: counts, charts, banners.
func TestDashboardHealth(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	// Work is queued and no worker ever ran: the no-worker banner.
	r := e.get(t, f.opA, "/admin/health")
	wantStatus(t, r, http.StatusOK, "health")
	for _, want := range []string{`data-banner="no-worker"`, `id="chart-throughput"`, `id="chart-wait"`, `id="chart-run"`,
		`role="img"`, `data-stat="queued"`, `data-alive="false"`, `hx-trigger="every 5s"`} {
		wantContains(t, r.body, want, "health page")
	}
	wantNotContains(t, r.body, `data-banner="past-due"`, "past-due banner without past-due work")
	// A job due for ten minutes is past due.
	e.exec(t, "UPDATE sa_job SET scheduled_at = now() - interval '10 minutes' WHERE id = ?", f.jobIDA)
	e.Server.dashboard.health.clear() // the health figures are shared for 2 s
	r = e.get(t, f.opA, "/admin/health/panel")
	wantContains(t, r.body, `data-banner="past-due"`, "past-due banner")
	wantContains(t, r.body, "1 job is past due", "past-due count")

	// With workers, the queue drains; the no-worker banner goes and the chart has data.
	e.StartWorkers(t)
	jobstest.WaitFor(t, 20*time.Second, "the health panel to show live workers, no banner and finished jobs", func() bool {
		r = e.get(t, f.adm, "/admin/health/panel")
		return strings.Contains(r.body, `data-alive="true"`) && !strings.Contains(r.body, `data-banner="`) &&
			strings.Contains(r.body, "<rect")
	})
}
