package jobs

import (
	"context"
	"runtime"
	"sync"
	"time"
)

// DefaultIntakeYield is how long, at most, a worker delays a job start for the submits of its
// process, and how long after the last submit the workers' transactions stay in the lane.
// Measured with `asterion-bench` on two cores, 300 submits/s offered while the embedded workers
// ran the same jobs: the yield alone halved the p50 and p99 of no yield, and the lane then
// halved them again (p99 about 12 ms against 20–26 ms), while jobs/s end to end did not move
// (the same work is done, in a different order).
const DefaultIntakeYield = 100 * time.Millisecond

// intake lets the submits of a process go before its workers' work. Both compete for the same
// cores and the same database, and on a busy machine each slows the other; but a submit is a
// client waiting for its 202, while a queued job is already safe and loses nothing by starting
// a few milliseconds later. Two rules, both only while submits flow, so a worker process
// without submits (run-worker) and a server between bursts work at full width:
//
//   - A worker about to claim a job first waits until no submit of its process is in flight,
//     for at most maxWait: job starts are deferred under a stream of submits but never starved
//     (each worker starts at least one job per maxWait plus its run time).
//   - While a submit is in flight or one ended less than maxWait ago, the workers' database
//     transactions (claims and finishes) pass through a lane as wide as half the cores, so
//     their statements never hold every core while a submit waits for one; waiting finishes
//     go before waiting claims. Heartbeats and cancellations never wait.
type intake struct {
	maxWait time.Duration
	lane    *lane

	mu       sync.Mutex
	inFlight int
	// quiet is closed when inFlight returns to zero; a new one is made when it leaves zero.
	quiet chan struct{}
	// lastDone is when inFlight last returned to zero.
	lastDone time.Time
}

func newIntake(maxWait time.Duration) *intake {
	q := make(chan struct{})
	close(q)
	return &intake{maxWait: maxWait, quiet: q, lane: newLane(runtime.GOMAXPROCS(0) / 2)}
}

// enter marks a submit in flight; the returned func marks it done. With no yield nobody waits
// for submits, so none are counted.
func (in *intake) enter() func() {
	if in == nil || in.maxWait <= 0 {
		return func() {}
	}
	in.mu.Lock()
	in.inFlight++
	if in.inFlight == 1 {
		in.quiet = make(chan struct{})
	}
	in.mu.Unlock()
	return func() {
		in.mu.Lock()
		in.inFlight--
		if in.inFlight == 0 {
			close(in.quiet)
			in.lastDone = time.Now()
		}
		in.mu.Unlock()
	}
}

// yield waits until no submit is in flight, maxWait has passed or ctx ends.
func (in *intake) yield(ctx context.Context) {
	if in == nil || in.maxWait <= 0 {
		return
	}
	in.mu.Lock()
	quiet := in.quiet
	in.mu.Unlock()
	select {
	case <-quiet:
		return
	default:
	}
	t := time.NewTimer(in.maxWait)
	defer t.Stop()
	select {
	case <-quiet:
	case <-t.C:
	case <-ctx.Done():
	}
}

// transaction admits a worker's claim or finish transaction (class laneClaim or laneFinish):
// at once while no submit has been in flight for maxWait, else through the lane. The caller
// runs its transaction, then calls the returned release.
func (in *intake) transaction(ctx context.Context, class laneClass) (release func()) {
	if in == nil || in.maxWait <= 0 {
		return func() {}
	}
	in.mu.Lock()
	flowing := in.inFlight > 0 || time.Since(in.lastDone) < in.maxWait
	in.mu.Unlock()
	if !flowing {
		return func() {}
	}
	return in.lane.enter(ctx, class)
}
