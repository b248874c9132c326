package jobs

import (
	"context"
	"testing"
	"time"

	"asterion/db"
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
			s, d, org, user := newInternalService(t, "intake")
			s.intake = newIntake(tc.maxWait)
			ctx := context.Background()
			sub, err := s.Submit(ctx, SubmitRequest{Viewer: Viewer{OrgID: org, UserID: user}, Prompt: "wait for the intake"})
			if err != nil {
				t.Fatal(err)
			}
			inFlight := s.intake.enter()
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
				if err := d.Bun.NewSelect().Model(&job).Column("state").Where("id = ?", sub.JobID).Scan(ctx); err != nil {
					t.Fatal(err)
				}
				return job.State
			}
			if tc.release {
				waitForCond(t, 15*time.Second, "River to hand the job to the worker", func() bool {
					var n int
					_ = d.Bun.QueryRowContext(ctx, "SELECT count(*) FROM river_job WHERE state = 'running'").Scan(&n)
					return n == 1
				})
				time.Sleep(200 * time.Millisecond)
				if got := state(); got != string(StateQueued) {
					t.Fatalf("job %s while a submit was in flight; want it still queued", got)
				}
				inFlight()
			} else {
				defer inFlight()
			}
			waitForCond(t, 15*time.Second, "the job to succeed", func() bool { return state() == string(StateSucceeded) })
		})
	}
}
