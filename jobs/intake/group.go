package intake

import (
	"context"
	"fmt"
	"log/slog"
	"sync"

	"github.com/uptrace/bun"
)

// Group gathers concurrent requests of one kind into shared transactions. Most of what
// PostgreSQL spends on a small write transaction is per statement and per transaction
// (opening tables and indexes, taking locks, the round trips, the commit), not per row. A
// request that finds a writer free goes alone at once; requests that arrive while every
// writer is busy wait and then go together, up to Config.GroupMax per transaction. Each
// request is answered only after its transaction commits (or fails), and a request's writes
// are all in one transaction or none. With Config.Solo every request goes alone.
type Group[Req, Res any] struct {
	spec GroupSpec[Req, Res]
	// writers bounds the shared transactions in flight at once; max the requests in one.
	writers, max int
	solo         bool

	mu      sync.Mutex
	pending []*Wait[Req, Res]
	active  int // writers running
}

// GroupSpec is what a Group does with its requests.
type GroupSpec[Req, Res any] struct {
	// Write writes batch in tx and records each request's outcome (a request refused on its
	// own merits gets its error there and writes nothing); an error fails the transaction,
	// which then wrote nothing.
	Write func(ctx context.Context, tx bun.Tx, batch []*Wait[Req, Res], outcomes []Outcome[Res]) error
	// Alone handles one request in a transaction of its own: with Solo, and after its group
	// failed.
	Alone func(ctx context.Context, req Req) (Res, error)
	// InTx runs a shared transaction.
	InTx func(ctx context.Context, fn func(ctx context.Context, tx bun.Tx) error) error
	// Recover, when set, settles the requests of a shared transaction that failed with err,
	// which may have committed after all (a connection lost at COMMIT leaves the outcome
	// unknown): it records every request's answer in outcomes, answering those written as
	// done and writing the others again, so no request is ever written twice. outcomes holds
	// what Write recorded before the failure. Without it each request is tried again alone.
	Recover func(ctx context.Context, batch []*Wait[Req, Res], outcomes []Outcome[Res], err error)
	// What names the requests in errors and logs.
	What string
	// Logger receives a group's panic (default slog.Default()).
	Logger *slog.Logger
}

// Wait is one request waiting for its transaction's outcome.
type Wait[Req, Res any] struct {
	ctx context.Context
	// Req is the request.
	Req  Req
	done chan Outcome[Res]
}

// Outcome is what became of one request.
type Outcome[Res any] struct {
	Res Res
	Err error
}

// NewWait is a request about to join a group.
func NewWait[Req, Res any](ctx context.Context, req Req) *Wait[Req, Res] {
	return &Wait[Req, Res]{ctx: ctx, Req: req, done: make(chan Outcome[Res], 1)}
}

// Done delivers the request's outcome once its transaction has ended.
func (w *Wait[Req, Res]) Done() <-chan Outcome[Res] { return w.done }

// NewGroup returns a group of the requests spec handles, sized by the intake's Config.
func NewGroup[Req, Res any](in *Intake, spec GroupSpec[Req, Res]) *Group[Req, Res] {
	if spec.Logger == nil {
		spec.Logger = slog.Default()
	}
	return &Group[Req, Res]{spec: spec, writers: in.cfg.GroupWriters, max: in.cfg.GroupMax, solo: in.cfg.Solo}
}

// Do runs req in a transaction it may share, and waits for that transaction's outcome, even
// if ctx ends meanwhile: the caller must never be told a request failed that then commits.
func (g *Group[Req, Res]) Do(ctx context.Context, req Req) (Res, error) {
	if g.solo {
		return g.spec.Alone(ctx, req)
	}
	w := NewWait[Req, Res](ctx, req)
	g.mu.Lock()
	g.pending = append(g.pending, w)
	start := g.active < g.writers
	if start {
		g.active++
	}
	g.mu.Unlock()
	if start {
		go g.run(context.WithoutCancel(ctx))
	}
	out := <-w.done
	return out.Res, out.Err
}

// Hold makes every writer look busy, so that requests wait until Release; Waiting says how
// many do. Together they let a caller see requests gather (tests).
func (g *Group[Req, Res]) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.active = g.writers
}

// Waiting is how many requests wait for a writer.
func (g *Group[Req, Res]) Waiting() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// Release starts one writer, which writes every waiting request, up to the group's maximum
// per transaction, and returns once none waits.
func (g *Group[Req, Res]) Release(ctx context.Context) { g.run(ctx) }

// run writes waiting requests, up to max per transaction, until none waits.
func (g *Group[Req, Res]) run(ctx context.Context) {
	for {
		g.mu.Lock()
		n := min(len(g.pending), g.max)
		if n == 0 {
			g.active--
			g.mu.Unlock()
			return
		}
		batch := g.pending[:n:n]
		g.pending = append([]*Wait[Req, Res](nil), g.pending[n:]...)
		g.mu.Unlock()
		g.Flush(ctx, batch)
	}
}

// Flush writes batch in one transaction and answers each request. When the transaction
// fails, GroupSpec.Recover settles its requests; without one, each request is tried again
// alone, so one request's failure never becomes another's. A panic while writing (which the HTTP server's recovery
// cannot see from this goroutine) answers every request not yet answered with an error
// instead of leaving it waiting. Do is the way in; Flush lets a caller write a batch it built
// itself (tests).
func (g *Group[Req, Res]) Flush(ctx context.Context, batch []*Wait[Req, Res]) {
	defer func() {
		if r := recover(); r != nil {
			g.spec.Logger.Error(g.spec.What+" group panicked", "panic", r, "requests", len(batch))
			for _, w := range batch {
				select {
				case w.done <- Outcome[Res]{Err: fmt.Errorf("%s: %v", g.spec.What, r)}:
				default: // answered already
				}
			}
		}
	}()
	live := batch[:0:0]
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.done <- Outcome[Res]{Err: err}
			continue
		}
		live = append(live, w)
	}
	if len(live) == 0 {
		return
	}
	outcomes := make([]Outcome[Res], len(live))
	err := g.spec.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		return g.spec.Write(ctx, tx, live, outcomes)
	})
	if err != nil && g.spec.Recover != nil {
		g.spec.Recover(ctx, live, outcomes, err)
		for i, w := range live {
			w.done <- outcomes[i]
		}
		return
	}
	if err != nil && len(live) > 1 {
		for _, w := range live {
			res, err := g.spec.Alone(ctx, w.Req)
			w.done <- Outcome[Res]{Res: res, Err: err}
		}
		return
	}
	for i, w := range live {
		if err != nil {
			outcomes[i] = Outcome[Res]{Err: err}
		}
		w.done <- outcomes[i]
	}
}
