package jobs

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/intake"
)

// TestWorkerStartsNoJobWhileASubmitIsInFlight: a worker that has been handed a job by River
// does not claim it while a submit of its process is in flight, and claims and runs it once
// the submit ends; with a short maxWait it runs it anyway.
func TestWorkerStartsNoJobWhileASubmitIsInFlight(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		maxWait time.Duration
		release bool
	}{
		{"released when the submit ends", time.Hour, true},
		{"never starved by a submit that does not end", 300 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, d, jobID := serviceWithOneJob(t, "intake", intake.Config{Yield: tc.maxWait})
			in := s.intake.(*intake.Intake)
			inFlight := in.Enter()
			parked := func() bool { return in.Parked() > 0 }
			runOneWorker(t, s, d, jobID, tc.release, parked, inFlight, "while a submit was in flight")
		})
	}
}

// TestWorkerClaimWaitsForTheLaneWhileSubmitsFlow: right after a submit, a worker's claim waits
// for the lane that another transaction holds, and runs once it is free; once submits have
// stopped for maxWait, a full lane holds nobody back.
func TestWorkerClaimWaitsForTheLaneWhileSubmitsFlow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		maxWait time.Duration
		narrow  bool
	}{
		{"narrowed right after a submit", time.Hour, true},
		{"full width once submits stopped", 50 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// The intake's clock runs ahead by skew: moving it crosses the window after the
			// submit without waiting for it.
			var skew atomic.Int64
			clock := func() time.Time { return time.Now().Add(time.Duration(skew.Load())) }
			s, d, jobID := serviceWithOneJob(t, "lane", intake.Config{Yield: tc.maxWait, LaneWidth: 1, Now: clock})
			lane := s.intake.(*intake.Intake).Lane()
			hold := lane.Enter(context.Background(), intake.Finish)
			if !tc.narrow {
				skew.Store(int64(2 * tc.maxWait))
			}
			waiting := func() bool { return lane.Waiting() > 0 }
			runOneWorker(t, s, d, jobID, tc.narrow, waiting, hold, "while the lane was held")
		})
	}
}

// serviceWithOneJob is a service with an intake of cfg, with one prompt submitted through it
// (so the intake has just seen a submit end) and no worker yet.
func serviceWithOneJob(t *testing.T, name string, cfg intake.Config) (*Service, *dbtest.DB, uuid.UUID) {
	t.Helper()
	s, d, org, user := newInternalService(t, name)
	in, err := intake.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s.intake = in
	sub, err := s.Submit(context.Background(), SubmitRequest{Viewer: Viewer{OrgID: org, UserID: user}, Prompt: "wait for the " + name})
	if err != nil {
		t.Fatal(err)
	}
	return s, d, sub.JobID
}

// runOneWorker starts a one-worker runtime on s. When heldBack, it waits for the signal that
// the worker is held (held reports it), checks that the job is still queued then (why names
// what holds it), and calls release; otherwise it releases at the end. Either way the job must
// then succeed.
func runOneWorker(t *testing.T, s *Service, d *dbtest.DB, jobID uuid.UUID, heldBack bool, held func() bool, release func(), why string) {
	t.Helper()
	ctx := context.Background()
	rt, err := NewRuntime(s, RuntimeConfig{Pool: d.Pool, Workers: 1, PriorityCeiling: -1, ReclaimEvery: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Stop(context.Background(), 5*time.Second) })
	state := func() string {
		var job db.Job
		if err := d.Bun.NewSelect().Model(&job).Column("state").Where("id = ?", jobID).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		return job.State
	}
	if heldBack {
		dbtest.WaitFor(t, 15*time.Second, "River to hand the job to the worker", func() bool {
			var n int
			_ = d.Bun.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = 'running'").Scan(&n)
			return n == 1
		})
		dbtest.WaitFor(t, 15*time.Second, "the worker to be held "+why, held)
		if got := state(); got != string(StateQueued) {
			t.Fatalf("job %s %s; want it still queued", got, why)
		}
		release()
	} else {
		defer release()
	}
	dbtest.WaitFor(t, 15*time.Second, "the job to succeed", func() bool { return state() == string(StateSucceeded) })
}
