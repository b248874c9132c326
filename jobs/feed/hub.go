package feed

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"
)

// Subscription receives events in order. When the reader falls behind, C is closed and Lagged
// reports true: the reader must replay from the table after its last seen seq.
type Subscription struct {
	C      <-chan Event
	c      chan Event
	scope  Scope
	hub    *Hub
	lagged bool
	closed bool
}

// Lagged reports whether the subscription was dropped for falling behind.
func (s *Subscription) Lagged() bool {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	return s.lagged
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.hub.mu.Lock()
	defer s.hub.mu.Unlock()
	if !s.closed {
		s.closed = true
		delete(s.hub.subs, s)
		close(s.c)
	}
}

// Hub listens for new events and fans them out to subscribers in this process.
type Hub struct {
	pool *pgxpool.Pool
	db   *bun.DB
	log  *slog.Logger

	mu     sync.Mutex
	subs   map[*Subscription]struct{}
	cursor int64
	// announced is the highest number a sequencer's notification has announced.
	announced atomic.Int64

	kick chan struct{}
	// sequence asks the loop to run the sequencer; poke asks it to, paced by pokeGap.
	sequence chan struct{}
	poke     chan struct{}
	ready    chan struct{}
	readyOne sync.Once
	// probeEvery and tickEvery are the probe and catch-up intervals (tests stretch them);
	// probeIdle is the longest gap probes stretch to while they find nothing.
	probeEvery, probeIdle, tickEvery time.Duration
	// idleProbes counts the probes that found nothing, a signal for tests: enough of them in a
	// row and the probe has slowed to probeIdle, which a test waits for instead of sleeping.
	idleProbes atomic.Int64
	// kicksServed counts the kicks the work loop has served, a signal for tests: a test that
	// asserts an event was not delivered kicks the loop and waits for the count to move, which
	// proves the loop was free to deliver it, instead of watching for a while.
	kicksServed atomic.Int64
	// pokesServed counts the sequencer runs pokes asked for (at once or paced), a signal for
	// tests: once it has moved past a poke, no run of that poke is still to come.
	pokesServed atomic.Int64
}

// NewHub returns a hub; Run must be running for subscribers to receive anything.
func NewHub(pool *pgxpool.Pool, bunDB *bun.DB, log *slog.Logger) *Hub {
	if log == nil {
		log = slog.Default()
	}
	return &Hub{pool: pool, db: bunDB, log: log, subs: map[*Subscription]struct{}{},
		kick: make(chan struct{}, 1), sequence: make(chan struct{}, 1), poke: make(chan struct{}, 1), ready: make(chan struct{}),
		probeEvery: probeEvery, probeIdle: probeIdle, tickEvery: time.Second}
}

// Ready is closed once the hub listens and knows its starting point.
func (h *Hub) Ready() <-chan struct{} { return h.ready }

// Subscribe registers a reader for events inside scope. buffer bounds how far it may lag.
func (h *Hub) Subscribe(scope Scope, buffer int) *Subscription {
	c := make(chan Event, buffer)
	s := &Subscription{C: c, c: c, scope: scope, hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Cursor returns the highest seq this hub has delivered.
func (h *Hub) Cursor() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.cursor
}

// Run listens until ctx ends, reconnecting after a lost connection. A one-second tick numbers
// and delivers events even if a notification was missed.
func (h *Hub) Run(ctx context.Context) error {
	if last, err := HighMark(ctx, h.db); err == nil {
		h.mu.Lock()
		h.cursor = last
		h.mu.Unlock()
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); h.listenLoop(ctx) }()
	go func() { defer wg.Done(); h.workLoop(ctx) }()
	wg.Wait()
	h.mu.Lock()
	for s := range h.subs {
		s.closed = true
		close(s.c)
		delete(h.subs, s)
	}
	h.mu.Unlock()
	return nil
}

// Start runs the hub in the background until the returned stop is called (or ctx ends); stop
// returns once Run has, with every subscription closed.
func (h *Hub) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = h.Run(ctx) }()
	return func() { cancel(); <-done }
}

func (h *Hub) listenLoop(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := h.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		h.log.Warn("change feed listener lost its connection, reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (h *Hub) listenOnce(ctx context.Context) error {
	conn, err := h.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// The connection carries LISTEN state; never hand it back to the pool.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+eventsChannel); err != nil {
		return err
	}
	h.readyOne.Do(func() { close(h.ready) })
	// Catch up on whatever happened while not listening.
	signal(h.sequence)
	signal(h.kick)
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == eventsChannel {
			if seq, err := strconv.ParseInt(n.Payload, 10, 64); err == nil {
				h.announce(seq)
			}
			signal(h.kick)
		}
	}
}

// announce records a high mark a sequencer announced; it only ever grows.
func (h *Hub) announce(seq int64) {
	for {
		was := h.announced.Load()
		if seq <= was || h.announced.CompareAndSwap(was, seq) {
			return
		}
	}
}

