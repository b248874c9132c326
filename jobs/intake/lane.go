package intake

import (
	"context"
	"sync"
)

// Lane admits at most width holders at once. Waiters are served in two classes: every waiting
// finish before any waiting claim, each class first come first served. A finish ends work
// already started (and settles a job a client is watching); a claim only starts more.
type Lane struct {
	width int

	mu   sync.Mutex
	busy int
	// waiting holds the grant channels of waiters: [0] finishes, [1] claims.
	waiting [2][]chan struct{}
}

// Class is a kind of lane waiter; classes are served in the order of their values.
type Class int

// The classes of lane waiters.
const (
	// Finish is a transaction that ends work already started.
	Finish Class = iota
	// Claim is a transaction that starts more work.
	Claim
)

// NewLane returns a lane of width places (at least one).
func NewLane(width int) *Lane { return &Lane{width: max(width, 1)} }

// Enter waits for a place in the lane and returns its release. When ctx ends first it returns
// at once with a release that does nothing: the caller goes on unadmitted rather than fail
// work it is already doing (a worker finalising after its context ended must still write).
func (l *Lane) Enter(ctx context.Context, class Class) (release func()) {
	l.mu.Lock()
	if l.busy < l.width {
		l.busy++
		l.mu.Unlock()
		return l.leave
	}
	grant := make(chan struct{})
	l.waiting[class] = append(l.waiting[class], grant)
	l.mu.Unlock()
	select {
	case <-grant:
		return l.leave
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, g := range l.waiting[class] {
		if g == grant {
			l.waiting[class] = append(l.waiting[class][:i], l.waiting[class][i+1:]...)
			return func() {}
		}
	}
	// Granted while giving up: the place is ours, so hand it on.
	return l.leave
}

// leave hands the place to the first waiter, finishes first, or frees it.
func (l *Lane) leave() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for c := range l.waiting {
		if len(l.waiting[c]) > 0 {
			grant := l.waiting[c][0]
			l.waiting[c] = l.waiting[c][1:]
			close(grant)
			return
		}
	}
	l.busy--
}

// Waiting is how many entries wait for a place now. It is a signal for tests (a transaction
// held back by the lane waits here).
func (l *Lane) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting[Finish]) + len(l.waiting[Claim])
}
