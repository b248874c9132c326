package feed

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// TestPokeNumbersAndDeliversAtOnce: with the probe and the catch-up tick stretched to an hour,
// an event committed by this process reaches a subscriber only because of the poke that
// follows its commit; a poke soon after another is served too (paced, not dropped).
func TestPokeNumbersAndDeliversAtOnce(t *testing.T) {
	t.Parallel()
	h, d, ctx := startQuietHub(t)
	sub := h.Subscribe(Scope{AllOrgs: true}, 10)
	publishOne := func(label string) {
		t.Helper()
		payload, _ := json.Marshal(map[string]string{"label": label})
		if err := Publish(ctx, d.Bun, Event{Topic: TopicJob, OrgID: 1, UserID: 1, Payload: payload}); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(label string, within time.Duration) {
		t.Helper()
		select {
		case e := <-sub.C:
			var p map[string]string
			if err := json.Unmarshal(e.Payload, &p); err != nil || p["label"] != label {
				t.Fatalf("got %s, want %s", e.Payload, label)
			}
		case <-time.After(within):
			t.Fatalf("event %s not delivered within %s", label, within)
		}
	}
	// The hub catches up once when it starts listening; a first poked event proves that is
	// behind it (and that a poke delivers), so what follows is numbered only on request.
	publishOne("first")
	h.Poke()
	wait("first", 5*time.Second)
	// The start-up catch-up may have delivered the first event; then the poke's own run may
	// still be to come (paced), and would number the next event: wait for it to be served.
	dbtest.WaitFor(t, 5*time.Second, "the first poke to be served", func() bool { return h.pokesServed.Load() >= 1 })
	publishOne("unpoked")
	// A kick makes the loop deliver whatever is numbered; once it has served one, the loop had
	// its chance, and the unpoked event must still not be delivered.
	served := h.kicksServed.Load()
	signal(h.kick)
	dbtest.WaitFor(t, 5*time.Second, "the hub's loop to serve a kick", func() bool { return h.kicksServed.Load() > served })
	select {
	case e := <-sub.C:
		t.Fatalf("an event was delivered without a poke, probe or tick: %s", e.Payload)
	default:
	}
	h.Poke()
	wait("unpoked", 5*time.Second)
	publishOne("second")
	h.Poke()
	publishOne("third")
	h.Poke() // within pokeGap of the previous run: served by a paced run
	wait("second", 5*time.Second)
	wait("third", 5*time.Second)
}

// startQuietHub runs a hub on a fresh database with its probe and catch-up tick stretched to an
// hour, so only pokes (and its start-up catch-up) number and deliver events; it stops with the
// test.
func startQuietHub(t *testing.T) (*Hub, *dbtest.DB, context.Context) {
	t.Helper()
	return startHub(t, func(h *Hub) { h.probeEvery, h.tickEvery = time.Hour, time.Hour })
}

// startHub runs a hub, set up by configure before it starts, on a fresh database; it stops
// with the test.
func startHub(t *testing.T, configure func(*Hub)) (*Hub, *dbtest.DB, context.Context) {
	t.Helper()
	d := dbtest.New(t)
	h := NewHub(d.Pool, d.Bun, nil)
	configure(h)
	return h, d, RunHub(t, h)
}

// RunHub runs h until the test ends, once it is ready, and returns the context it runs in.
// (Exported for the package's external tests.)
func RunHub(t *testing.T, h *Hub) context.Context {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(h.Start(ctx))
	t.Cleanup(cancel)
	select {
	case <-h.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("hub never ready")
	}
	return ctx
}
