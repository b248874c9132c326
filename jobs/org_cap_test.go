package jobs_test

import (
	"context"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/provider"
)

// TestOrgRunningCap: with ASTERION_ORG_MAX_RUNNING=3 and ten workers, org A never runs more than
// three jobs at once, and org B's prompts submitted behind A's backlog all finish while A still
// has queued work.
func TestOrgRunningCap(t *testing.T) {
	t.Parallel()
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
			return provider.Response{}, ctx.Err()
		}
		return okResponse(c), nil
	})
	e := newEnv(t, fake, func(c *jobs.Config) { c.OrgMaxRunning = 3 })
	orgB, userB := createOrgUser(t, e.D.Bun, "member")
	vb := jobs.Viewer{OrgID: orgB, UserID: userB}
	var a []jobs.Submitted
	for i := 0; i < 60; i++ {
		a = append(a, e.Submit("org A's backlog"))
	}
	var b []jobs.Submitted
	for i := 0; i < 5; i++ {
		s, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: vb, Prompt: "org B's prompt"})
		if err != nil {
			t.Fatal(err)
		}
		b = append(b, s)
	}
	most := sampleMostRunning(t, e, e.O)
	start := time.Now()
	startRuntime(t, e, e.S, 10)
	for _, s := range b {
		waitFor(t, 8*time.Second, "org B's prompts", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	tookB := time.Since(start)
	var queuedA int
	if err := e.D.Bun.NewSelect().TableExpr("sa_job").ColumnExpr("count(*)").
		Where("org_id = ? AND state = 'queued'", e.O).Scan(context.Background(), &queuedA); err != nil {
		t.Fatal(err)
	}
	if queuedA == 0 {
		t.Errorf("org A had no queued work left when B's prompts were done (%v): nothing was held behind", tookB)
	}
	var waitingShare int
	_ = e.D.Bun.NewSelect().TableExpr("sa_job").ColumnExpr("count(*)").
		Where("org_id = ? AND waiting_for = ?", e.O, jobs.WaitingOrgShare).Scan(context.Background(), &waitingShare)
	for _, s := range a {
		waitFor(t, 30*time.Second, "org A's backlog", func() bool { return e.Job(s.JobID).State == "succeeded" })
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
	if waitingShare == 0 {
		t.Errorf("no job of org A said it waited for its org's share")
	}
}
