package handlers

import (
	"context"
	"sync"
	"time"
)

// cacheLoadTimeout bounds one load: it runs detached from the caller that started it, since
// other callers may be waiting for its result.
const cacheLoadTimeout = 10 * time.Second

// cacheSweepEvery is how often expired entries are dropped, so that keys that are never asked
// for again do not accumulate.
const cacheSweepEvery = 10 * time.Second

// cache runs a load once per key for every concurrent and later caller until the result is
// ttl old (single flight with a short TTL), so that many open pages reading the same figures
// cost one query. A failed load is not kept: the next caller loads again.
type cache[K comparable, V any] struct {
	ttl time.Duration
	// now is the clock (time.Now; tests move it).
	now func() time.Time

	mu    sync.Mutex
	calls map[K]*cacheCall[V]
	sweep time.Time
}

// cacheCall is one load and, once done is closed, its result.
type cacheCall[V any] struct {
	done    chan struct{}
	val     V
	err     error
	started time.Time
	// exp is when the result expires; zero while the load runs.
	exp time.Time
}

// newCache returns a cache whose results live for ttl.
func newCache[K comparable, V any](ttl time.Duration) *cache[K, V] {
	return &cache[K, V]{ttl: ttl, now: time.Now, calls: map[K]*cacheCall[V]{}}
}

// get returns the result of load for key: a running load's or an unexpired one's, else a new
// load's.
func (c *cache[K, V]) get(ctx context.Context, key K, load func(ctx context.Context) (V, error)) (V, error) {
	return c.getFresh(ctx, key, time.Time{}, load)
}

// getFresh is get, but reuses only a load that started at or after notBefore, so that a caller
// who learned of a change at notBefore sees it.
func (c *cache[K, V]) getFresh(ctx context.Context, key K, notBefore time.Time, load func(ctx context.Context) (V, error)) (V, error) {
	now := c.now()
	c.mu.Lock()
	if now.After(c.sweep) {
		for k, call := range c.calls {
			if !call.exp.IsZero() && now.After(call.exp) {
				delete(c.calls, k)
			}
		}
		c.sweep = now.Add(cacheSweepEvery)
	}
	if call, ok := c.calls[key]; ok && (call.exp.IsZero() || now.Before(call.exp)) && !call.started.Before(notBefore) {
		c.mu.Unlock()
		select {
		case <-call.done:
			return call.val, call.err
		case <-ctx.Done():
			var zero V
			return zero, ctx.Err()
		}
	}
	call := &cacheCall[V]{done: make(chan struct{}), started: now}
	c.calls[key] = call
	c.mu.Unlock()

	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cacheLoadTimeout)
	val, err := load(lctx)
	cancel()
	c.mu.Lock()
	call.val, call.err = val, err
	call.exp = c.now().Add(c.ttl)
	if err != nil && c.calls[key] == call {
		delete(c.calls, key)
	}
	c.mu.Unlock()
	close(call.done)
	return val, err
}

// clear drops every result, so that the next get loads again (tests, instead of waiting out
// the TTL).
func (c *cache[K, V]) clear() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = map[K]*cacheCall[V]{}
}

// len is the number of entries held (tests).
func (c *cache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}