// Poke tells the hub that this process has just committed events: it numbers and delivers
// them now rather than at its next probe. Pokes closer together than pokeGap are served by one
// run of the sequencer, so a busy process does not turn every commit into a sequencer
// transaction of its own.
func (h *Hub) Poke() { signal(h.poke) }

// pokeGap is the least time between two runs of the sequencer that pokes ask for.
const pokeGap = 4 * time.Millisecond

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// probeEvery is how often a hub looks for committed events to number (writers do not notify;
// see Publish) while there are some. The probe is one index-only query, but a hundred a second
// from every idle server kept a tenth of a core busy between its process and PostgreSQL; so
// each probe that finds nothing doubles the gap to the next, up to probeIdle, and one that
// finds events goes back to probeEvery. Events of this process do not wait for a probe (its
// commits poke the hub); the probe serves writers without a hub (run-worker, the command line),
// whose first event after a quiet spell is numbered within probeIdle.
const (
	probeEvery = 10 * time.Millisecond
	probeIdle  = 100 * time.Millisecond
)

// nextProbeGap is the gap after a probe that waited gap and found (or not) events to number.
func nextProbeGap(gap, every, idle time.Duration, found bool) time.Duration {
	if found {
		return every
	}
	return min(2*gap, max(idle, every))
}

func (h *Hub) workLoop(ctx context.Context) {
	tick := time.NewTicker(h.tickEvery)
	defer tick.Stop()
	gap := h.probeEvery
	probe := time.NewTimer(gap)
	defer probe.Stop()
	var last time.Time         // when the sequencer last ran
	var paced <-chan time.Time // a poke waiting for pokeGap to pass
	sequence := func() {
		last = time.Now()
		if high, n, err := Sequence(ctx, h.pool); err != nil {
			if ctx.Err() == nil {
				h.log.Warn("sequence events", "err", err)
			}
		} else if n > 0 {
			h.deliver(ctx, high)
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-probe.C:
			ok, err := Pending(ctx, h.db)
			if err == nil && ok {
				signal(h.sequence)
			} else if err == nil {
				h.idleProbes.Add(1)
			}
			gap = nextProbeGap(gap, h.probeEvery, h.probeIdle, err == nil && ok)
			probe.Reset(gap)
		case <-h.poke:
			if wait := pokeGap - time.Since(last); wait > 0 {
				if paced == nil {
					paced = time.After(wait)
				}
				continue
			}
			sequence()
			h.pokesServed.Add(1)
		case <-paced:
			paced = nil
			sequence()
			h.pokesServed.Add(1)
		case <-h.sequence:
			sequence()
		case <-h.kick:
			h.deliver(ctx, h.announced.Load())
			h.kicksServed.Add(1)
		case <-tick.C:
			high, _, err := Sequence(ctx, h.pool)
			if err != nil && ctx.Err() == nil {
				h.log.Warn("sequence events", "err", err)
			}
			h.deliver(ctx, high)
		}
	}
}

// deliver reads numbered events after the cursor and hands them to subscribers. A hub with no
// subscriber reads none: it moves its cursor to the high mark, so a stream opened later starts
// from there, as it would had the events been delivered. high is a high mark the caller has
// just read (the one its sequencer run left, or one a notification announced), or 0 to read it
// here.
func (h *Hub) deliver(ctx context.Context, high int64) {
	if h.skipUnwatched(ctx, high) {
		return
	}
	for {
		events, err := Replay(ctx, h.db, h.Cursor(), Scope{AllOrgs: true}, 1000)
		if err != nil {
			if ctx.Err() == nil {
				h.log.Warn("read new events", "err", err)
			}
			return
		}
		if len(events) == 0 {
			return
		}
		h.mu.Lock()
		for _, e := range events {
			for s := range h.subs {
				if !s.scope.Allows(e) {
					continue
				}
				select {
				case s.c <- e:
				default:
					s.lagged = true
					s.closed = true
					delete(h.subs, s)
					close(s.c)
				}
			}
		}
		h.cursor = events[len(events)-1].Seq
		h.mu.Unlock()
		if len(events) < 1000 {
			return
		}
	}
}

// skipUnwatched moves the cursor to the high mark when nobody is subscribed, and reports
// whether it did. The high mark is read before the check: a stream that subscribes after the
// check either replays from a cursor it read earlier (its replay, which runs after it
// subscribed, sees every event up to that high mark) or starts at the new cursor. A high mark
// the caller read (high > 0) serves as well as one read here, and saves a query per
// sequencer run of a server nobody watches.
func (h *Hub) skipUnwatched(ctx context.Context, high int64) bool {
	h.mu.Lock()
	watched := len(h.subs) > 0
	h.mu.Unlock()
	if watched {
		return false
	}
	last := high
	if last <= 0 {
		var err error
		if last, err = HighMark(ctx, h.db); err != nil {
			return false
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) > 0 {
		return false
	}
	h.cursor = max(h.cursor, last)
	return true
}
