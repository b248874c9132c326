package handlers

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/jobs/jobstest"
)

// bigAnswerServer serves New's application with a registry whose exposition is about size
// bytes, so that GET /metrics is an answer far larger than the sockets of both ends buffer.
func bigAnswerServer(t *testing.T, limits Limits, size int) (*Server, string) {
	t.Helper()
	reg := prometheus.NewRegistry()
	pad := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "asterion_test_padding", Help: "Bulk for a large answer."}, []string{"pad"})
	reg.MustRegister(pad)
	filler := strings.Repeat("x", 100)
	for i := range size / 150 {
		pad.WithLabelValues(fmt.Sprintf("%s%d", filler, i)).Set(1)
	}
	s := New(Deps{Registry: reg, Logger: testLogger(), Limits: limits})
	// A small send buffer (the accepted connections inherit it) keeps the answer needed to
	// fill both ends' buffers small.
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return s, ln.Addr().String()
}

// dialSmallWindow connects with a 4 KiB receive buffer, so that what the client does not read
// soon holds the server's writes.
func dialSmallWindow(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// openConns waits until s's listener holds n connections from loopback, or fails after within.
func waitOpenConns(t *testing.T, s *Server, n int, within time.Duration) {
	t.Helper()
	jobstest.WaitFor(t, within, fmt.Sprintf("%d open connections", n), func() bool {
		g := s.conns.Load()
		return g != nil && g.openConns("127.0.0.1") == n
	})
}

// A client that asks for a large answer and never reads it is cut off once a write cannot
// progress for the write deadline: the server closes the connection instead of holding it.
func TestUnreadAnswerIsDropped(t *testing.T) {
	t.Parallel()
	s, addr := bigAnswerServer(t, Limits{WriteTimeout: 300 * time.Millisecond}, 2<<20)
	conn := dialSmallWindow(t, addr)
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	waitOpenConns(t, s, 1, 10*time.Second)
	// From here on nothing reads the connection.
	start := time.Now()
	waitOpenConns(t, s, 0, 30*time.Second)
	t.Logf("the unread answer's connection closed %v after the request", time.Since(start).Round(time.Millisecond))
}

// The deadline is per write, not per answer: a reader that keeps taking a large answer slowly,
// for longer than the write deadline in all (4 KiB every 15 ms of a 1 MiB answer), gets all of
// it.
func TestSlowSteadyReaderGetsTheWholeAnswer(t *testing.T) {
	t.Parallel()
	const timeout = 3 * time.Second
	const size = 1 << 20
	_, addr := bigAnswerServer(t, Limits{WriteTimeout: timeout}, size)
	conn := dialSmallWindow(t, addr)
	if _, err := io.WriteString(conn, "GET /metrics HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReaderSize(conn, 4096), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 4<<10)
	total := 0
	for {
		n, err := resp.Body.Read(buf)
		total += n
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %d bytes in %v: %v", total, time.Since(start), err)
		}
		// The slow reader's pace is what the test is about; nothing waits on it.
		time.Sleep(15 * time.Millisecond)
	}
	if resp.StatusCode != http.StatusOK || total < size*9/10 {
		t.Fatalf("status %d, %d bytes", resp.StatusCode, total)
	}
	t.Logf("%d bytes in %v with a %v write deadline", total, time.Since(start).Round(time.Millisecond), timeout)
}

// An SSE stream on a server whose connection write deadline is short stays open as long as its
// reader reads, far past that deadline: the stream's writes move the deadline as they go.
func TestHealthyStreamOutlivesTheWriteDeadline(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveServerConfig{HoldWorkers: true, Streams: StreamConfig{heartbeat: 20 * time.Millisecond},
		Deps: func(_ *dbtest.DB, d *Deps) { d.Limits.WriteTimeout = 200 * time.Millisecond }})
	u := f.user(t, "acme", "listener", identity.RoleMember)
	s := f.openMission(t, u)
	start := time.Now()
	pings := 0
	for pings < 40 {
		e, ok := s.next(10 * time.Second)
		if !ok {
			t.Fatalf("the stream ended after %d heartbeats (%v)", pings, time.Since(start))
		}
		if e.Comment != "" {
			pings++
		}
	}
	t.Logf("%d heartbeats over %v with a 200ms connection write deadline", pings, time.Since(start).Round(time.Millisecond))
}
