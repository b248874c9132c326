package jobs_test

import (
	"context"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/usage"
)

// TestGracefulStopHandsBackCutRun: a worker pool stopped while a call streams, with a grace
// shorter than the call, cuts it and hands the job back: queued on a new vehicle any process may
// take, its cut run listed among its attempts with error_kind shutdown and its usage, its output
// so far kept under that attempt, and no attempt spent (a max_attempts of 1 still has its one).
// Another pool then runs it to success, and its attempts show the cut run and the one that
// answered.
func TestGracefulStopHandsBackCutRun(t *testing.T) {
	t.Parallel()
	var m *usage.Meter
	e := newEnv(t, jobstest.InstantSim(), withOutput(t), withMeter(t, &m))
	ctx := context.Background()
	rtA := jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	sub := e.Submit("long #sim:tokens=200 #sim:latency=20s", func(r *jobs.SubmitRequest) { r.MaxAttempts = intp(1) })
	jobstest.WaitFor(t, 20*time.Second, "the first chunks", func() bool {
		j := e.Job(sub.JobID)
		return j.State == "running" && len(e.output(j)) >= 2
	})
	cut := e.Job(sub.JobID)
	oldVehicle := *cut.RiverJobID
	if err := rtA.Stop(ctx, 50*time.Millisecond); err != nil {
		t.Fatalf("stop: %v", err)
	}
	j := e.Job(sub.JobID)
	if j.State != "queued" || j.ErrorKind == nil || *j.ErrorKind != jobs.KindShutdown || j.WorkerClaim != nil {
		t.Fatalf("job after the stop: state %s error_kind %v claim %v, want queued shutdown", j.State, strv(j.ErrorKind), j.WorkerClaim)
	}
	if j.MaxAttempts-j.Attempt != cut.MaxAttempts-cut.Attempt {
		t.Errorf("attempts left %d after the cut, want %d: a cut run must not spend one", j.MaxAttempts-j.Attempt, cut.MaxAttempts-cut.Attempt)
	}
	if j.RiverJobID == nil || *j.RiverJobID == oldVehicle {
		t.Fatalf("job still on its old vehicle %d", oldVehicle)
	}
	if st := e.RiverState(*j.RiverJobID); st != "available" {
		t.Errorf("new vehicle is %s, want available", st)
	}
	if st := e.RiverState(oldVehicle); st != "cancelled" {
		t.Errorf("old vehicle is %s, want cancelled", st)
	}
	if kept := joined(e.output(cut)); kept == "" {
		t.Error("the cut run's output is gone")
	}
	rows, _, err := m.JobAttempts(ctx, sub.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ErrorKind == nil || *rows[0].ErrorKind != jobs.KindShutdown || rows[0].OutputTokens == 0 {
		t.Fatalf("attempts after the cut: %+v, want one of kind shutdown with its usage", rows)
	}
	if n := e.Count("SELECT count(*) FROM sa_audit WHERE action = 'job.handed_back' AND subject_id = ?", sub.JobID.String()); n != 1 {
		t.Errorf("%d hand-back audit rows, want 1", n)
	}

	// Any other process takes it; the answer is quick this time.
	if _, err := e.D.Bun.ExecContext(ctx, "UPDATE sa_entity SET body = 'short #sim:tokens=5' WHERE id = ?", sub.PromptID); err != nil {
		t.Fatal(err)
	}
	svcB := e.service(jobstest.InstantSim(), withOutput(t), withMeter(t, &m))
	jobstest.StartRuntime(t, e.D.Pool, svcB, 1)
	done := e.WaitState(sub.JobID, jobs.StateSucceeded, 20*time.Second)
	if done.ErrorKind != nil {
		t.Errorf("succeeded job keeps error_kind %s", *done.ErrorKind)
	}
	rows, _, err = m.JobAttempts(ctx, sub.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[1].ErrorKind != nil {
		t.Fatalf("attempts after success: %+v, want the cut run then the answer", rows)
	}
	if n := e.Count("SELECT count(*) FROM sa_ledger WHERE job_id = ?", sub.JobID); n != 1 {
		t.Errorf("%d ledger rows, want 1", n)
	}
}

// TestDrainingPoolClaimsNothing: once a pool drains, a vehicle it fetches goes back unclaimed,
// a call that ends within the grace settles as usual, a user's cancel during the drain is a
// cancel (not a hand-back), and the process is recorded as draining until it has stopped.
func TestDrainingPoolClaimsNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	rt := jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	short := e.Submit("ends within the grace #sim:latency=3s")
	long := e.Submit("cancelled while the pool drains #sim:latency=60s")
	jobstest.WaitFor(t, 20*time.Second, "both jobs to run", func() bool {
		return e.Job(short.JobID).State == "running" && e.Job(long.JobID).State == "running"
	})
	stopped := make(chan error, 1)
	go func() { stopped <- rt.Stop(ctx, 30*time.Second) }()
	jobstest.WaitFor(t, 10*time.Second, "the process to be recorded draining", func() bool {
		return e.Count("SELECT count(*) FROM sa_worker_drain WHERE worker_id = ? AND stopped_at IS NULL", rt.ID()) == 1
	})
	later := e.Submit("submitted while the pool drains")
	if _, err := e.S.Cancel(ctx, e.V, long.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("stop: %v", err)
	}
	if j := e.Job(short.JobID); j.State != "succeeded" {
		t.Errorf("the job that ended within the grace is %s, want succeeded", j.State)
	}
	if j := e.Job(long.JobID); j.State != "cancelled" || j.ErrorKind != nil && *j.ErrorKind == jobs.KindShutdown {
		t.Errorf("the job cancelled during the drain is %s (error_kind %s), want cancelled", j.State, strv(j.ErrorKind))
	}
	if n := e.Count("SELECT count(*) FROM sa_audit WHERE action = 'job.handed_back'"); n != 0 {
		t.Errorf("%d jobs handed back; nothing was cut", n)
	}
	if j := e.Job(later.JobID); j.State != "queued" || j.StartedAt != nil {
		t.Errorf("a job submitted during the drain is %s (started %v), want queued and never started", j.State, j.StartedAt)
	}
	if n := e.Count("SELECT count(*) FROM sa_worker_drain WHERE worker_id = ? AND stopped_at IS NOT NULL", rt.ID()); n != 1 {
		t.Errorf("the stopped process is not recorded as stopped")
	}
}
