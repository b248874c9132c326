package jobs_test

import (
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/jobstest"
)

// TestPriorityCeiling: a worker with a priority ceiling runs only jobs at or under it; a job
// above it stays queued, never reaches the provider, is not spun through River in a tight
// loop, and runs as soon as an unrestricted worker is there.
func TestPriorityCeiling(t *testing.T) {
	t.Parallel()
	fake := newFake(nil)
	e := newEnv(t, fake)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2, func(c *jobs.RuntimeConfig) { c.PriorityCeiling = 40 })
	submitted := time.Now()
	high := e.Submit("bulk", func(r *jobs.SubmitRequest) { r.Priority = intp(41) })
	low := e.Submit("urgent", func(r *jobs.SubmitRequest) { r.Priority = intp(40) })
	e.WaitState(low.JobID, jobs.StateSucceeded, 20*time.Second)
	// The vehicle handed back three times is the signal that the restricted workers have seen
	// the job above their ceiling, and declined it, more than once.
	rid := *e.Job(high.JobID).RiverJobID
	var snoozes float64
	jobstest.WaitFor(t, 20*time.Second, "the vehicle above the ceiling to be handed back three times", func() bool {
		snoozes, _ = e.riverMeta(rid)["snoozes"].(float64)
		return snoozes >= 3
	})
	elapsed := time.Since(submitted)
	j := e.Job(high.JobID)
	if j.State != "queued" || j.WorkerClaim != nil || fake.callsFor(high.JobID) != 0 {
		t.Fatalf("a job above the ceiling ran: %+v", j)
	}
	// Not a tight loop: at most 50 hand-backs a second. A loaded machine only lowers the rate.
	if rate := snoozes / elapsed.Seconds(); rate > 50 {
		t.Fatalf("the vehicle above the ceiling was handed back %v times in %v", snoozes, elapsed)
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	j = e.WaitState(high.JobID, jobs.StateSucceeded, 20*time.Second)
	if j.Attempt != 1 || fake.callsFor(high.JobID) != 1 {
		t.Fatalf("after an unrestricted worker started: %+v, %d calls", j, fake.callsFor(high.JobID))
	}
}
