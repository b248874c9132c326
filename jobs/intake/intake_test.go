package intake

import (
	"context"
	"runtime"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// yielded runs in.Yield(ctx) in the background and reports on the channel when it returns.
func yielded(ctx context.Context, in *Intake) <-chan time.Duration {
	done := make(chan time.Duration, 1)
	start := time.Now()
	go func() {
		in.Yield(ctx)
		done <- time.Since(start)
	}()
	return done
}

// stillWaiting fails the test if the yield has returned once it is parked in its wait: the
// parked count is the signal that it reached the wait, so "it has not returned" is checked
// after a known event, not after a guess at how long a goroutine takes to start.
func stillWaiting(t *testing.T, in *Intake, parked int64, done <-chan time.Duration, why string) {
	t.Helper()
	dbtest.WaitFor(t, 10*time.Second, "the yield to park", func() bool { return in.parked.Load() >= parked })
	select {
	case <-done:
		t.Fatalf("yield returned %s", why)
	default:
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
		returned(t, yielded(ctx, testIntake(time.Hour)), "with no submit in flight")
	})
	t.Run("until the last submit ends", func(t *testing.T) {
		t.Parallel()
		in := testIntake(time.Hour)
		first, second := in.Enter(), in.Enter()
		done := yielded(ctx, in)
		stillWaiting(t, in, 1, done, "while two submits were in flight")
		first()
		stillWaiting(t, in, 1, done, "while one submit was still in flight")
		second()
		returned(t, done, "after the last submit ended")
		// A new submit makes the next worker wait again.
		third := in.Enter()
		done = yielded(ctx, in)
		stillWaiting(t, in, 1, done, "while a later submit was in flight")
		third()
		returned(t, done, "after the later submit ended")
	})
	t.Run("never longer than maxWait", func(t *testing.T) {
		t.Parallel()
		in := testIntake(30 * time.Millisecond)
		defer in.Enter()()
		if waited := returned(t, yielded(ctx, in), "after maxWait"); waited < 30*time.Millisecond {
			t.Errorf("yield returned after %s while a submit was in flight; want at least maxWait", waited)
		}
	})
	t.Run("not past its context", func(t *testing.T) {
		t.Parallel()
		in := testIntake(time.Hour)
		defer in.Enter()()
		cctx, cancel := context.WithCancel(ctx)
		done := yielded(cctx, in)
		stillWaiting(t, in, 1, done, "before its context ended")
		cancel()
		returned(t, done, "after its context ended")
	})
	t.Run("zero maxWait never waits", func(t *testing.T) {
		t.Parallel()
		in := testIntake(0)
		defer in.Enter()()
		returned(t, yielded(ctx, in), "with maxWait zero")
	})
}

// transacted runs in.transaction in the background and delivers its release once admitted.
func transacted(ctx context.Context, in *Intake, class Class) <-chan func() {
	got := make(chan func(), 1)
	go func() { got <- in.Transaction(ctx, class) }()
	return got
}

// TestIntakeNarrowsWorkerTransactionsWhileSubmitsFlow: worker transactions pass through the
// lane while a submit is in flight and for maxWait after the last one, and go straight through
// otherwise.
func TestIntakeNarrowsWorkerTransactionsWhileSubmitsFlow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// full returns an intake whose one-wide lane the test holds.
	full := func(maxWait time.Duration) (*Intake, func()) {
		in := testIntake(maxWait)
		in.lane = NewLane(1)
		return in, in.lane.Enter(ctx, Finish)
	}

	t.Run("no submit yet", func(t *testing.T) {
		t.Parallel()
		in, hold := full(time.Hour)
		defer hold()
		admitted(t, transacted(ctx, in, Claim), "a claim before any submit")()
	})
	t.Run("while a submit is in flight", func(t *testing.T) {
		t.Parallel()
		in, hold := full(time.Hour)
		defer in.Enter()()
		got := transacted(ctx, in, Finish)
		notAdmitted(t, in.lane, 1, got, "a finish while a submit was in flight")
		hold()
		admitted(t, got, "the finish once the lane freed")()
	})
	t.Run("for maxWait after the last submit", func(t *testing.T) {
		t.Parallel()
		in, hold := full(time.Second)
		defer hold()
		// The intake's clock is the test's: the window is crossed by moving it, so a slow
		// machine cannot carry the first claim past the window.
		var mu sync.Mutex
		now := time.Unix(1_000_000, 0)
		in.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		in.Enter()()
		notAdmitted(t, in.lane, 1, transacted(ctx, in, Claim), "a claim just after a submit ended")
		mu.Lock()
		now = now.Add(999 * time.Millisecond)
		mu.Unlock()
		notAdmitted(t, in.lane, 2, transacted(ctx, in, Claim), "a claim just inside the window")
		// Once the window has passed, a new transaction goes straight through.
		mu.Lock()
		now = now.Add(time.Millisecond)
		mu.Unlock()
		admitted(t, transacted(ctx, in, Claim), "a claim after the window")()
	})
	t.Run("zero maxWait never narrows", func(t *testing.T) {
		t.Parallel()
		in, hold := full(0)
		defer hold()
		defer in.Enter()()
		admitted(t, transacted(ctx, in, Finish), "a finish with maxWait zero")()
	})
	t.Run("half the cores, at least one", func(t *testing.T) {
		t.Parallel()
		if w, want := testIntake(time.Second).lane.width, max(runtime.GOMAXPROCS(0)/2, 1); w != want {
			t.Errorf("lane width %d; want %d", w, want)
		}
	})
}

// testIntake is an intake whose lane is off or on by maxWait, as New builds it.
func testIntake(maxWait time.Duration) *Intake {
	in, err := New(Config{Yield: maxWait})
	if err != nil {
		panic(err)
	}
	return in
}
