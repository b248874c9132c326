package governor_test

import (
	"context"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/jobs/governor"
)

// TestHeldSaysWhatHoldsAModelNow: a model never seen and one merely paced are not held; a 429's
// Retry-After holds it for what remains of it; an operator's pause holds it until resumed, and
// a resume ends both.
func TestHeldSaysWhatHoldsAModelNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := newGovernor(t, dbtest.New(t), governor.Config{RPM: 6, Horizon: time.Minute})
	held := func(model string) governor.Hold {
		t.Helper()
		h, err := g.Held(ctx, model)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := held("never seen"); h != (governor.Hold{}) {
		t.Errorf("a model never seen: %+v, want no hold", h)
	}
	for i := 0; i < 3; i++ {
		reserve(t, g, "m", 1)
	}
	if h := held("m"); h != (governor.Hold{}) {
		t.Errorf("a model with slots granted ahead: %+v, want no hold (pacing is the slots' business)", h)
	}
	const retryAfter = 30 * time.Second
	if err := g.Observe(ctx, "m", governor.Observation{RateLimited: true, RetryAfter: retryAfter, HasRetryAfter: true}); err != nil {
		t.Fatal(err)
	}
	if h := held("m"); h.Paused || h.Wait <= 0 || h.Wait > retryAfter {
		t.Errorf("after a 429 with Retry-After %v: %+v, want a wait in (0, %v]", retryAfter, h, retryAfter)
	}
	if err := g.Pause(ctx, "m", governor.Pauser{Role: governor.RoleAdmin, Actor: "cli"}); err != nil {
		t.Fatal(err)
	}
	if h := held("m"); !h.Paused {
		t.Errorf("after an operator's pause: %+v, want paused", h)
	}
	if err := g.Resume(ctx, "m"); err != nil {
		t.Fatal(err)
	}
	if h := held("m"); h != (governor.Hold{}) {
		t.Errorf("after a resume: %+v, want no hold", h)
	}
}
