package fairshare_test

import (
	"context"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/jobstest"
)

// TestOrgRunningCap: with ASTERION_ORG_MAX_RUNNING=3 and ten workers, org A never runs more than
// three jobs at once, and org B's prompts submitted behind A's backlog all finish while A still
// has queued work.
func TestOrgRunningCap(t *testing.T) {
	t.Parallel()
	fake := newFake(func(int) time.Duration { return 300 * time.Millisecond })
	e := newEnv(t, fake, func(c *jobs.Config) { c.OrgMaxRunning = 3 })
	vb := e.otherOrg()
	var a []jobs.Submitted
	for i := 0; i < 60; i++ {
		a = append(a, e.Submit("org A's backlog"))
	}
	var b []jobs.Submitted
	for i := 0; i < 5; i++ {
		b = append(b, jobstest.Submit(t, e.S, vb, "org B's prompt"))
	}
	most := sampleMostRunning(t, e, e.O)
	waitingShare := sampleMost(t, e, "SELECT count(*) FROM sa_job WHERE org_id = ? AND waiting_for = ?", e.O, jobs.WaitingOrgShare)
	start := time.Now()
	jobstest.StartRuntime(t, e.D.Pool, e.S, 10)
	for _, s := range b {
		jobstest.WaitFor(t, 20*time.Second, "org B's prompts", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	tookB := time.Since(start)
	if countJobs(e, e.O, jobs.StateQueued) == 0 {
		t.Errorf("org A had no queued work left when B's prompts were done (%v): nothing was held behind", tookB)
	}
	for _, s := range a {
		jobstest.WaitFor(t, 30*time.Second, "org A's backlog", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	var span float64
	if err := e.D.Bun.QueryRowContext(context.Background(), `SELECT extract(epoch FROM max(finished_at) - min(started_at))
FROM sa_job WHERE org_id = ?`, e.O).Scan(&span); err != nil {
		t.Fatal(err)
	}
	t.Logf("org A's %d jobs of 300 ms ran from the first start to the last finish in %.1f s at cap 3", len(a), span)
	if m := most.Load(); m > 3 || m < 1 {
		t.Errorf("org A ran %d jobs at once, its cap is 3", m)
	}
	if waitingShare.Load() == 0 {
		t.Errorf("no job of org A said it waited for its org's share")
	}
}
