package feed

import (
	"encoding/json"
	"testing"
	"time"

	"asterion/db/dbtest"
)

func TestNextProbeGap(t *testing.T) {
	t.Parallel()
	const every, idle = 10 * time.Millisecond, 100 * time.Millisecond
	for _, tc := range []struct {
		gap   time.Duration
		found bool
		want  time.Duration
	}{
		{every, false, 20 * time.Millisecond},
		{40 * time.Millisecond, false, 80 * time.Millisecond},
		{80 * time.Millisecond, false, idle},
		{idle, false, idle},
		{idle, true, every},
		{20 * time.Millisecond, true, every},
	} {
		if got := nextProbeGap(tc.gap, every, idle, tc.found); got != tc.want {
			t.Errorf("after a gap of %s (found %v): %s, want %s", tc.gap, tc.found, got, tc.want)
		}
	}
	// A probe stretched beyond the idle gap (as tests do) stays where it was set.
	if got := nextProbeGap(time.Hour, time.Hour, idle, false); got != time.Hour {
		t.Errorf("stretched probe: %s, want 1h", got)
	}
}

// TestIdleHubStillNumbersEventsOfWritersWithoutAHub: once the probe has slowed to its idle gap
// (enough empty probes in a row), an event committed without a poke (as run-worker and the
// command line commit theirs) is still numbered and delivered, with the catch-up tick stretched
// to an hour so only the probe can have found it. How soon is the idle gap's business (about a
// tenth of a second), a latency the benchmarks measure, not this test.
func TestIdleHubStillNumbersEventsOfWritersWithoutAHub(t *testing.T) {
	t.Parallel()
	h, d, ctx := startHub(t, func(h *Hub) { h.tickEvery = time.Hour })
	sub := h.Subscribe(Scope{AllOrgs: true}, 10)
	// 10, 20, 40, 80 ms, then the idle gap: eight empty probes are past the slowdown.
	before := h.idleProbes.Load()
	dbtest.WaitFor(t, 20*time.Second, "the probe to slow to its idle gap", func() bool { return h.idleProbes.Load() >= before+8 })
	payload, _ := json.Marshal(map[string]string{"label": "foreign"})
	if err := Publish(ctx, d.Bun, Event{Topic: TopicJob, OrgID: 1, UserID: 1, Payload: payload}); err != nil {
		t.Fatal(err)
	}
	select {
	case e := <-sub.C:
		if e.Seq == 0 {
			t.Fatalf("delivered an unnumbered event: %+v", e)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("an idle hub did not number a foreign event")
	}
}
