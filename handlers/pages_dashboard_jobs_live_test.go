package handlers

import (
	"strings"
	"testing"
	"time"
)

// TestDashboardJobsStream: the jobs list stream follows a job from queued to succeeded.
func TestDashboardJobsStream(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	s := openDashStream(t, e, f.opA, "/admin/jobs/events")
	if ev := s.next(t, 5*time.Second); ev.name != "snapshot" || !strings.Contains(ev.data, `<tr id="job-`+f.jobIDA) {
		t.Fatalf("jobs snapshot: %q %.500s", ev.name, ev.data)
	}
	sub := e.submit(t, f.opA, "watch me")
	id := sub.JobID.String()
	s.waitFor(t, "new job row", 10*time.Second, func(ev dashEvent) bool {
		return ev.name == "row" && strings.Contains(ev.data, `afterbegin:#jobs-rows`) && strings.Contains(ev.data, id)
	})
	e.StartWorkers(t)
	s.waitFor(t, "succeeded job row", 15*time.Second, func(ev dashEvent) bool {
		return ev.name == "row" && strings.Contains(ev.data, `<tr id="job-`+id+`"`) && strings.Contains(ev.data, `data-state="succeeded"`)
	})
}
