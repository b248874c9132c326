package handlers

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"asterion/identity"
)

// waitStreams waits until user holds n open streams on f's server, or fails after timeout.
func (f *liveServer) waitStreams(t *testing.T, user int64, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		got, changed := f.Server.streams.count(user)
		if got == n {
			return
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("user %d holds %d open streams after %v, want %d", user, got, timeout, n)
		}
	}
}

// requireEnded requires the stream to end (its body reaches EOF) within timeout.
func requireEnded(t *testing.T, s *sseStream, timeout time.Duration) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-s.C:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("the stream is still open after %v", timeout)
		}
	}
}

func TestStreamConfigDefaultsAndValidation(t *testing.T) {
	t.Parallel()
	d := StreamConfig{}.withDefaults()
	if d.MaxPerUser != 16 || d.WriteTimeout != 30*time.Second || d.RecheckEvery != 10*time.Second {
		t.Errorf("defaults %+v: want 16 streams, a 30 s write deadline and a 10 s recheck", d)
	}
	for _, bad := range []StreamConfig{{MaxPerUser: -1}, {WriteTimeout: -time.Second}, {RecheckEvery: -time.Second},
		{RecheckEvery: 25 * time.Second}, {MaxPerUser: 10001}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v was accepted", bad)
		}
	}
	if err := (StreamConfig{MaxPerUser: 3, WriteTimeout: time.Second, RecheckEvery: time.Second}).Validate(); err != nil {
		t.Errorf("a good config was refused: %v", err)
	}
}

// The 17th stream of one user answers 429 with a problem document, whichever stream route it
// asks for; other users are not affected, and a closed stream frees its slot.
func TestStreamCapPerUser(t *testing.T) {
	t.Parallel()
	// A client that leaves is seen at the stream's next write: heartbeat often.
	f := startLiveServerWith(t, liveServerConfig{Streams: StreamConfig{heartbeat: 100 * time.Millisecond}})
	a := f.user(t, "acme", "streamer", identity.RoleMember)
	b := f.user(t, "acme", "neighbour", identity.RoleMember)
	streams := make([]*sseStream, 0, 16)
	for range 16 {
		streams = append(streams, f.openMission(t, a))
	}
	f.waitStreams(t, a.ID, 16, 5*time.Second)
	for _, path := range []string{eventsPath, "/mission/stream"} {
		r := f.do(t, "GET", path, a.Tok, nil, "Accept", "text/event-stream")
		checkProblem(t, r, http.StatusTooManyRequests)
		if r.Header.Get("Retry-After") == "" {
			t.Errorf("%s: the 429 has no Retry-After", path)
		}
	}
	f.openMission(t, b)
	streams[0].Close()
	f.waitStreams(t, a.ID, 15, 5*time.Second)
	f.openMission(t, a)
	f.waitStreams(t, a.ID, 16, 5*time.Second)
}

// seedEvents numbers n events of u of about size bytes each straight into the feed and
// returns the number before the first.
func (f *liveServer) seedEvents(t *testing.T, u liveUser, n, size int) int64 {
	t.Helper()
	ctx := context.Background()
	var base int64
	err := f.DB.Bun.QueryRowContext(ctx, `WITH c AS (UPDATE sa_event_cursor SET last_seq = last_seq + ? WHERE id = 1
		RETURNING last_seq - ? AS base), ins AS (
		INSERT INTO sa_event (seq, topic, org_id, user_id, payload)
		SELECT c.base + g, 'job', ?, ?, jsonb_build_object('state', 'queued', 'pad', repeat('x', ?))
		FROM c, generate_series(1, ?) AS g)
		SELECT base FROM c`, n, n, u.OrgID, u.ID, size, n).Scan(&base)
	if err != nil {
		t.Fatalf("seed %d events: %v", n, err)
	}
	return base
}

// A reader that stops reading is cut off once the write deadline passes: the server's writes
// block, the connection times out and the stream ends, its slot freed.
func TestStreamStalledReaderIsClosed(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveServerConfig{Streams: StreamConfig{WriteTimeout: 500 * time.Millisecond}})
	u := f.user(t, "acme", "staller", identity.RoleMember)
	// One small event first: a Last-Event-ID of 0 means none, and the stream would then start
	// at the hub's cursor, after the seeded events whenever the hub has already seen them (the
	// race that made this test fail on a loaded machine). After it, 32 MiB of replay: far more
	// than the socket buffers of both ends hold.
	f.seedEvents(t, u, 1, 16)
	base := f.seedEvents(t, u, 4000, 8<<10)
	if base == 0 {
		t.Fatal("the replay would start at event 0, which a stream reads as no Last-Event-ID")
	}
	d := net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	conn, err := d.Dial("tcp", strings.TrimPrefix(f.Base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer %s\r\nAccept: text/event-stream\r\nLast-Event-ID: %d\r\n\r\n",
		eventsPath, u.Tok, base)
	status, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil || !strings.Contains(status, " 200 ") {
		t.Fatalf("status line %q (%v), want 200", status, err)
	}
	// The 200 is the signal that the stream holds its slot: the slot is taken before the status
	// is written. Waiting to see the count at one instead races the stream's own end, which
	// on a loaded machine may come before the test looks. From here on nothing reads the
	// connection, so the slot is freed only by the write deadline cutting the stream off.
	f.waitStreams(t, u.ID, 0, 20*time.Second)
}

