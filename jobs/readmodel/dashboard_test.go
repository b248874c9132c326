package readmodel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/readmodel"
)

func TestDashboardRowsNamesAndCountsAreScoped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	a := e.Submit("mine")
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "operator")
	other := jobs.Viewer{OrgID: otherOrg, UserID: otherUser, OrgWide: true}
	b, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: other, Prompt: "theirs"})
	if err != nil {
		t.Fatal(err)
	}
	ops, err := e.R.OperationRows(ctx, e.Op, []uuid.UUID{a.Operation.OperationID, b.Operation.OperationID})
	if err != nil || len(ops) != 1 || ops[a.Operation.OperationID].ID != a.Operation.OperationID {
		t.Fatalf("operator's OperationRows = %v, %v; want only its org's", ops, err)
	}
	all, err := e.R.OperationRows(ctx, jobs.Viewer{AllOrgs: true}, []uuid.UUID{a.Operation.OperationID, b.Operation.OperationID})
	if err != nil || len(all) != 2 {
		t.Fatalf("admin's OperationRows = %d, %v", len(all), err)
	}
	js, err := e.R.JobRows(ctx, e.Op, []uuid.UUID{a.JobID, b.JobID})
	if err != nil || len(js) != 1 {
		t.Fatalf("operator's JobRows = %d, %v", len(js), err)
	}
	orgs, users, err := e.R.DisplayNames(ctx, []int64{e.O, otherOrg, 999999}, []int64{e.U})
	if err != nil || orgs[e.O] == "" || orgs[otherOrg] == "" || users[e.U] == "" || len(orgs) != 2 {
		t.Fatalf("DisplayNames = %v %v %v", orgs, users, err)
	}
	counts, err := e.R.JobCounts(ctx, e.Op, 0)
	if err != nil || counts["queued"] != 1 || counts["succeeded"] != 0 {
		t.Fatalf("operator JobCounts = %v, %v", counts, err)
	}
	counts, err = e.R.JobCounts(ctx, jobs.Viewer{AllOrgs: true}, 0)
	if err != nil || counts["queued"] != 2 {
		t.Fatalf("admin JobCounts = %v, %v", counts, err)
	}
	counts, err = e.R.JobCounts(ctx, jobs.Viewer{AllOrgs: true}, otherOrg)
	if err != nil || counts["queued"] != 1 {
		t.Fatalf("admin JobCounts of one org = %v, %v", counts, err)
	}
	oc, err := e.R.OrgOperationCounts(ctx, e.Op, otherOrg)
	if err != nil || oc["pending"] != 0 {
		t.Fatalf("operator asking another org's operation counts = %v, %v", oc, err)
	}
	oc, err = e.R.OrgOperationCounts(ctx, jobs.Viewer{AllOrgs: true}, otherOrg)
	if err != nil || oc["pending"] != 1 {
		t.Fatalf("admin operation counts of one org = %v, %v", oc, err)
	}
	if k := e.R.OperationKinds(); !contains(k, jobs.KindPromptExecute) {
		t.Fatalf("OperationKinds = %v", k)
	}
	dir, err := e.R.OrgDirectory(ctx)
	if err != nil || len(dir) < 2 {
		t.Fatalf("OrgDirectory = %v, %v", dir, err)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func TestDashboardFindJobAndBulkSelect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	subs := []jobs.Submitted{e.Submit("one"), e.Submit("two"), e.Submit("three")}
	j, err := e.R.FindJob(ctx, e.Op, subs[1].PromptID)
	if err != nil || j.ID != subs[1].JobID {
		t.Fatalf("FindJob(prompt) = %v, %v", j.ID, err)
	}
	j, err = e.R.FindJob(ctx, e.Op, subs[2].JobID)
	if err != nil || j.ID != subs[2].JobID {
		t.Fatalf("FindJob(job) = %v, %v", j.ID, err)
	}
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "operator")
	other := jobs.Viewer{OrgID: otherOrg, UserID: otherUser, OrgWide: true}
	if _, err := e.R.FindJob(ctx, other, subs[0].JobID); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("FindJob from another org = %v, want ErrNotFound", err)
	}
	if _, err := e.S.Cancel(ctx, e.Op, subs[0].JobID, jobs.Actor{Name: "t"}); err != nil {
		t.Fatal(err)
	}
	queued, err := e.R.BulkSelect(ctx, e.Op, readmodel.JobFilter{}, []jobs.State{jobs.StateQueued, jobs.StateRunning}, 10)
	if err != nil || len(queued) != 2 || queued[0] != subs[2].JobID {
		t.Fatalf("BulkSelect(queued) = %v, %v; want the two queued jobs, newest first", queued, err)
	}
	capped, err := e.R.BulkSelect(ctx, e.Op, readmodel.JobFilter{}, []jobs.State{jobs.StateQueued}, 1)
	if err != nil || len(capped) != 1 {
		t.Fatalf("BulkSelect capped = %v, %v", capped, err)
	}
	none, err := e.R.BulkSelect(ctx, e.Op, readmodel.JobFilter{State: jobs.StateQueued}, []jobs.State{jobs.StateCancelled}, 10)
	if err != nil || len(none) != 0 {
		t.Fatalf("BulkSelect with a state filter outside the action's states = %v, %v", none, err)
	}
	theirs, err := e.R.BulkSelect(ctx, other, readmodel.JobFilter{}, []jobs.State{jobs.StateQueued}, 10)
	if err != nil || len(theirs) != 0 {
		t.Fatalf("another org's BulkSelect = %v, %v", theirs, err)
	}
	future := time.Now().Add(time.Hour)
	if ids, _ := e.R.BulkSelect(ctx, e.Op, readmodel.JobFilter{Since: &future}, []jobs.State{jobs.StateQueued}, 10); len(ids) != 0 {
		t.Fatalf("BulkSelect since the future = %v", ids)
	}
}

func TestDashboardQueueBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	a, b, c := e.Submit("a"), e.Submit("b"), e.Submit("c")
	if _, err := e.D.Bun.ExecContext(ctx, "UPDATE sa_job SET scheduled_at = now() - interval '5 minutes' WHERE id = ?", a.JobID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.D.Bun.ExecContext(ctx, "UPDATE sa_job SET scheduled_at = now() + interval '5 minutes' WHERE id = ?", c.JobID); err != nil {
		t.Fatal(err)
	}
	_ = b
	bl, err := e.R.QueueBacklog(ctx, e.Op, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if bl.Due != 2 || bl.PastDue != 1 || bl.OldestDue == nil || time.Since(*bl.OldestDue) < 4*time.Minute {
		t.Fatalf("backlog = %+v, want 2 due, 1 past due since 5 min", bl)
	}
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "operator")
	bl, err = e.R.QueueBacklog(ctx, jobs.Viewer{OrgID: otherOrg, UserID: otherUser, OrgWide: true}, time.Minute)
	if err != nil || bl.Due != 0 || bl.PastDue != 0 || bl.OldestDue != nil {
		t.Fatalf("another org's backlog = %+v, %v", bl, err)
	}
}

func TestDashboardSeriesAndLiveness(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	l, err := e.R.WorkerLiveness(ctx)
	if err != nil || l.Alive || l.LastSeen != nil {
		t.Fatalf("liveness without any worker = %+v, %v", l, err)
	}
	asked := time.Now()
	pts, err := e.R.QueueSeries(ctx, e.Op, time.Hour, time.Minute)
	if err != nil || len(pts) != 60 {
		t.Fatalf("series = %d points, %v", len(pts), err)
	}
	for i := 1; i < len(pts); i++ {
		if pts[i].At.Sub(pts[i-1].At) != time.Minute {
			t.Fatalf("points %d and %d are %v apart", i-1, i, pts[i].At.Sub(pts[i-1].At))
		}
	}
	// The current minute is the one the query ran in, which lies between asked and now.
	if last := pts[len(pts)-1].At; last.Before(asked.Truncate(time.Minute)) || last.After(time.Now()) {
		t.Fatalf("last bucket starts at %v, not in the minute of the query (%v)", last, asked)
	}
	subs := []jobs.Submitted{e.Submit("x"), e.Submit("y #sim:fail=provider_4xx"), e.Submit("z")}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	for _, s := range subs {
		jobstest.WaitFor(t, 15*time.Second, "job to finish", func() bool {
			st := e.Job(s.JobID).State
			return st == "succeeded" || st == "failed"
		})
	}
	jobstest.WaitFor(t, 15*time.Second, "a live worker", func() bool {
		l, err = e.R.WorkerLiveness(ctx)
		return err == nil && l.Alive
	})
	if l.LastSeen == nil || l.Source == "" {
		t.Fatalf("alive without a sign of life: %+v", l)
	}
	pts, err = e.R.QueueSeries(ctx, e.Op, time.Hour, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var finished, failed int64
	for _, p := range pts {
		finished += p.Finished
		failed += p.Failed
		if p.Finished > 0 && (p.RunP95 < p.RunP50 || p.WaitP95 < p.WaitP50 || p.WaitP50 < 0) {
			t.Errorf("point %+v: percentiles out of order", p)
		}
	}
	if finished != 3 || failed != 1 {
		t.Fatalf("series counts %d finished, %d failed; want 3 and 1", finished, failed)
	}
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "operator")
	pts, _ = e.R.QueueSeries(ctx, jobs.Viewer{OrgID: otherOrg, UserID: otherUser, OrgWide: true}, time.Hour, time.Minute)
	for _, p := range pts {
		if p.Finished != 0 {
			t.Fatalf("another org's series shows %d finished", p.Finished)
		}
	}
}
