package handlers

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestReadyzCachesItsCheck: /readyz, which anyone may call, runs its database check at most once
// a second whatever the number of calls (concurrent ones included), and checks again once the
// second has passed.
func TestReadyzCachesItsCheck(t *testing.T) {
	t.Parallel()
	var checks atomic.Int64
	e := newTestEnv(t, Deps{Ready: func(context.Context) error { checks.Add(1); return nil }})
	var mu sync.Mutex
	clock := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	e.srv.ready.now = func() time.Time { mu.Lock(); defer mu.Unlock(); return clock }
	var wg sync.WaitGroup
	for i := 0; i < 40; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := e.srv.App().Test(get("/readyz"), -1)
			if err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("readyz: %v %v", resp, err)
			}
		}()
	}
	wg.Wait()
	if n := checks.Load(); n != 1 {
		t.Fatalf("40 calls within a second ran %d checks, want 1", n)
	}
	mu.Lock()
	clock = clock.Add(999 * time.Millisecond)
	mu.Unlock()
	e.do(t, get("/readyz"))
	if n := checks.Load(); n != 1 {
		t.Fatalf("a call 999 ms later ran a check (%d)", n)
	}
	mu.Lock()
	clock = clock.Add(time.Millisecond)
	mu.Unlock()
	e.do(t, get("/readyz"))
	if n := checks.Load(); n != 2 {
		t.Fatalf("a call a second later ran %d checks in all, want 2", n)
	}
}