// A panic in a stream's writer goroutine ends that stream, not the process; the slot is freed
// and the server goes on answering.
func TestStreamWriterPanicEndsOnlyTheStream(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "acme", "panicky", identity.RoleMember)
	hook := func() { panic("injected stream writer panic") }
	f.Server.streams.writerHook.Store(&hook)
	s := f.openEvents(t, eventsPath, u.Tok)
	requireEnded(t, s, 5*time.Second)
	f.waitStreams(t, u.ID, 0, 5*time.Second)
	f.Server.streams.writerHook.Store(nil)
	if r := f.do(t, "GET", "/healthz", "", nil); r.StatusCode != http.StatusOK {
		t.Fatalf("healthz after the panic: %s", r)
	}
	f.openMission(t, u)
}

// liveSession signs name in through the identity service and returns its cookie and CSRF
// token.
func (f *liveServer) liveSession(t *testing.T, org, name string) (cookie, csrf string, id int64) {
	t.Helper()
	ctx := context.Background()
	if _, err := f.IDs.OrgByName(ctx, org); err != nil {
		if _, err := f.IDs.CreateOrg(ctx, org); err != nil {
			t.Fatal(err)
		}
	}
	u, err := f.IDs.CreateUser(ctx, org, name, identity.RoleMember, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	cookie, sess, _, err := f.IDs.Login(ctx, name, "correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	return cookie, sess.CSRFToken, u.ID
}

// Every way a credential ends closes the streams opened with it, within the recheck interval;
// a stream of another credential stays open.
func TestStreamsEndWithTheirCredential(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveServerConfig{Streams: StreamConfig{RecheckEvery: 200 * time.Millisecond}})
	bystander := f.user(t, "acme", "bystander", identity.RoleMember)
	f.openMission(t, bystander)
	within := 10 * time.Second

	t.Run("sign-out", func(t *testing.T) {
		cookie, csrf, id := f.liveSession(t, "acme", "leaver")
		hdr := []string{"Cookie", sessionCookie + "=" + cookie}
		s := f.openEvents(t, "/mission/stream", "", hdr...)
		f.waitStreams(t, id, 1, 5*time.Second)
		r := f.do(t, "POST", "/logout", "", "", append(hdr, "X-CSRF-Token", csrf, "Content-Type", "application/x-www-form-urlencoded")...)
		if r.StatusCode != http.StatusSeeOther && r.StatusCode != http.StatusOK {
			t.Fatalf("logout: %s", r)
		}
		requireEnded(t, s, within)
		f.waitStreams(t, id, 0, 5*time.Second)
	})
	t.Run("session expiry", func(t *testing.T) {
		cookie, _, id := f.liveSession(t, "acme", "expirer")
		s := f.openEvents(t, eventsPath, "", "Cookie", sessionCookie+"="+cookie)
		f.waitStreams(t, id, 1, 5*time.Second)
		if _, err := f.DB.Bun.ExecContext(context.Background(),
			`UPDATE sessions SET expires_at = now() - interval '1 second' WHERE user_id = ?`, id); err != nil {
			t.Fatal(err)
		}
		requireEnded(t, s, within)
		f.waitStreams(t, id, 0, 5*time.Second)
	})
	t.Run("token revoked", func(t *testing.T) {
		u := f.user(t, "acme", "revoked", identity.RoleMember)
		s := f.openEvents(t, eventsPath, u.Tok)
		d := f.openEvents(t, "/mission/stream", u.Tok)
		f.waitStreams(t, u.ID, 2, 5*time.Second)
		if err := f.IDs.RevokeToken(context.Background(), u.Tok); err != nil {
			t.Fatal(err)
		}
		requireEnded(t, s, within)
		requireEnded(t, d, within)
		f.waitStreams(t, u.ID, 0, 5*time.Second)
	})
	t.Run("user disabled", func(t *testing.T) {
		u := f.user(t, "acme", "disabled", identity.RoleMember)
		cookie, _, id := f.liveSession(t, "acme", "disabled-too")
		s := f.openEvents(t, eventsPath, u.Tok)
		d := f.openEvents(t, "/mission/stream", "", "Cookie", sessionCookie+"="+cookie)
		f.waitStreams(t, u.ID, 1, 5*time.Second)
		f.waitStreams(t, id, 1, 5*time.Second)
		if _, err := f.DB.Bun.ExecContext(context.Background(),
			`UPDATE users SET disabled_at = now() WHERE id IN (?, ?)`, u.ID, id); err != nil {
			t.Fatal(err)
		}
		requireEnded(t, s, within)
		requireEnded(t, d, within)
		f.waitStreams(t, u.ID, 0, 5*time.Second)
		f.waitStreams(t, id, 0, 5*time.Second)
	})
	if n, _ := f.Server.streams.count(bystander.ID); n != 1 {
		t.Errorf("the bystander's stream count is %d, want its one stream still open", n)
	}
}
