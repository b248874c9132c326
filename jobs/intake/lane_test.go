package intake

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// entered runs l.Enter(ctx, class) in the background and delivers its release once admitted.
func entered(ctx context.Context, l *Lane, class Class) <-chan func() {
	got := make(chan func(), 1)
	go func() { got <- l.Enter(ctx, class) }()
	return got
}

// admitted waits for an entry to be admitted and returns its release.
func admitted(t *testing.T, got <-chan func(), who string) func() {
	t.Helper()
	select {
	case release := <-got:
		return release
	case <-time.After(5 * time.Second):
		t.Fatalf("%s was not admitted", who)
		return nil
	}
}

// notAdmitted fails the test if an entry is admitted once l holds waiters waiting entries
// (the entry among them): the waiting list is
// the signal that the entry reached its wait, after which only a release can admit it.
func notAdmitted(t *testing.T, l *Lane, waiters int, got <-chan func(), who string) {
	t.Helper()
	dbtest.WaitFor(t, 10*time.Second, who+" to wait", func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		return len(l.waiting[Finish])+len(l.waiting[Claim]) >= waiters
	})
	select {
	case <-got:
		t.Fatalf("%s was admitted while the lane was full", who)
	default:
	}
}

func TestLaneAdmitsItsWidth(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := NewLane(2)
	first := admitted(t, entered(ctx, l, Claim), "the first claim")
	second := admitted(t, entered(ctx, l, Claim), "the second claim")
	third := entered(ctx, l, Claim)
	notAdmitted(t, l, 1, third, "a third claim")
	first()
	admitted(t, third, "the third claim after a place was freed")()
	second()
	// Every place is free again: two enter at once.
	admitted(t, entered(ctx, l, Finish), "a finish in the free lane")()
	a := admitted(t, entered(ctx, l, Claim), "a claim in the free lane")
	b := admitted(t, entered(ctx, l, Claim), "a second claim in the free lane")
	a()
	b()
	if l.busy != 0 {
		t.Errorf("lane busy %d after every holder left; want 0", l.busy)
	}
}

func TestLaneWidthIsAtLeastOne(t *testing.T) {
	t.Parallel()
	l := NewLane(0)
	release := admitted(t, entered(context.Background(), l, Claim), "a claim in a lane of width 0")
	notAdmitted(t, l, 1, entered(context.Background(), l, Claim), "a second claim in a lane made with width 0")
	release()
}

// TestLaneServesFinishesBeforeClaims: whatever order they arrived in, waiting finishes are
// admitted before waiting claims, each class in arrival order.
func TestLaneServesFinishesBeforeClaims(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	l := NewLane(1)
	holder := admitted(t, entered(ctx, l, Claim), "the holder")
	var order []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	arrive := func(name string, class Class) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			release := l.Enter(ctx, class)
			mu.Lock()
			order = append(order, name)
			mu.Unlock()
			release()
		}()
		// Arrival order is the order of the waiting lists: let each join before the next.
		dbtest.WaitFor(t, 5*time.Second, name+" to wait", func() bool {
			l.mu.Lock()
			defer l.mu.Unlock()
			n := 0
			for _, w := range l.waiting {
				n += len(w)
			}
			return n == len(name)
		})
	}
	// Names are sized by arrival so the helper can count the waiters.
	arrive("c", Claim)
	arrive("cc", Claim)
	arrive("fff", Finish)
	arrive("cccc", Claim)
	arrive("fffff", Finish)
	holder()
	wg.Wait()
	want := []string{"fff", "fffff", "c", "cc", "cccc"}
	if len(order) != len(want) {
		t.Fatalf("admitted %v; want %v", order, want)
	}
	for i := range want {
		if order[i] != want[i] {
			t.Fatalf("admitted %v; want %v", order, want)
		}
	}
}

// TestLaneWaiterGivesUpWithItsContext: a waiter whose context ends returns unadmitted with a
// release that frees nothing, and the lane's places stay counted right.
func TestLaneWaiterGivesUpWithItsContext(t *testing.T) {
	t.Parallel()
	l := NewLane(1)
	holder := admitted(t, entered(context.Background(), l, Claim), "the holder")
	cctx, cancel := context.WithCancel(context.Background())
	waiter := entered(cctx, l, Finish)
	notAdmitted(t, l, 1, waiter, "the waiter")
	cancel()
	gaveUp := admitted(t, waiter, "the waiter after its context ended")
	gaveUp() // a no-op: it must not free the holder's place
	notAdmitted(t, l, 1, entered(context.Background(), l, Claim), "a claim while the holder still held the lane")
	holder()
}

// TestLaneNeverExceedsItsWidth runs many holders, some giving up while waiting, and checks
// that no more than width ever hold at once and that every place is returned.
func TestLaneNeverExceedsItsWidth(t *testing.T) {
	t.Parallel()
	const width = 3
	l := NewLane(width)
	var holding, most atomic.Int64
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			if i%5 == 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, time.Duration(rand.IntN(2000))*time.Microsecond)
				defer cancel()
			}
			release := l.Enter(ctx, Class(i%2))
			if ctx.Err() == nil {
				n := holding.Add(1)
				for {
					m := most.Load()
					if n <= m || most.CompareAndSwap(m, n) {
						break
					}
				}
				// Holds the lane a random while, so that holders overlap; nothing waits on it.
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
				holding.Add(-1)
			}
			release()
		}()
	}
	wg.Wait()
	if most.Load() > width {
		t.Errorf("%d held the lane at once; want at most %d", most.Load(), width)
	}
	if l.busy != 0 || len(l.waiting[0])+len(l.waiting[1]) != 0 {
		t.Errorf("after everyone left: busy %d, waiting %d+%d; want all zero", l.busy, len(l.waiting[0]), len(l.waiting[1]))
	}
}
