package handlers

import (
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/identity"
)

// A request held by Prefer: wait counts against its caller's stream limit while it waits. With
// the limit full (waiting submits, a waiting status GET and an SSE stream together), the next
// waiting submit and the next waiting status GET of that user are answered at once, as without
// the header (202, no Preference-Applied), while the held ones still wait; another user's wait
// is held as usual; and once the jobs run, every held request gets its 200 and its slot back.
func TestPreferWaitCountsAgainstStreamLimit(t *testing.T) {
	t.Parallel()
	const limit = 4
	f := startLiveServerWith(t, liveServerConfig{HoldWorkers: true, Streams: StreamConfig{MaxPerUser: limit}})
	a := f.user(t, "acme", "waiter", identity.RoleMember)
	b := f.user(t, "acme", "neighbour", identity.RoleMember)

	pending := f.submit(t, a, "to be watched")
	status := strings.TrimPrefix(mustDecode[struct {
		StatusHref string `json:"status_href"`
	}](t, pending.Operation).StatusHref, f.Base)

	var wg sync.WaitGroup
	held := make(chan liveResp, limit+1)
	hold := func(u liveUser, method, path string, body any) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			held <- f.do(t, method, path, u.Tok, body, "Prefer", "wait=60")
		}()
	}
	hold(a, "GET", status, nil)
	for i := range limit - 2 {
		hold(a, "POST", "/sa-core/v1/prompt", map[string]any{"prompt": "held " + string(rune('a'+i))})
	}
	f.openMission(t, a)
	f.waitStreams(t, a.ID, limit, 10*time.Second)
	hold(b, "POST", "/sa-core/v1/prompt", map[string]any{"prompt": "the neighbour's"})
	f.waitStreams(t, b.ID, 1, 10*time.Second)

	r := f.do(t, "POST", "/sa-core/v1/prompt", a.Tok, map[string]any{"prompt": "one too many"}, "Prefer", "wait=60")
	if r.StatusCode != http.StatusAccepted || r.Header.Get("Preference-Applied") != "" {
		t.Errorf("a waiting submit over the limit: %s (Preference-Applied %q), want 202 at once",
			r, r.Header.Get("Preference-Applied"))
	}
	r = f.do(t, "GET", status, a.Tok, nil, "Prefer", "wait=60")
	if r.StatusCode != http.StatusOK || r.Header.Get("Preference-Applied") != "" {
		t.Errorf("a waiting status GET over the limit: %s, want its document at once", r)
	}
	select {
	case r := <-held:
		t.Fatalf("a held request was answered before its job ran: %s", r)
	default:
	}
	if n, _ := f.Server.streams.count(a.ID); n != limit {
		t.Errorf("the refused waits changed the count to %d", n)
	}

	f.StartWorkers(t)
	wg.Wait()
	close(held)
	for r := range held {
		if r.StatusCode != http.StatusOK || !strings.HasPrefix(r.Header.Get("Preference-Applied"), "wait=") {
			t.Errorf("a held request once its job ran: %s", r)
		}
	}
	f.waitStreams(t, b.ID, 0, 10*time.Second)
	f.waitStreams(t, a.ID, 1, 10*time.Second) // the SSE stream is still open
}
