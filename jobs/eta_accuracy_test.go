package jobs_test

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// TestETAAccuracy: 200 one-second prompts behind 10 workers. Each job's estimate at submit
// (what its 202 handle carries) is compared with when it really started (started_at −
// created_at): the median ratio of estimated to actual is within 0.5–2. A first wave of ten
// runs before, so the run time is measured rather than assumed.
func TestETAAccuracy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 210 one-second prompts")
	}
	t.Parallel()
	e := newEnv(t, provider.NewSim(provider.SimConfig{}))
	jobstest.StartRuntime(t, e.D.Pool, e.S, 10)
	ctx := context.Background()
	var warm []uuid.UUID
	for i := range 10 {
		warm = append(warm, e.Submit(fmt.Sprintf("warm-up %d #sim:latency=1s", i)).JobID)
	}
	jobstest.WaitFor(t, 30*time.Second, "the warm-up wave", func() bool {
		for _, id := range warm {
			if e.Job(id).State != "succeeded" {
				return false
			}
		}
		return true
	})

	const n = 200
	ids := make([]uuid.UUID, n)
	etas := make([]int, n)
	for i := range n {
		sub := e.Submit(fmt.Sprintf("prompt %d #sim:latency=1s", i))
		eta, ok, err := e.S.ETAs().Job(ctx, sub.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			// Started and finished before it was asked: it waited nothing.
			eta = jobs.ETA{Starts: true}
		}
		ids[i], etas[i] = sub.JobID, eta.Seconds
	}
	jobstest.WaitFor(t, 2*time.Minute, "every prompt to succeed", func() bool {
		return e.Job(ids[n-1]).State == "succeeded"
	})
	var ratios []float64
	var waited []time.Duration
	for i, id := range ids {
		j := e.Job(id)
		if j.StartedAt == nil {
			jobstest.WaitFor(t, time.Minute, "prompt to start", func() bool { return e.Job(id).StartedAt != nil })
			j = e.Job(id)
		}
		actual := j.StartedAt.Sub(j.CreatedAt)
		waited = append(waited, actual)
		// The first wave starts at once: a ratio to a few milliseconds says nothing.
		if actual >= time.Second {
			ratios = append(ratios, float64(etas[i])/actual.Seconds())
		}
	}
	if len(ratios) < n/2 {
		t.Fatalf("only %d of %d prompts waited a second or more: the queue never built up", len(ratios), n)
	}
	sort.Float64s(ratios)
	median := ratios[len(ratios)/2]
	t.Logf("median estimated/actual %.2f over %d prompts (p10 %.2f, p90 %.2f); last prompt: estimated %d s, waited %v",
		median, len(ratios), ratios[len(ratios)/10], ratios[len(ratios)*9/10], etas[n-1], waited[n-1].Round(time.Millisecond))
	if median < 0.5 || median > 2 {
		t.Errorf("median estimated/actual start %.2f, want within 0.5–2", median)
	}
}
