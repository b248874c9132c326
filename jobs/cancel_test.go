package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// TestCancelQueuedNeverRuns: a queued job cancelled before any worker runs ends cancelled with
// its River job cancelled, and a worker started afterwards never calls the provider for it.
func TestCancelQueuedNeverRuns(t *testing.T) {
	t.Parallel()
	fake := newFake(nil)
	e := newEnv(t, fake)
	ctx := context.Background()
	rt := jobstest.NewRuntime(t, e.D.Pool, e.S, 1)
	doomed := e.Submit("cancel me")
	after := e.Submit("run me")
	actor := jobs.Actor{UserID: &e.U, Name: "member"}

	j, err := e.S.Cancel(ctx, e.V, doomed.JobID, actor)
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if j.State != "cancelled" || j.FinishedAt == nil || j.ErrorKind != nil {
		t.Fatalf("cancelled job %+v", j)
	}
	if st := e.RiverState(*j.RiverJobID); st != "cancelled" {
		t.Fatalf("river job of a cancelled queued job is %s, want cancelled", st)
	}
	if op := e.Operation(*j.OperationID); op.Status != "cancelled" || op.TerminalAt == nil {
		t.Fatalf("operation %s", op.Status)
	}
	if n := e.Count("SELECT count(*) FROM sa_audit WHERE action = 'job.cancelled' AND subject_id = ? AND actor_id = ?", doomed.JobID.String(), e.U); n != 1 {
		t.Fatalf("%d cancel audit rows", n)
	}
	// Cancelling again is a conflict: the job is terminal.
	if _, err := e.S.Cancel(ctx, e.V, doomed.JobID, actor); !errors.Is(err, jobs.ErrConflict) {
		t.Fatalf("second cancel: %v, want ErrConflict", err)
	}

	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.WaitState(after.JobID, jobs.StateSucceeded, 20*time.Second)
	// The workers ran a job submitted after the doomed one, and River holds the doomed one's
	// vehicle cancelled, so it never runs: the provider can no longer be called for it.
	if st := e.RiverState(*e.Job(doomed.JobID).RiverJobID); st != "cancelled" {
		t.Fatalf("the cancelled job's River job is %s, want cancelled", st)
	}
	if n := fake.callsFor(doomed.JobID); n != 0 {
		t.Fatalf("provider called %d times for a cancelled job", n)
	}
	if j := e.Job(doomed.JobID); j.State != "cancelled" || j.WorkerClaim != nil || j.StartedAt != nil {
		t.Fatalf("cancelled job changed: %+v", j)
	}
	if n := e.Count("SELECT count(*) FROM sa_entity WHERE kind = 'response' AND parent_id = ?", doomed.PromptID); n != 0 {
		t.Fatalf("%d responses for a cancelled job", n)
	}
}

// TestCancelRunningFromAnotherProcess: a running job cancelled through a different Service
// instance has its provider call abandoned within seconds (River's job cancellation reaches
// the worker; its own heartbeat is too slow to notice), ends cancelled and writes nothing.
func TestCancelRunningFromAnotherProcess(t *testing.T) {
	t.Parallel()
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		<-ctx.Done()
		return provider.Response{}, ctx.Err()
	})
	e := newEnv(t, fake, func(c *jobs.Config) { c.HeartbeatInterval = time.Hour })
	ctx := context.Background()
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	s := e.Submit("long running #sim:hang")
	c := fake.waitCall(t, 10*time.Second)
	e.WaitState(s.JobID, jobs.StateRunning, 5*time.Second)

	other := e.service(jobstest.InstantSim())
	start := time.Now()
	j, err := other.Cancel(ctx, e.Op, s.JobID, jobs.Actor{Name: "operator"})
	if err != nil {
		t.Fatalf("Cancel: %v", err)
	}
	if j.State != "cancelled" {
		t.Fatalf("cancel returned %+v", j)
	}
	select {
	case <-c.ctx.Done():
		t.Logf("provider context cancelled %s after the cancel", time.Since(start))
	case <-time.After(5 * time.Second):
		t.Fatal("the provider's context was not cancelled within 5 s")
	}
	rid := *j.RiverJobID
	jobstest.WaitFor(t, 10*time.Second, "river job cancelled", func() bool { return e.RiverState(rid) == "cancelled" })
	j = e.Job(s.JobID)
	if j.State != "cancelled" || j.ResponseID != nil || j.Attempt != 1 {
		t.Fatalf("after the worker gave up: %+v", j)
	}
	if n := e.Count("SELECT count(*) FROM sa_entity WHERE kind = 'response'"); n != 0 {
		t.Fatalf("%d responses", n)
	}
	if got := eventStates(e.jobEvents(s.JobID)); got != "queued/1 running/1 cancelled/1" {
		t.Fatalf("state changes %q", got)
	}
	if op := e.Operation(*j.OperationID); op.Status != "cancelled" {
		t.Fatalf("operation %s", op.Status)
	}
	if len(fake.Calls()) != 1 {
		t.Fatalf("provider called %d times, want 1", len(fake.Calls()))
	}
}

// TestCancelVisibility: a terminal job answers ErrConflict; another org, another member and a
// missing id answer ErrNotFound and change nothing; an operator of the org may cancel.
func TestCancelVisibility(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	rt := jobstest.NewRuntime(t, e.D.Pool, e.S, 1)
	done := e.Submit("finish first")
	queued := e.Submit("stay queued", func(r *jobs.SubmitRequest) { r.Priority = intp(100) })

	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "operator")
	sameOrgMember := jobstest.CreateUser(t, e.D.Bun, e.O, "member")
	for name, v := range map[string]jobs.Viewer{
		"another org's operator": {OrgID: otherOrg, UserID: otherUser, OrgWide: true},
		"another member":         {OrgID: e.O, UserID: sameOrgMember},
	} {
		if _, err := e.S.Cancel(ctx, v, queued.JobID, jobs.Actor{Name: name}); !errors.Is(err, jobs.ErrNotFound) {
			t.Errorf("%s: %v, want ErrNotFound", name, err)
		}
	}
	if _, err := e.S.Cancel(ctx, e.V, uuid.New(), jobs.Actor{Name: "x"}); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("missing id: %v, want ErrNotFound", err)
	}
	if j := e.Job(queued.JobID); j.State != "queued" {
		t.Fatalf("a refused cancel changed the job: %s", j.State)
	}
	if _, err := e.R.GetJob(ctx, jobs.Viewer{OrgID: otherOrg, UserID: otherUser, OrgWide: true}, queued.JobID); !errors.Is(err, jobs.ErrNotFound) {
		t.Errorf("GetJob from another org: %v, want ErrNotFound", err)
	}

	// Cancel the low-priority one as the operator before the worker starts, then let the
	// other finish and try to cancel it.
	if _, err := e.S.Cancel(ctx, e.Op, queued.JobID, jobs.Actor{Name: "operator"}); err != nil {
		t.Fatalf("operator cancel: %v", err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e.WaitState(done.JobID, jobs.StateSucceeded, 20*time.Second)
	for _, id := range []uuid.UUID{done.JobID, queued.JobID} {
		before := e.Job(id)
		if _, err := e.S.Cancel(ctx, e.V, id, jobs.Actor{Name: "member"}); !errors.Is(err, jobs.ErrConflict) {
			t.Errorf("cancel of %s job: %v, want ErrConflict", before.State, err)
		}
		if after := e.Job(id); after.State != before.State || !after.UpdatedAt.Equal(before.UpdatedAt) {
			t.Errorf("a refused cancel changed the job: %+v", after)
		}
	}
}
