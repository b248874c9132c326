package jobs

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/db/dbtest"
)

// yielded runs in.yield(ctx) in the background and reports on the channel when it returns.
func yielded(ctx context.Context, in *intake) <-chan time.Duration {
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		in.yield(ctx)
		done <- time.Since(start)
	}()
	return done
}

// stillWaiting fails the test if the yield has already returned.
func stillWaiting(t *testing.T, done <-chan time.Duration, why string) {
	t.Helper()
	select {
	case <-done:
		t.Fatalf("yield returned %s", why)
	case <-time.After(50 * time.Millisecond):
	}
}

// returned fails the test unless the yield returns within a few seconds.
func returned(t *testing.T, done <-chan time.Duration, why string) time.Duration {
	t.Helper()
	select {
	case d := <-done:
		return d
	case <-time.After(5 * time.Second):
		t.Fatalf("yield did not return %s", why)
		return 0
	}
}

func TestIntakeYieldWaitsForSubmitsInFlight(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("nothing in flight", func(t *testing.T) {
		t.Parallel()
		returned(t, yielded(ctx, newIntake(time.Hour)), "with no submit in flight")
	})
	t.Run("until the last submit ends", func(t *testing.T) {
		t.Parallel()
		in := newIntake(time.Hour)
		first, second := in.enter(), in.enter()
		done := yielded(ctx, in)
		stillWaiting(t, done, "while two submits were in flight")
		first()
		stillWaiting(t, done, "while one submit was still in flight")
		second()
		returned(t, done, "after the last submit ended")
		// A new submit makes the next worker wait again.
		third := in.enter()
		done = yielded(ctx, in)
		stillWaiting(t, done, "while a later submit was in flight")
		third()
		returned(t, done, "after the later submit ended")
	})
	t.Run("never longer than maxWait", func(t *testing.T) {
		t.Parallel()
		in := newIntake(30 * time.Millisecond)
		defer in.enter()()
		if waited := returned(t, yielded(ctx, in), "after maxWait"); waited < 30*time.Millisecond {
			t.Errorf("yield returned after %s while a submit was in flight; want at least maxWait", waited)
		}
	})
	t.Run("not past its context", func(t *testing.T) {
		t.Parallel()
		in := newIntake(time.Hour)
		defer in.enter()()
		cctx, cancel := context.WithCancel(ctx)
		done := yielded(cctx, in)
		stillWaiting(t, done, "before its context ended")
		cancel()
		returned(t, done, "after its context ended")
	})
	t.Run("zero maxWait never waits", func(t *testing.T) {
		t.Parallel()
		in := newIntake(0)
		defer in.enter()()
		returned(t, yielded(ctx, in), "with maxWait zero")
	})
}

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
			s, d, jobID := serviceWithOneJob(t, "intake", tc.maxWait)
			inFlight := s.intake.enter()
			runOneWorker(t, s, d, jobID, tc.release, inFlight, "while a submit was in flight")
		})
	}
}

// transacted runs in.transaction in the background and delivers its release once admitted.
func transacted(ctx context.Context, in *intake, class laneClass) <-chan func() {
	got := make(chan func(), 1)
	go func() { got <- in.transaction(ctx, class) }()
	return got
}

// TestIntakeNarrowsWorkerTransactionsWhileSubmitsFlow: worker transactions pass through the
// lane while a submit is in flight and for maxWait after the last one, and go straight through
// otherwise.
func TestIntakeNarrowsWorkerTransactionsWhileSubmitsFlow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// full returns an intake whose one-wide lane the test holds.
	full := func(maxWait time.Duration) (*intake, func()) {
		in := newIntake(maxWait)
		in.lane = newLane(1)
		return in, in.lane.enter(ctx, laneFinish)
	}

	t.Run("no submit yet", func(t *testing.T) {
		t.Parallel()
		in, hold := full(time.Hour)
		defer hold()
		admitted(t, transacted(ctx, in, laneClaim), "a claim before any submit")()
	})
	t.Run("while a submit is in flight", func(t *testing.T) {
		t.Parallel()
		in, hold := full(time.Hour)
		defer in.enter()()
		got := transacted(ctx, in, laneFinish)
		notAdmitted(t, got, "a finish while a submit was in flight")
		hold()
		admitted(t, got, "the finish once the lane freed")()
	})
	t.Run("for maxWait after the last submit", func(t *testing.T) {
		t.Parallel()
		in, hold := full(time.Second)
		defer hold()
		in.enter()()
		ended := time.Now()
		notAdmitted(t, transacted(ctx, in, laneClaim), "a claim just after a submit ended")
		// Once the window has passed, a new transaction goes straight through.
		time.Sleep(time.Until(ended.Add(1100 * time.Millisecond)))
		admitted(t, transacted(ctx, in, laneClaim), "a claim after the window")()
	})
	t.Run("zero maxWait never narrows", func(t *testing.T) {
		t.Parallel()
		in, hold := full(0)
		defer hold()
		defer in.enter()()
		admitted(t, transacted(ctx, in, laneFinish), "a finish with maxWait zero")()
	})
	t.Run("half the cores, at least one", func(t *testing.T) {
		t.Parallel()
		if w, want := newIntake(time.Second).lane.width, max(runtime.GOMAXPROCS(0)/2, 1); w != want {
			t.Errorf("lane width %d; want %d", w, want)
		}
	})
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
			s, d, jobID := serviceWithOneJob(t, "lane", tc.maxWait)
			s.intake.lane = newLane(1)
			hold := s.intake.lane.enter(context.Background(), laneFinish)
			if !tc.narrow {
				time.Sleep(2 * tc.maxWait)
			}
			runOneWorker(t, s, d, jobID, tc.narrow, hold, "while the lane was held")
		})
	}
}

// serviceWithOneJob is a service whose intake yields for maxWait, with one prompt submitted
// through it (so the intake has just seen a submit end) and no worker yet.
func serviceWithOneJob(t *testing.T, name string, maxWait time.Duration) (*Service, *dbtest.DB, uuid.UUID) {
	t.Helper()
	s, d, org, user := newInternalService(t, name)
	s.intake = newIntake(maxWait)
	sub, err := s.Submit(context.Background(), SubmitRequest{Viewer: Viewer{OrgID: org, UserID: user}, Prompt: "wait for the " + name})
	if err != nil {
		t.Fatal(err)
	}
	return s, d, sub.JobID
}

// runOneWorker starts a one-worker runtime on s. When heldBack, it checks that the job stays
// queued after River has handed it to the worker (why names what holds it), then calls
// release; otherwise it releases at the end. Either way the job must then succeed.
func runOneWorker(t *testing.T, s *Service, d *dbtest.DB, jobID uuid.UUID, heldBack bool, release func(), why string) {
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
		waitForCond(t, 15*time.Second, "River to hand the job to the worker", func() bool {
			var n int
			_ = d.Bun.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = 'running'").Scan(&n)
			return n == 1
		})
		time.Sleep(200 * time.Millisecond)
		if got := state(); got != string(StateQueued) {
			t.Fatalf("job %s %s; want it still queued", got, why)
		}
		release()
	} else {
		defer release()
	}
	waitForCond(t, 15*time.Second, "the job to succeed", func() bool { return state() == string(StateSucceeded) })
}
