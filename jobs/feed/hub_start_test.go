package feed

import (
	"context"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// TestStopReturnsOnceTheHubHasStopped: the stop that Start returns comes back only after Run
// has returned, so every subscription is closed by then.
func TestStopReturnsOnceTheHubHasStopped(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	h := NewHub(d.Pool, d.Bun, nil)
	stop := h.Start(context.Background())
	select {
	case <-h.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("hub never ready")
	}
	sub := h.Subscribe(Scope{AllOrgs: true}, 1)
	stop()
	select {
	case _, ok := <-sub.C:
		if ok {
			t.Fatal("a stopped hub delivered an event")
		}
	default:
		t.Fatal("the subscription is still open after stop returned")
	}
}
