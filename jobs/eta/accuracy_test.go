package eta

import (
	"container/heap"
	"testing"
	"time"
)

// pool is a simulated worker pool in its steady state: every worker busy, the running jobs
// started at even intervals, so that one ends every run/workers, and (with an RPM) starts no
// closer than 60 s / RPM apart. start gives the moment each queued job, in River's order,
// takes a worker.
type pool struct {
	workers int
	run     time.Duration
	rpm     int
}

// freeAt is a min-heap of the moments the workers become free.
type freeAt []time.Duration

func (h freeAt) Len() int           { return len(h) }
func (h freeAt) Less(i, j int) bool { return h[i] < h[j] }
func (h freeAt) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *freeAt) Push(x any)        { *h = append(*h, x.(time.Duration)) }
func (h *freeAt) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// starts simulates n queued jobs through the pool and returns when each starts.
func (p pool) starts(n int) []time.Duration {
	free := make(freeAt, p.workers)
	for k := range free {
		free[k] = p.run * time.Duration(k+1) / time.Duration(p.workers)
	}
	heap.Init(&free)
	var spacing, last time.Duration
	if p.rpm > 0 {
		spacing = time.Minute / time.Duration(p.rpm)
	}
	out := make([]time.Duration, n)
	for i := range out {
		at := max(heap.Pop(&free).(time.Duration), last+spacing)
		out[i], last = at, at
		heap.Push(&free, at+p.run)
	}
	return out
}

// TestETAMatchesASimulatedPool: the estimate of a queued job, given the place the queries
// count and the run time and running jobs a sample measured, is when a pool of that many
// workers running jobs of that length would start it, rounded up to the second. The pool is
// simulated job by job, so the test checks the estimator's arithmetic against known durations
// rather than against the speed of the machine it runs on.
func TestETAMatchesASimulatedPool(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		pool pool
		jobs int
	}{
		{"ten workers, one-second prompts", pool{workers: 10, run: time.Second}, 200},
		{"three workers, two-second prompts", pool{workers: 3, run: 2 * time.Second}, 60},
		{"one worker, five-second prompts", pool{workers: 1, run: 5 * time.Second}, 20},
		{"forty workers, quarter-second prompts", pool{workers: 40, run: 250 * time.Millisecond}, 500},
		{"the provider's RPM below the pool's rate", pool{workers: 10, run: time.Second, rpm: 120}, 100},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := testEstimator(t, Config{ProviderRPM: c.pool.rpm})
			sample := rateSample{running: c.pool.workers, meanRun: c.pool.run}
			now := time.Now()
			for i, want := range c.pool.starts(c.jobs) {
				got, ok := e.estimate(etaRow{State: stateQueued, CreatedAt: now, ScheduledAt: now, Now: now,
					Counted: true, Ahead: i, AheadOrg: i}, sample, 0)
				if !ok || !got.Starts {
					t.Fatalf("job %d: %+v %v, want a start", i, got, ok)
				}
				if got.Seconds != ceilSeconds(want) {
					t.Fatalf("job %d (%d ahead): estimated %d s, the pool starts it at %v", i, i, got.Seconds, want)
				}
			}
		})
	}
}
