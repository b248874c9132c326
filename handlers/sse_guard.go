package handlers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/identity"
)

// Defaults of StreamConfig, the limits that keep streams from exhausting a server process.
const (
	DefaultMaxStreamsPerUser  = 16
	DefaultStreamWriteTimeout = 30 * time.Second
	DefaultStreamRecheckEvery = 10 * time.Second
	// maxStreamRecheckEvery keeps the promise that a stream ends within 30 s of its credential.
	maxStreamRecheckEvery = 20 * time.Second
	// streamRecheckTimeout bounds one credential lookup of a stream.
	streamRecheckTimeout = 5 * time.Second
)

// StreamConfig bounds the server's SSE streams. The zero value of a field means its default.
type StreamConfig struct {
	// MaxPerUser is how many streams one user may hold open in this process at once; the next
	// one answers 429 (ASTERION_MAX_STREAMS_PER_USER, default 16).
	MaxPerUser int
	// WriteTimeout closes a stream whose reader stopped taking its data for this long
	// (default 30 s).
	WriteTimeout time.Duration
	// RecheckEvery is how often a stream looks its session or token up again, so that it ends
	// soon after sign-out, session expiry, token revocation or a disabled user (default 10 s,
	// at most 20 s).
	RecheckEvery time.Duration
	// heartbeat overrides SSEHeartbeat (tests: a closed client is seen at the next write).
	heartbeat time.Duration
}

// Validate rejects values that are not a default (zero) or a usable setting.
func (c StreamConfig) Validate() error {
	var errs []error
	if c.MaxPerUser < 0 || c.MaxPerUser > 10000 {
		errs = append(errs, fmt.Errorf("streams per user: want 1..10000, got %d", c.MaxPerUser))
	}
	if c.WriteTimeout < 0 {
		errs = append(errs, fmt.Errorf("stream write timeout: want a positive duration, got %v", c.WriteTimeout))
	}
	if c.RecheckEvery < 0 || c.RecheckEvery > maxStreamRecheckEvery {
		errs = append(errs, fmt.Errorf("stream credential recheck: want a positive duration up to %v, got %v",
			maxStreamRecheckEvery, c.RecheckEvery))
	}
	return errors.Join(errs...)
}

func (c StreamConfig) withDefaults() StreamConfig {
	if c.MaxPerUser == 0 {
		c.MaxPerUser = DefaultMaxStreamsPerUser
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultStreamWriteTimeout
	}
	if c.RecheckEvery == 0 {
		c.RecheckEvery = DefaultStreamRecheckEvery
	}
	if c.heartbeat == 0 {
		c.heartbeat = SSEHeartbeat
	}
	return c
}

// streamGuard holds what every stream of one server shares: the configuration and the count
// of open streams per user.
type streamGuard struct {
	cfg StreamConfig

	mu   sync.Mutex
	open map[int64]int
	// changed is closed (and replaced) whenever a count changes, for tests that wait for one.
	changed chan struct{}
	// writerHook, when set, runs in every stream's writer goroutine before it starts (tests
	// inject a panic through it).
	writerHook atomic.Pointer[func()]
}

// newStreamGuard returns the guard of cfg, which must be valid.
func newStreamGuard(cfg StreamConfig) *streamGuard {
	if err := cfg.Validate(); err != nil {
		panic(fmt.Sprintf("handlers: invalid StreamConfig: %v", err))
	}
	return &streamGuard{cfg: cfg.withDefaults(), open: map[int64]int{}, changed: make(chan struct{})}
}

// acquire takes one of user's stream slots; false when all are taken.
func (g *streamGuard) acquire(user int64) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open[user] >= g.cfg.MaxPerUser {
		return false
	}
	g.open[user]++
	g.notifyLocked()
	return true
}

// release gives back a slot taken by acquire.
func (g *streamGuard) release(user int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open[user]--; g.open[user] <= 0 {
		delete(g.open, user)
	}
	g.notifyLocked()
}

func (g *streamGuard) notifyLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}

// count returns how many streams user holds open, and a channel closed at the next change.
func (g *streamGuard) count(user int64) (int, <-chan struct{}) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open[user], g.changed
}

// errCredentialEnded ends a stream whose session or token no longer admits its user.
var errCredentialEnded = errors.New("the stream's credential no longer admits its user")

// streamCredential returns a check that looks the request's credential up again, through the
// identity service's own lookups, and fails once it no longer names the same user with the
// same role and org. It reads the credential from c now: the stream outlives c.
func (s *Server) streamCredential(c *fiber.Ctx) func(ctx context.Context) error {
	ids := s.deps.Identity
	if ids == nil {
		return nil
	}
	want := principalOf(c)
	same := func(p identity.Principal, err error) error {
		if errors.Is(err, identity.ErrUnauthenticated) {
			return errCredentialEnded
		}
		if err != nil {
			return fmt.Errorf("recheck the stream's credential: %w", err)
		}
		if p.UserID != want.UserID || p.OrgID != want.OrgID || p.Role != want.Role {
			return errCredentialEnded
		}
		return nil
	}
	// The authorize middleware chose the credential the same way: a bearer token when the
	// Authorization header is present, else the session cookie.
	if h := c.Get(fiber.HeaderAuthorization); h != "" {
		tok := strings.Clone(strings.TrimSpace(strings.TrimPrefix(h, "Bearer ")))
		return func(ctx context.Context) error {
			return same(ids.AuthenticateToken(ctx, tok))
		}
	}
	cookie := strings.Clone(c.Cookies(sessionCookie))
	return func(ctx context.Context) error {
		p, _, err := ids.SessionPrincipal(ctx, cookie)
		return same(p, err)
	}
}

// deadlineWriter passes a stream's bytes on to fasthttp's writer, which hands them to the
// goroutine that writes the connection, and moves the connection's write deadline before each
// write: while the reader takes data the deadline keeps moving; once it stops, the
// connection's write blocks, fasthttp's writer blocks behind it, the deadline stays where the
// last write left it, and the connection fails with a timeout that ends the stream. On the
// server's own connections (guardedConn) every write of the connection moves the deadline too,
// with the stream's timeout while the stream runs (useStreamWriteTimeout): the two agree.
type deadlineWriter struct {
	w       *bufio.Writer
	conn    net.Conn
	timeout time.Duration
}

func (d *deadlineWriter) Write(p []byte) (int, error) {
	if d.conn != nil {
		if err := d.conn.SetWriteDeadline(time.Now().Add(d.timeout)); err != nil {
			return 0, fmt.Errorf("set the stream's write deadline: %w", err)
		}
	}
	n, err := d.w.Write(p)
	if err == nil {
		err = d.w.Flush()
	}
	return n, err
}

// clear removes the deadline once the stream ends: the connection may serve the client's
// next request, which must not inherit it.
func (d *deadlineWriter) clear() {
	if d.conn != nil {
		_ = d.conn.SetWriteDeadline(time.Time{})
	}
}
