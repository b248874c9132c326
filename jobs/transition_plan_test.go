package jobs_test

import (
	"context"
	"testing"

	"github.com/uptrace/bun"

	"asterion/db/dbtest"
	"asterion/jobs"
	"asterion/jobs/jobstest"
)

// TestTransitionsFindTheirJobByKey: a claim and a success read their one job row, however
// many jobs are queued or running and whatever the planner's statistics say of them. The
// statistics are taken with no job queued or running, as after a drained queue (before the
// job itself is submitted), and then 3000 jobs are put in the state the transition moves from: a condition on the state that the
// planner can match to a partial index of that state would walk all 3000.
func TestTransitionsFindTheirJobByKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, jobstest.InstantSim())
	dbtest.SeedFinishedJobs(t, e.D.Bun, e.O, e.U, 3000)
	job := e.Job(e.Submit("the job").JobID)
	if job.RiverJobID == nil {
		t.Fatal("the submitted job has no vehicle")
	}
	// run runs query in tx and says how many rows of sa_job it read and how many it answered.
	run := func(tx bun.Tx, query string, args []any) (reads, rows int64) {
		t.Helper()
		before := dbtest.RowsRead(t, tx, "sa_job")
		r, err := tx.QueryContext(ctx, query, args...)
		if err != nil {
			t.Fatal(err)
		}
		for r.Next() {
			rows++
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
		return dbtest.RowsRead(t, tx, "sa_job") - before, rows
	}
	const claim = "plan-test/1"
	for _, backlog := range []jobs.State{jobs.StateQueued, jobs.StateRunning} {
		t.Run("beside 3000 "+string(backlog), func(t *testing.T) {
			tx, err := e.D.Bun.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			if _, err := tx.ExecContext(ctx, "UPDATE sa_job SET state = ?, finished_at = NULL WHERE id <> ?", string(backlog), job.ID); err != nil {
				t.Fatal(err)
			}
			q, args := jobs.ClaimStatement(job.ID, *job.RiverJobID, claim)
			reads, rows := run(tx, q, args)
			if rows != 1 {
				t.Fatalf("the claim moved %d jobs, want 1", rows)
			}
			if backlog == jobs.StateQueued && reads > 10 {
				t.Errorf("the claim read %d rows of sa_job beside 3000 queued jobs; want its job's own", reads)
			}
			q, args = jobs.SuccessStatement(job.ID, claim)
			reads, rows = run(tx, q, args)
			if rows != 1 {
				t.Fatalf("the success moved %d jobs, want 1", rows)
			}
			if backlog == jobs.StateRunning && reads > 10 {
				t.Errorf("the success read %d rows of sa_job beside 3000 running jobs; want its job's own", reads)
			}
		})
	}
}
