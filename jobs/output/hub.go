package output

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/feed"
)

// HubConfig configures a Hub.
type HubConfig struct {
	// DB reads chunks back. Required.
	DB *bun.DB
	// Pool gives the hub its listening connection. Without one the hub delivers only the
	// chunks handed to Publish (a process alone with its workers, or a test).
	Pool *pgxpool.Pool
	// Tag is this process's writer tag: its announcements are skipped, since the writer hands
	// its chunks over directly. Empty: none skipped.
	Tag string
	// Logger receives connection losses. Default slog.Default().
	Logger *slog.Logger
	// Forget is how long the hub remembers the last chunk of a job it saw, to put chunks in
	// order. Default 15 minutes, above the longest execution.
	Forget time.Duration
}

func (c *HubConfig) validate() error {
	if c.DB == nil {
		return errors.New("output hub: DB is required")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Forget == 0 {
		c.Forget = 15 * time.Minute
	}
	if c.Forget < 0 {
		return errors.New("output hub: Forget is negative")
	}
	return nil
}

// Filter says which chunks a subscription receives.
type Filter struct {
	// Scope is the reader's visibility, the change feed's rule.
	Scope feed.Scope
	// JobID, when set, limits to one job.
	JobID uuid.UUID
}

// allows reports whether c passes f.
func (f Filter) allows(c db.OutputChunk) bool {
	if f.JobID != uuid.Nil && c.JobID != f.JobID {
		return false
	}
	scope := f.Scope
	scope.Topics = nil // a chunk is no change-feed event: only who may see it counts
	return scope.Allows(feed.Event{OrgID: c.OrgID, UserID: c.CreatedBy})
}

// Subscription receives chunks, in seq order per job attempt. When the reader falls behind,
// C is closed and Lagged reports true: the reader reads the table again after the last seq it
// saw.
type Subscription struct {
	C      <-chan db.OutputChunk
	c      chan db.OutputChunk
	filter Filter
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
	s.closeLocked()
}

func (s *Subscription) closeLocked() {
	if !s.closed {
		s.closed = true
		delete(s.hub.subs, s)
		close(s.c)
	}
}

// Hub fans chunks out to the subscribers of one process.
type Hub struct {
	cfg HubConfig

	mu   sync.Mutex
	subs map[*Subscription]struct{}

	// inbox holds batches waiting for the delivery loop; wake signals it.
	inboxMu sync.Mutex
	inbox   []batch
	wake    chan struct{}

	// last is the highest seq delivered per job attempt, for ordering (delivery loop only).
	last  map[attemptKey]lastSeen
	ready chan struct{}
	once  sync.Once
}

// batch is work for the delivery loop: chunks in hand, or a range to read.
type batch struct {
	chunks []db.OutputChunk
	lo, hi int64
}

type attemptKey struct {
	job     uuid.UUID
	attempt int
}

type lastSeen struct {
	seq int
	at  time.Time
}

// NewHub validates cfg and returns a hub; Run delivers.
func NewHub(cfg HubConfig) (*Hub, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Hub{cfg: cfg, subs: map[*Subscription]struct{}{}, wake: make(chan struct{}, 1),
		last: map[attemptKey]lastSeen{}, ready: make(chan struct{})}, nil
}

// Ready is closed once the hub listens for other processes' announcements.
func (h *Hub) Ready() <-chan struct{} { return h.ready }

// Subscribe returns a subscription with room for buffer chunks.
func (h *Hub) Subscribe(f Filter, buffer int) *Subscription {
	c := make(chan db.OutputChunk, max(buffer, 1))
	s := &Subscription{C: c, c: c, filter: f, hub: h}
	h.mu.Lock()
	h.subs[s] = struct{}{}
	h.mu.Unlock()
	return s
}

// Publish hands over chunks this process stored; the writer's Publish.
func (h *Hub) Publish(chunks []db.OutputChunk) { h.enqueue(batch{chunks: chunks}) }

func (h *Hub) enqueue(b batch) {
	h.inboxMu.Lock()
	h.inbox = append(h.inbox, b)
	h.inboxMu.Unlock()
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

// Run listens for announcements and delivers until ctx ends.
func (h *Hub) Run(ctx context.Context) error {
	if h.cfg.Pool != nil {
		go h.listenLoop(ctx)
	} else {
		h.once.Do(func() { close(h.ready) })
	}
	h.deliverLoop(ctx)
	return ctx.Err()
}

// Start runs the hub in the background and returns its stop.
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
		h.cfg.Logger.Warn("live output listener lost its connection, reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (h *Hub) listenOnce(ctx context.Context) error {
	conn, err := h.cfg.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// The connection carries LISTEN state; never hand it back to the pool.
		_ = conn.Conn().Close(context.Background())
		conn.Release()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	h.once.Do(func() { close(h.ready) })
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if lo, hi, tag, ok := parseAnnouncement(n.Payload); ok && (h.cfg.Tag == "" || tag != h.cfg.Tag) {
			h.enqueue(batch{lo: lo, hi: hi})
		}
	}
}

// parseAnnouncement reads "lo-hi tag".
func parseAnnouncement(p string) (lo, hi int64, tag string, ok bool) {
	span, tag, _ := strings.Cut(p, " ")
	loText, hiText, found := strings.Cut(span, "-")
	if !found {
		return 0, 0, "", false
	}
	lo, err1 := strconv.ParseInt(loText, 10, 64)
	hi, err2 := strconv.ParseInt(hiText, 10, 64)
	if err1 != nil || err2 != nil || lo > hi || lo < 1 {
		return 0, 0, "", false
	}
	return lo, hi, tag, true
}

func (h *Hub) deliverLoop(ctx context.Context) {
	forget := time.NewTicker(time.Minute)
	defer forget.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-forget.C:
			h.forgetOld(time.Now())
		case <-h.wake:
			h.inboxMu.Lock()
			work := h.inbox
			h.inbox = nil
			h.inboxMu.Unlock()
			for _, b := range work {
				h.handle(ctx, b)
			}
		}
	}
}

