package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// TestDashboardJobs covers the jobs list, detail, cancel, retry and the bulk actions.
func TestDashboardJobs(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	var ids []string
	for i := 0; i < 4; i++ {
		ids = append(ids, e.submit(t, f.opA, "job").JobID.String())
	}
	r := e.get(t, f.opA, "/admin/jobs")
	if n := strings.Count(r.body, `<tr id="job-`); n != 5 {
		t.Errorf("jobs list: %d rows, want 5", n)
	}
	wantContains(t, r.body, "waiting", "waiting time")
	wantContains(t, r.body, "data-elapsed-since", "live timer")
	wantContains(t, r.body, "mia", "creator")
	r = e.get(t, f.opA, "/admin/jobs?state=succeeded")
	if n := strings.Count(r.body, `<tr id="job-`); n != 0 {
		t.Errorf("state=succeeded: %d rows", n)
	}
	// Going to a job or prompt id.
	r = e.get(t, f.opA, "/admin/jobs?q="+f.promptIDA)
	if r.status != http.StatusSeeOther || r.location != "/admin/jobs/"+f.jobIDA {
		t.Errorf("q=prompt id: %d %q", r.status, r.location)
	}
	r = e.get(t, f.opA, "/admin/jobs?q="+f.jobIDB)
	wantStatus(t, r, http.StatusOK, "q=other org's job")
	wantContains(t, r.body, "no job or prompt you can see has this id", "other org's job")

	// Detail, cancel, retry.
	r = e.get(t, f.opA, "/admin/jobs/"+ids[0])
	for _, want := range []string{`data-state="queued"`, "Supersede chain", `aria-current="true"`, "olga"} {
		wantContains(t, r.body, want, "job page")
	}
	r = e.post(t, f.opA, "/admin/jobs/"+ids[0]+"/cancel", nil, true)
	wantStatus(t, r, http.StatusSeeOther, "cancel job")
	wantContains(t, e.get(t, f.opA, r.location).body, "Cancelled the job.", "cancel notice")
	r = e.post(t, f.opA, "/admin/jobs/"+ids[0]+"/cancel", nil, true)
	wantContains(t, r.location, "notice=job-finished", "cancel a cancelled job")
	r = e.post(t, f.opA, "/admin/jobs/"+ids[1]+"/retry", nil, true)
	wantContains(t, r.location, "notice=retry-conflict", "retry a queued job")
	r = e.post(t, f.opA, "/admin/jobs/"+ids[0]+"/retry", nil, true)
	wantStatus(t, r, http.StatusSeeOther, "retry")
	newJob := strings.TrimPrefix(strings.Split(r.location, "?")[0], "/admin/jobs/")
	r = e.get(t, f.opA, r.location)
	wantContains(t, r.body, "this new job supersedes the old one", "retry notice")
	wantContains(t, r.body, ids[0], "chain shows the superseded job")
	if st := e.jobState(t, ids[0]); st != "superseded" {
		t.Errorf("retried job is %s", st)
	}

	// Bulk cancel: the confirmation states the count (queued jobs of org A only).
	r = e.get(t, f.opA, "/admin/jobs/bulk?action=cancel&state=queued")
	wantStatus(t, r, http.StatusOK, "bulk confirm")
	wantContains(t, r.body, `<span data-bulk-count>5</span>`, "bulk count") // ids[1..3], job A, the retry
	wantContains(t, r.body, `name="csrf_token"`, "bulk form CSRF")
	r = e.post(t, f.opA, "/admin/jobs/bulk", url.Values{"action": {"cancel"}, "state": {"queued"}, "expected": {"5"}}, true)
	wantStatus(t, r, http.StatusSeeOther, "bulk cancel")
	r = e.get(t, f.opA, r.location)
	wantContains(t, r.body, "5 jobs cancelled.", "bulk notice")
	for _, id := range append(ids[1:], f.jobIDA, newJob) {
		if st := e.jobState(t, id); st != "cancelled" {
			t.Errorf("job %s is %s after bulk cancel", id, st)
		}
	}
	if st := e.jobState(t, f.jobIDB); st != "queued" {
		t.Errorf("org B's job is %s after org A's bulk cancel", st)
	}
	// Bulk retry of the cancelled ones; nothing left to cancel.
	r = e.get(t, f.opA, "/admin/jobs/bulk?action=cancel")
	wantContains(t, r.body, "Nothing to cancel", "empty bulk")
	r = e.get(t, f.opA, "/admin/jobs/bulk?action=retry&state=cancelled")
	wantContains(t, r.body, `<span data-bulk-count>5</span>`, "bulk retry count")
	r = e.post(t, f.opA, "/admin/jobs/bulk", url.Values{"action": {"retry"}, "state": {"cancelled"}, "expected": {"5"}}, true)
	wantContains(t, e.get(t, f.opA, r.location).body, "5 jobs retried.", "bulk retry notice")
	wantStatus(t, e.get(t, f.opA, "/admin/jobs/bulk?action=explode"), http.StatusBadRequest, "unknown bulk action")
}
