package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"asterion/jobs"
)

// TestDashboardJobsScheduled: the jobs list's "scheduled" filter lists the queued jobs still
// waiting for their scheduled_for, of the operator's org only, with the time on the row and on
// the job page; a job scheduled a moment ago, one not scheduled, or one cancelled while it
// waited is not listed. The bulk selection follows the same filter.
func TestDashboardJobsScheduled(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	schedule := func(u *dashUser, text string, in time.Duration) jobs.Submitted {
		t.Helper()
		at := time.Now().Add(in)
		sub, err := e.Jobs.Submit(context.Background(), jobs.SubmitRequest{Viewer: u.viewer, Prompt: text, ScheduledFor: &at})
		if err != nil {
			t.Fatal(err)
		}
		return sub
	}
	later := schedule(f.member, "later", time.Hour)
	tomorrow := schedule(f.opA, "tomorrow", 24*time.Hour)
	cancelled := schedule(f.opA, "not at all", time.Hour)
	if _, err := e.Jobs.Cancel(context.Background(), f.opA.viewer, cancelled.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	passed := schedule(f.opA, "a moment ago", time.Hour)
	e.exec(t, "UPDATE sa_job SET scheduled_for = now() - interval '1 minute' WHERE id = ?", passed.JobID)
	other := schedule(f.opB, "globex later", time.Hour)

	r := e.get(t, f.opA, "/admin/jobs?state=scheduled")
	wantStatus(t, r, 200, "scheduled filter")
	rows := strings.Count(r.body, `<tr id="job-`)
	if rows != 2 || !strings.Contains(r.body, later.JobID.String()) || !strings.Contains(r.body, tomorrow.JobID.String()) {
		t.Errorf("scheduled filter: %d rows, want the two of org A still ahead", rows)
	}
	for _, not := range []jobs.Submitted{cancelled, passed, other, f.subA} {
		if strings.Contains(r.body, `id="job-`+not.JobID.String()) {
			t.Errorf("scheduled filter lists job %s", not.JobID)
		}
	}
	if n := strings.Count(r.body, "data-scheduled-for"); n != 2 {
		t.Errorf("%d rows show their scheduled time, want 2", n)
	}
	wantContains(t, r.body, `<option value="scheduled" selected>`, "the filter keeps its value")
	// An admin sees every org's scheduled jobs.
	r = e.get(t, f.adm, "/admin/jobs?state=scheduled")
	if n := strings.Count(r.body, `<tr id="job-`); n != 3 || !strings.Contains(r.body, other.JobID.String()) {
		t.Errorf("admin scheduled filter: %d rows", n)
	}
	// The job page shows the time it is scheduled for; a job not scheduled shows none.
	wantContains(t, e.get(t, f.opA, "/admin/jobs/"+later.JobID.String()).body, "data-scheduled-for", "scheduled job page")
	if body := e.get(t, f.opA, "/admin/jobs/"+f.jobIDA).body; strings.Contains(body, "data-scheduled-for") {
		t.Error("a job not scheduled shows a scheduled time")
	}
	r = e.get(t, f.opA, "/admin/jobs/bulk?action=cancel&state=scheduled")
	wantContains(t, r.body, `<span data-bulk-count>2</span>`, "bulk cancel of the scheduled jobs")
}
