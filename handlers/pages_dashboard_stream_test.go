package handlers

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"asterion/db"
	"asterion/jobs/feed"
)

// dashEvent is one event of a dashboard stream.
type dashEvent struct{ name, data string }

// dashStream is a dashboard page's stream as u reads it, through the package's one SSE reader.
type dashStream struct{ *sseStream }

// openDashStream opens an SSE stream as u; it closes when the test ends.
func openDashStream(t *testing.T, e *dashEnv, u *dashUser, path string) *dashStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.Base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/event-stream")
	req.AddCookie(&http.Cookie{Name: sessionCookie, Value: u.cookie})
	resp, err := noRedirect.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("open %s: %d %s %.300s", path, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	s := &dashStream{readSSE(resp, cancel)}
	t.Cleanup(s.Close)
	return s
}

// next returns the next event within timeout (comments skipped).
func (s *dashStream) next(t *testing.T, timeout time.Duration) dashEvent {
	t.Helper()
	ev, ok := s.nextEvent(time.Now().Add(timeout))
	if !ok {
		t.Fatalf("no event within %v (or the stream ended)", timeout)
	}
	return dashEvent{name: ev.Name, data: ev.Data}
}

// waitFor reads events until one satisfies ok.
func (s *dashStream) waitFor(t *testing.T, what string, timeout time.Duration, ok func(dashEvent) bool) dashEvent {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ev, open := s.nextEvent(deadline)
		if !open {
			t.Fatalf("no %s within %v (or the stream ended)", what, timeout)
		}
		if d := (dashEvent{name: ev.Name, data: ev.Data}); ok(d) {
			return d
		}
	}
}

// TestDashboardLiveListKeepsItsSize: once a live list holds its cap of rows, new matching rows
// are counted in a notice linking to the newest page instead of being prepended.
func TestDashboardLiveListKeepsItsSize(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	srv := New(e.Deps)
	p, _, err := e.IDs.SessionPrincipal(context.Background(), f.opA.cookie)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	q := srv.parseOpsQuery(ctx, p, func(string) string { return "" }, time.Now())
	st := &listStreamer[db.Operation]{s: srv, v: viewerOf(p), list: opsLiveList{s: srv, p: p, v: viewerOf(p), q: q}, rowCap: 1}
	var buf strings.Builder
	w := bufio.NewWriter(&buf)
	if err := st.snapshot(ctx, w); err != nil {
		t.Fatal(err)
	}
	sub := e.submit(t, f.member, "one too many")
	ev := feed.Event{Seq: 1 << 40, Topic: feed.TopicJob, OrgID: f.opA.orgID, OperationID: &sub.Operation.OperationID,
		Payload: []byte(`{"state":"queued","operation_status":"pending"}`)}
	buf.Reset()
	w.Reset(&buf)
	for i := 0; i < 2; i++ {
		if err := st.event(ctx, w, ev); err != nil {
			t.Fatal(err)
		}
	}
	w.Flush()
	out := buf.String()
	wantNotContains(t, out, "afterbegin", "row prepended past the cap")
	wantContains(t, out, `id="ops-newer" hx-swap-oob="true"`, "newer notice")
	wantContains(t, out, "2 newer rows match the filter.", "newer count")
	// A change of a row on the page still swaps in place.
	ev.OperationID = &f.subA.Operation.OperationID
	buf.Reset()
	w.Reset(&buf)
	if err := st.event(ctx, w, ev); err != nil {
		t.Fatal(err)
	}
	w.Flush()
	wantContains(t, buf.String(), `<tr id="op-`+f.opIDA+`" data-status="pending"`, "row swap")
}