// handle delivers one batch, reading a range from the table first. The batch is put in order
// first and then handed to each subscriber whole, so a subscriber's writer finds the chunks
// of one flush queued together and sends them in one write.
func (h *Hub) handle(ctx context.Context, b batch) {
	chunks := b.chunks
	if chunks == nil {
		var err error
		if chunks, err = db.OutputRange(ctx, h.cfg.DB, b.lo, b.hi); err != nil {
			if ctx.Err() == nil {
				h.cfg.Logger.Warn("reading announced live output failed", "lo", b.lo, "hi", b.hi, "err", err)
			}
			return
		}
	}
	now := time.Now()
	ordered := make([]db.OutputChunk, 0, len(chunks))
	defer func() { h.fanOut(ordered) }()
	for _, c := range chunks {
		k := attemptKey{c.JobID, c.Attempt}
		prev := h.last[k] // an attempt not seen yet counts as delivered up to seq 0
		switch {
		case c.Seq <= prev.seq:
			continue // already delivered (announced twice, or read with a gap)
		case c.Seq > prev.seq+1:
			gap, err := db.OutputAfter(ctx, h.cfg.DB, c.JobID, c.Attempt, prev.seq, c.Seq-prev.seq-1)
			if err != nil {
				if ctx.Err() == nil {
					h.cfg.Logger.Warn("reading missing live output failed", "job_id", c.JobID, "err", err)
				}
				return
			}
			ordered = append(ordered, gap...)
		}
		h.last[k] = lastSeen{seq: c.Seq, at: now}
		ordered = append(ordered, c)
	}
}

// fanOut gives chunks, in order, to every subscriber that may see them; a full subscriber is
// dropped.
func (h *Hub) fanOut(chunks []db.OutputChunk) {
	if len(chunks) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		s.sendLocked(chunks)
	}
}

// sendLocked queues the chunks s may see; when s has no room left it is dropped for falling
// behind. The hub's lock is held.
func (s *Subscription) sendLocked(chunks []db.OutputChunk) {
	for _, c := range chunks {
		if !s.filter.allows(c) {
			continue
		}
		select {
		case s.c <- c:
		default:
			s.lagged = true
			s.closeLocked()
			return
		}
	}
}

// forgetOld drops the order of attempts not heard of for Forget.
func (h *Hub) forgetOld(now time.Time) {
	for k, v := range h.last {
		if now.Sub(v.at) > h.cfg.Forget {
			delete(h.last, k)
		}
	}
}
