package intake

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Gate is what prompt execution asks of the intake: a submit marks itself in flight, a worker
// yields to submits before it starts a job and passes its claim and finish transactions
// through the lane. *Intake is the Gate; a nil *Intake admits everything at once.
type Gate interface {
	Enter() (release func())
	Yield(ctx context.Context)
	Transaction(ctx context.Context, class Class) (release func())
}

// Intake lets the submits of a process go before its workers' work. Both compete for the same
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
type Intake struct {
	cfg     Config
	maxWait time.Duration
	lane    *Lane

	mu       sync.Mutex
	inFlight int
	// quiet is closed when inFlight returns to zero; a new one is made when it leaves zero.
	quiet chan struct{}
	// lastDone is when inFlight last returned to zero.
	lastDone time.Time

	// now is the intake's clock, Config.Now or time.Now; tests replace it to cross the yield
	// window without waiting for it.
	now func() time.Time
	// parked counts the Yields waiting for the submits, a test signal: a test that asserts a
	// Yield has not returned first waits for it to be parked, instead of sleeping a while.
	parked atomic.Int64
}

// New validates cfg and returns the intake of one process.
func New(cfg Config) (*Intake, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	q := make(chan struct{})
	close(q)
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	return &Intake{cfg: cfg, maxWait: cfg.Yield, quiet: q, lane: NewLane(cfg.LaneWidth), now: now}, nil
}

// Enter marks a submit in flight; the returned func marks it done. With no yield nobody waits
// for submits, so none are counted.
func (in *Intake) Enter() (release func()) {
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
			in.lastDone = in.now()
		}
		in.mu.Unlock()
	}
}

// Yield waits until no submit is in flight, maxWait has passed or ctx ends.
func (in *Intake) Yield(ctx context.Context) {
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
	in.parked.Add(1)
	defer in.parked.Add(-1)
	select {
	case <-quiet:
	case <-t.C:
	case <-ctx.Done():
	}
}

// Transaction admits a worker's claim or finish transaction (class Claim or Finish):
// at once while no submit has been in flight for maxWait, else through the lane. The caller
// runs its transaction, then calls the returned release.
func (in *Intake) Transaction(ctx context.Context, class Class) (release func()) {
	if in == nil || in.maxWait <= 0 {
		return func() {}
	}
	in.mu.Lock()
	flowing := in.inFlight > 0 || in.now().Sub(in.lastDone) < in.maxWait
	in.mu.Unlock()
	if !flowing {
		return func() {}
	}
	return in.lane.Enter(ctx, class)
}

// Parked is how many Yields wait for this process's submits now. It is a signal for tests
// (a worker held back by a submit is parked here) and costs nothing to read.
func (in *Intake) Parked() int64 { return in.parked.Load() }

// Lane is the lane the intake narrows worker transactions through while submits flow.
func (in *Intake) Lane() *Lane { return in.lane }
