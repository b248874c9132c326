package eta_test

import (
	"context"
	"testing"

	"asterion/jobs"
	"asterion/jobs/jobstest"
)

// TestArrivalPlacesEachSubmitBehindTheQueue: the estimate a 202 carries places each new job
// behind every queued job of its band and of the bands before it, without a read of its own
// per submit, and agrees with the estimate read from the job's place afterwards. With no
// worker and no run measured yet, each job ahead costs the default run of 2 s.
func TestArrivalPlacesEachSubmitBehindTheQueue(t *testing.T) {
	t.Parallel()
	e := jobstest.NewEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	urgent := 0
	var last jobs.Submitted
	for i, c := range []struct {
		priority *int
		want     int
	}{
		{nil, 0}, {nil, 2}, {nil, 4}, {nil, 6}, {nil, 8},
		// An urgent job is ahead of every default one.
		{&urgent, 0},
		// A default one is behind all six.
		{nil, 12},
	} {
		last = e.Submit("arrival", func(r *jobs.SubmitRequest) { r.Priority = c.priority })
		if last.ETA == nil || !last.ETA.Starts || last.ETA.Seconds != c.want {
			t.Fatalf("submit %d: ETA %+v, want a start in %d s", i, last.ETA, c.want)
		}
	}
	read, ok, err := e.S.ETAs().Job(ctx, last.JobID)
	if err != nil || !ok || read.Seconds != last.ETA.Seconds {
		t.Errorf("the job's place read gives %+v (%v, %v), the 202 gave %+v", read, ok, err, *last.ETA)
	}
	// A replayed submission carries no estimate made now: its job may have moved on.
	first := e.Submit("keyed", func(r *jobs.SubmitRequest) { r.IdempotencyKey = "k-1" })
	again := e.Submit("keyed", func(r *jobs.SubmitRequest) { r.IdempotencyKey = "k-1" })
	if first.ETA == nil || !again.Replayed || again.ETA != nil {
		t.Errorf("keyed submit ETA %+v; replay %+v (replayed %v)", first.ETA, again.ETA, again.Replayed)
	}
}
