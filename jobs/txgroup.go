package jobs

import (
	"context"
	"fmt"
	"sync"

	"github.com/uptrace/bun"
)

// txGroup gathers concurrent requests of one kind into shared transactions. Most of what
// PostgreSQL spends on a small write transaction is per statement and per transaction
// (opening tables and indexes, taking locks, the round trips, the commit), not per row. A
// request that finds a writer free goes alone at once; requests that arrive while every
// writer is busy wait and then go together, up to max per transaction. Each request is
// answered only after its transaction commits (or fails), and a request's writes are all in
// one transaction or none.
type txGroup[Req, Res any] struct {
	// writers bounds the shared transactions in flight at once; max the requests in one.
	writers, max int
	// write writes batch in tx and records each request's outcome (a request refused on its
	// own merits gets its error there and writes nothing); an error fails the transaction,
	// which then wrote nothing.
	write func(ctx context.Context, tx bun.Tx, batch []*groupWait[Req, Res], outcomes []groupOutcome[Res]) error
	// alone handles one request in a transaction of its own, after its group failed.
	alone func(ctx context.Context, req Req) (Res, error)
	// what names the requests in errors and logs.
	what string

	mu      sync.Mutex
	pending []*groupWait[Req, Res]
	active  int // writers running
}

// groupWait is one request waiting for its transaction's outcome.
type groupWait[Req, Res any] struct {
	ctx  context.Context
	req  Req
	done chan groupOutcome[Res]
}

// groupOutcome is what became of one request.
type groupOutcome[Res any] struct {
	res Res
	err error
}

// newGroupWait is a request about to join a group.
func newGroupWait[Req, Res any](ctx context.Context, req Req) *groupWait[Req, Res] {
	return &groupWait[Req, Res]{ctx: ctx, req: req, done: make(chan groupOutcome[Res], 1)}
}

// do runs req in a transaction it may share, and waits for that transaction's outcome, even
// if ctx ends meanwhile: the caller must never be told a request failed that then commits.
func (g *txGroup[Req, Res]) do(ctx context.Context, s *Service, req Req) (Res, error) {
	w := newGroupWait[Req, Res](ctx, req)
	g.mu.Lock()
	g.pending = append(g.pending, w)
	start := g.active < g.writers
	if start {
		g.active++
	}
	g.mu.Unlock()
	if start {
		go g.run(context.WithoutCancel(ctx), s)
	}
	out := <-w.done
	return out.res, out.err
}

// run writes waiting requests, up to max per transaction, until none waits.
func (g *txGroup[Req, Res]) run(ctx context.Context, s *Service) {
	for {
		g.mu.Lock()
		n := min(len(g.pending), g.max)
		if n == 0 {
			g.active--
			g.mu.Unlock()
			return
		}
		batch := g.pending[:n:n]
		g.pending = append([]*groupWait[Req, Res](nil), g.pending[n:]...)
		g.mu.Unlock()
		g.flush(ctx, s, batch)
	}
}

// flush writes batch in one transaction and answers each request. When the transaction
// fails, nothing of it was written, and each request is tried again alone, so one request's
// failure never becomes another's. A panic while writing (which the HTTP server's recovery
// cannot see from this goroutine) answers every request not yet answered with an error
// instead of leaving it waiting.
func (g *txGroup[Req, Res]) flush(ctx context.Context, s *Service, batch []*groupWait[Req, Res]) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error(g.what+" group panicked", "panic", r, "requests", len(batch))
			for _, w := range batch {
				select {
				case w.done <- groupOutcome[Res]{err: fmt.Errorf("%s: %v", g.what, r)}:
				default: // answered already
				}
			}
		}
	}()
	live := batch[:0:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.done <- groupOutcome[Res]{err: err}
			continue
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		return
	}
	outcomes := make([]groupOutcome[Res], len(live))
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return g.write(ctx, tx, live, outcomes)
	})
	if err != nil && len(live) > 1 {
		for _, w := range live {
			res, err := g.alone(ctx, w.req)
			w.done <- groupOutcome[Res]{res: res, err: err}
		}
		return
	}
	for i, w := range live {
		if err != nil {
			outcomes[i] = groupOutcome[Res]{err: err}
		}
		w.done <- outcomes[i]
	}
}
