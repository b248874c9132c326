package jobs

import (
	"context"
	"sync"
)

// lane admits at most width holders at once. Waiters are served in two classes: every waiting
// finish before any waiting claim, each class first come first served. A finish ends work
// already started (and settles a job a client is watching); a claim only starts more.
type lane struct {
	width int

	mu   sync.Mutex
	busy int
	// waiting holds the grant channels of waiters: [0] finishes, [1] claims.
	waiting [2][]chan struct{}
}

// laneClass is a kind of lane waiter; classes are served in the order of their values.
type laneClass int

const (
	laneFinish laneClass = iota
	laneClaim
)

func newLane(width int) *lane { return &lane{width: max(width, 1)} }

// enter waits for a place in the lane and returns its release. When ctx ends first it returns
// at once with a release that does nothing: the caller goes on unadmitted rather than fail
// work it is already doing (a worker finalising after its context ended must still write).
func (l *lane) enter(ctx context.Context, class laneClass) (release func()) {
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
func (l *lane) leave() {
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
