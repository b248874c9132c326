package governor

import (
	"context"
	"sync"
	"time"
)

// CountEvery is how long a call granted by a read of its model's row (no limit in force, no
// pause) waits, at most, to be added to the model's count. Such a grant takes no lock and
// writes nothing, so that the workers of every process do not queue on one row for each call
// when there is nothing to keep; the calls a process granted meanwhile are added in one
// statement. A process that stops loses at most the last CountEvery of them from the count,
// which only operators read.
const CountEvery = time.Second

// uncountedCalls is one model's calls granted by a read and not yet added to its count.
type uncountedCalls struct {
	mu  sync.Mutex
	n   int64
	due bool // an addition is scheduled
}

// countLater counts one call to model granted by a read, and schedules its addition to the
// model's count unless one is scheduled already.
func (g *Governor) countLater(model string) {
	v, ok := g.uncounted.Load(model)
	if !ok {
		v, _ = g.uncounted.LoadOrStore(model, new(uncountedCalls))
	}
	u := v.(*uncountedCalls)
	u.mu.Lock()
	defer u.mu.Unlock()
	u.n++
	if !u.due {
		u.due = true
		time.AfterFunc(CountEvery, func() { g.addCalls(model, u) })
	}
}

// addCalls adds u's calls to model's count. Should the statement fail, they stay for the next
// addition, which the next call granted by a read schedules.
func (g *Governor) addCalls(model string, u *uncountedCalls) {
	u.mu.Lock()
	n := u.n
	u.n, u.due = 0, false
	u.mu.Unlock()
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := g.cfg.DB.DB.ExecContext(ctx, addCallsSQL, model, n); err != nil {
		u.mu.Lock()
		u.n += n
		u.mu.Unlock()
	}
}
