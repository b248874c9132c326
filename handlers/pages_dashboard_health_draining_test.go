package handlers

import (
	"testing"
)

// TestDashboardHealthShowsDrainingWorkers: a worker process that has begun a graceful stop is
// counted on the workers card; an admin sees its id, an operator of one org only the count; a
// process that recorded its stop is not listed.
func TestDashboardHealthShowsDrainingWorkers(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	e.exec(t, "INSERT INTO sa_worker_drain (worker_id, grace_ms) VALUES ('w-draining0001', 30000)")
	e.exec(t, "INSERT INTO sa_worker_drain (worker_id, grace_ms, stopped_at) VALUES ('w-stopped00001', 30000, now())")
	e.Server.dashboard.health.clear()
	r := e.get(t, f.adm, "/admin/health/panel")
	wantContains(t, r.body, `data-draining="1"`, "admin's health panel")
	wantContains(t, r.body, "w-draining0001 draining since", "admin's health panel")
	wantNotContains(t, r.body, "w-stopped00001", "a stopped process")
	e.Server.dashboard.health.clear()
	r = e.get(t, f.opA, "/admin/health/panel")
	wantContains(t, r.body, `data-draining="1"`, "operator's health panel")
	wantNotContains(t, r.body, "w-draining0001", "an operator's view of another process's id")
}
