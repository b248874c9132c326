package handlers

import (
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// connGuard is the listener the server serves on. It does two things the transport does not do
// well by itself:
//
//   - It caps the open connections of one client address (Limits.MaxConnsPerIP): the next one
//     is answered 429 and closed before any request is read. (fasthttp's own MaxConnsPerIP
//     counts IPv4 only and, in the version used, closes a connection twice at shutdown.)
//   - Lingering close: the transport answers a body over BodyLimit as soon as it sees the
//     Content-Length (or the chunk that crosses it) and closes the connection without reading
//     the rest. A socket closed with unread data answers the client's next write with a reset,
//     which can destroy the 413 before the client reads it. So a closed connection first sends
//     its FIN, then discards what the client still sends for a short while (bounded in time and
//     bytes), then closes for good, off the server's goroutine.
type connGuard struct {
	net.Listener
	max int
	log *slog.Logger
	// writeTimeout is every connection's write deadline (Limits.WriteTimeout; see
	// guardedConn.Write).
	writeTimeout time.Duration

	mu     sync.Mutex
	open   map[string]int
	warned time.Time
}

const (
	lingerTimeout = 2 * time.Second
	lingerMax     = 8 << 20
)

// tooManyConnsBody is the problem document answered to a connection over the cap.
const tooManyConnsBody = `{"type":"about:blank","title":"Too Many Requests","status":429,` +
	`"detail":"too many open connections from your address; reuse one"}` + "\n"

// tooManyConns is the whole answer to a connection over the cap.
var tooManyConns = "HTTP/1.1 429 Too Many Requests\r\nContent-Type: application/problem+json\r\n" +
	"Retry-After: 1\r\nConnection: close\r\nContent-Length: " + strconv.Itoa(len(tooManyConnsBody)) +
	"\r\n\r\n" + tooManyConnsBody

func newConnGuard(ln net.Listener, maxPerIP int, writeTimeout time.Duration, log *slog.Logger) *connGuard {
	return &connGuard{Listener: ln, max: maxPerIP, writeTimeout: writeTimeout, log: log, open: map[string]int{}}
}

// Accept returns the next connection whose address is under its cap.
func (g *connGuard) Accept() (net.Conn, error) {
	for {
		c, err := g.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		if !g.register(ip) {
			_ = c.SetWriteDeadline(time.Now().Add(time.Second))
			_, _ = io.WriteString(c, tooManyConns)
			(&guardedConn{Conn: c}).closeLingering()
			continue
		}
		gc := &guardedConn{Conn: c, release: func() { g.unregister(ip) }, connTimeout: g.writeTimeout}
		gc.writeTimeout.Store(int64(g.writeTimeout))
		return gc, nil
	}
}

func (g *connGuard) register(ip string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open[ip] >= g.max {
		if time.Since(g.warned) > time.Minute {
			g.warned = time.Now()
			g.log.Warn("connection refused: too many open connections from one address", "addr", ip, "max", g.max)
		}
		return false
	}
	g.open[ip]++
	return true
}

func (g *connGuard) unregister(ip string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.open[ip] <= 1 {
		delete(g.open, ip)
	} else {
		g.open[ip]--
	}
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	return c.RemoteAddr().String()
}

// openConns is how many connections of ip are open.
func (g *connGuard) openConns(ip string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.open[ip]
}

// guardedConn releases its address's slot once, when it is first closed, and gives every write
// a deadline (conn_write_deadline.go).
type guardedConn struct {
	net.Conn
	release func()
	once    sync.Once
	// writeTimeout is the deadline of each write in nanoseconds (0: none): connTimeout, or a
	// stream's own while it runs.
	writeTimeout atomic.Int64
	connTimeout  time.Duration
}

// Close releases the slot and closes lingering; closing twice is harmless.
func (c *guardedConn) Close() error {
	c.once.Do(func() {
		if c.release != nil {
			c.release()
		}
		c.closeLingering()
	})
	return nil
}

func (c *guardedConn) closeLingering() {
	tc, ok := c.Conn.(*net.TCPConn)
	if !ok || tc.CloseWrite() != nil {
		_ = c.Conn.Close()
		return
	}
	go func() {
		_ = tc.SetReadDeadline(time.Now().Add(lingerTimeout))
		_, _ = io.CopyN(io.Discard, tc, lingerMax)
		_ = tc.Close()
	}()
}
