package feed

import (
	"encoding/json"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// TestUnwatchedHubMovesItsCursorToTheHighMark: with nobody subscribed, the hub numbers events
// without handing them to anyone and still moves its cursor to the highest number, so a stream
// that starts from the cursor later gets the events after it and none before.
func TestUnwatchedHubMovesItsCursorToTheHighMark(t *testing.T) {
	t.Parallel()
	h, d, ctx := startQuietHub(t)
	publish := func(label string) {
		t.Helper()
		payload, _ := json.Marshal(map[string]string{"label": label})
		if err := Publish(ctx, d.Bun, Event{Topic: TopicJob, OrgID: 1, UserID: 1, Payload: payload}); err != nil {
			t.Fatal(err)
		}
		h.Poke()
	}
	for _, label := range []string{"a", "b", "c"} {
		publish(label)
	}
	dbtest.WaitFor(t, 10*time.Second, "the high mark and the cursor at 3 with nobody subscribed", func() bool {
		last, err := HighMark(ctx, d.Bun)
		if err != nil {
			t.Fatal(err)
		}
		return last == 3 && h.Cursor() == 3
	})
	sub := h.Subscribe(Scope{AllOrgs: true}, 10)
	defer sub.Close()
	publish("d")
	select {
	case e := <-sub.C:
		var p map[string]string
		if err := json.Unmarshal(e.Payload, &p); err != nil || p["label"] != "d" || e.Seq != 4 {
			t.Fatalf("first event to the subscriber: seq %d %s, want seq 4 labelled d", e.Seq, e.Payload)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("event published after subscribing never delivered")
	}
	// A fence: the hub delivers in order, so the next event is the fence unless an event
	// from before the subscription came late.
	publish("fence")
	select {
	case e := <-sub.C:
		var p map[string]string
		if err := json.Unmarshal(e.Payload, &p); err != nil || p["label"] != "fence" {
			t.Fatalf("unexpected second event seq %d %s, want the fence", e.Seq, e.Payload)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the fence published after the first event was never delivered")
	}
}

// TestAnnouncedHighMarkOnlyGrows: notifications may arrive out of order (two sequencers in two
// processes); the high mark a hub keeps from them never goes back.
func TestAnnouncedHighMarkOnlyGrows(t *testing.T) {
	t.Parallel()
	h := NewHub(nil, nil, nil)
	for _, seq := range []int64{5, 3, 9, 9, 7} {
		h.announce(seq)
	}
	if got := h.announced.Load(); got != 9 {
		t.Fatalf("announced high mark %d after 5, 3, 9, 9, 7; want 9", got)
	}
}
