package handlers

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testClock is a clock the test moves by hand.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTestCache(ttl time.Duration) (*cache[string, int], *testClock) {
	clock := &testClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	c := newCache[string, int](ttl)
	c.now = clock.now
	return c, clock
}

func TestCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("one load for concurrent callers", func(t *testing.T) {
		t.Parallel()
		c, _ := newTestCache(time.Second)
		var loads atomic.Int64
		release := make(chan struct{})
		started := make(chan struct{})
		load := func(context.Context) (int, error) {
			if loads.Add(1) == 1 {
				close(started)
			}
			<-release
			return 7, nil
		}
		const callers = 20
		var wg sync.WaitGroup
		results := make(chan int, callers)
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, _ := c.get(ctx, "k", load)
			results <- v
		}()
		<-started
		// The load is running: every later caller waits for it instead of loading again.
		for range callers - 1 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, _ := c.get(ctx, "k", load)
				results <- v
			}()
		}
		close(release)
		wg.Wait()
		close(results)
		for v := range results {
			if v != 7 {
				t.Fatalf("a caller got %d, want 7", v)
			}
		}
		if n := loads.Load(); n != 1 {
			t.Fatalf("%d loads for concurrent callers, want 1", n)
		}
	})

	t.Run("a result lives for its ttl", func(t *testing.T) {
		t.Parallel()
		c, clock := newTestCache(time.Second)
		n := 0
		load := func(context.Context) (int, error) { n++; return n, nil }
		if v, _ := c.get(ctx, "k", load); v != 1 {
			t.Fatalf("first get = %d, want 1", v)
		}
		clock.advance(999 * time.Millisecond)
		if v, _ := c.get(ctx, "k", load); v != 1 {
			t.Fatalf("get within the ttl = %d, want the cached 1", v)
		}
		if v, _ := c.get(ctx, "other", load); v != 2 {
			t.Fatalf("another key = %d, want its own load", v)
		}
		clock.advance(2 * time.Millisecond)
		if v, _ := c.get(ctx, "k", load); v != 3 {
			t.Fatalf("get after the ttl = %d, want a new load", v)
		}
	})

	t.Run("a failed load is not kept", func(t *testing.T) {
		t.Parallel()
		c, _ := newTestCache(time.Minute)
		boom := errors.New("boom")
		if _, err := c.get(ctx, "k", func(context.Context) (int, error) { return 0, boom }); !errors.Is(err, boom) {
			t.Fatalf("err = %v, want boom", err)
		}
		v, err := c.get(ctx, "k", func(context.Context) (int, error) { return 5, nil })
		if err != nil || v != 5 {
			t.Fatalf("get after a failure = %d, %v; want a new load's 5", v, err)
		}
	})

	t.Run("getFresh reloads a result older than notBefore", func(t *testing.T) {
		t.Parallel()
		c, clock := newTestCache(time.Minute)
		n := 0
		load := func(context.Context) (int, error) { n++; return n, nil }
		c.get(ctx, "k", load)
		loadedAt := clock.now()
		clock.advance(time.Millisecond)
		if v, _ := c.getFresh(ctx, "k", loadedAt, load); v != 1 {
			t.Fatalf("getFresh(notBefore = load start) = %d, want the cached 1", v)
		}
		if v, _ := c.getFresh(ctx, "k", clock.now(), load); v != 2 {
			t.Fatalf("getFresh(notBefore after the load) = %d, want a new load", v)
		}
	})

	t.Run("a waiting caller's cancellation leaves the load running", func(t *testing.T) {
		t.Parallel()
		c, _ := newTestCache(time.Minute)
		release := make(chan struct{})
		started := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			_, err := c.get(cctx, "k", func(lctx context.Context) (int, error) {
				cancel()
				close(started)
				<-release
				return 9, lctx.Err()
			})
			done <- err
		}()
		<-started
		wctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := c.get(wctx, "k", nil); !errors.Is(err, context.Canceled) {
			t.Fatalf("a cancelled waiter got %v, want context.Canceled", err)
		}
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("the load saw its starter's cancellation: %v", err)
		}
		if v, err := c.get(ctx, "k", nil); v != 9 || err != nil {
			t.Fatalf("cached result = %d, %v; want 9", v, err)
		}
	})

	t.Run("clear drops every result", func(t *testing.T) {
		t.Parallel()
		c, _ := newTestCache(time.Minute)
		n := 0
		load := func(context.Context) (int, error) { n++; return n, nil }
		c.get(ctx, "k", load)
		c.clear()
		if v, _ := c.get(ctx, "k", load); v != 2 {
			t.Fatalf("get after clear = %d, want a new load", v)
		}
	})

	t.Run("expired entries are swept", func(t *testing.T) {
		t.Parallel()
		c, clock := newTestCache(time.Second)
		for _, k := range []string{"a", "b", "c"} {
			c.get(ctx, k, func(context.Context) (int, error) { return 1, nil })
		}
		if n := c.len(); n != 3 {
			t.Fatalf("%d entries, want 3", n)
		}
		clock.advance(cacheSweepEvery + time.Second)
		c.get(ctx, "d", func(context.Context) (int, error) { return 1, nil })
		if n := c.len(); n != 1 {
			t.Fatalf("%d entries after the sweep, want only the new one", n)
		}
	})
}
