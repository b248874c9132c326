package jobs_test

import (
	"context"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/maintenance"
	"asterion/jobs/provider"
)

// TestReclaimRevehiclesJobOnFinishedVehicle: a job still queued on a vehicle River has finished
// (what a claim undone by a database crash leaves once its worker ended the vehicle) is moved to
// a new vehicle by the reclaim pass, keeping its attempt, and then runs once; a second pass finds
// nothing.
func TestReclaimRevehiclesJobOnFinishedVehicle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	for _, finished := range []string{"completed", "cancelled", "discarded"} {
		t.Run(finished, func(t *testing.T) {
			sub := e.Submit("stranded on a " + finished + " vehicle")
			old := *e.Job(sub.JobID).RiverJobID
			if _, err := e.D.Bun.ExecContext(ctx, `UPDATE river_job SET state = ?, attempt = 1, attempted_at = now(),
				finalized_at = now() WHERE id = ?`, finished, old); err != nil {
				t.Fatal(err)
			}
			rep, err := e.S.ReclaimStuck(ctx)
			if err != nil || rep != (maintenance.ReclaimReport{Stranded: 1}) {
				t.Fatalf("reclaim %+v, %v, want one stranded job moved", rep, err)
			}
			j := e.Job(sub.JobID)
			if j.State != "queued" || j.Attempt != 1 || *j.RiverJobID == old {
				t.Fatalf("after the reclaim: state %s attempt %d vehicle %d (was %d)", j.State, j.Attempt, *j.RiverJobID, old)
			}
			if st := e.RiverState(*j.RiverJobID); st != "available" {
				t.Errorf("new vehicle is %s", st)
			}
			if again, err := e.S.ReclaimStuck(ctx); err != nil || again != (maintenance.ReclaimReport{}) {
				t.Fatalf("second reclaim %+v, %v", again, err)
			}
		})
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	jobstest.WaitFor(t, 20*time.Second, "every moved job to succeed", func() bool {
		return e.Count("SELECT count(*) FROM sa_job WHERE state <> 'succeeded'") == 0
	})
	if n := e.Count("SELECT count(*) FROM sa_ledger"); n != 3 {
		t.Errorf("%d ledger rows, want 3", n)
	}
}

// TestLostClaimRunsAgainOnItsVehicle: a claim a database crash undid leaves the job queued on
// the vehicle its worker still holds. The worker's heartbeat finds the claim gone and cuts the
// call; finding the job still queued on its own vehicle, it gives the vehicle back instead of
// ending it, so the job runs again at once, without any reclaim pass, and succeeds once.
func TestLostClaimRunsAgainOnItsVehicle(t *testing.T) {
	t.Parallel()
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		if c.n == 1 {
			<-ctx.Done()
			return provider.Response{}, ctx.Err()
		}
		return okResponse(c), nil
	})
	e := newEnv(t, fake)
	ctx := context.Background()
	jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	sub := e.Submit("its claim is lost")
	fake.waitCall(t, 10*time.Second)
	vehicle := *e.Job(sub.JobID).RiverJobID
	// The row as it was before the claim: what a crash that lost the claim's commit leaves.
	if _, err := e.D.Bun.ExecContext(ctx, `UPDATE sa_job SET state = 'queued', worker_claim = NULL, claimed_at = NULL,
		started_at = NULL, running_heartbeat_at = NULL WHERE id = ?`, sub.JobID); err != nil {
		t.Fatal(err)
	}
	j := e.WaitState(sub.JobID, jobs.StateSucceeded, 20*time.Second)
	if *j.RiverJobID != vehicle || j.Attempt != 1 {
		t.Errorf("succeeded on vehicle %d attempt %d, want its own vehicle %d and attempt 1", *j.RiverJobID, j.Attempt, vehicle)
	}
	if n := e.Count("SELECT count(*) FROM sa_ledger WHERE job_id = ?", sub.JobID); n != 1 {
		t.Errorf("%d ledger rows, want 1", n)
	}
	if n := len(fake.Calls()); n != 2 {
		t.Errorf("%d provider calls, want 2 (the cut one and the run again)", n)
	}
}
