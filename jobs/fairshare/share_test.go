package fairshare_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/jobstest"
)

// TestFairShareCapHoldsNoOrgBehind: with ASTERION_ORG_MAX_RUNNING=3 and ten workers, org A's
// hundred one-second prompts never run more than three at once, and all ten of org B's,
// submitted behind them, finish within 8 s of their submit while A still has queued work.
func TestFairShareCapHoldsNoOrgBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.OrgMaxRunning = 3 })
	vb := e.otherOrg()
	most := sampleMostRunning(t, e, e.O)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 10)
	submitMany(t, e, e.V, 100, "org A's backlog #sim:latency=1s")
	submitted := time.Now()
	b := submitMany(t, e, vb, 10, "org B's prompt #sim:latency=1s")
	deadline := submitted.Add(8 * time.Second)
	for _, s := range b {
		jobstest.WaitFor(t, time.Until(deadline), "org B's prompts", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	t.Logf("org B's ten prompts finished %v after their submit", time.Since(submitted).Round(time.Millisecond))
	if n := countJobs(e, e.O, jobs.StateQueued); n == 0 {
		t.Errorf("org A had no queued work left when B's prompts were done: nothing was held behind")
	}
	if m := most.Load(); m > 3 || m < 1 {
		t.Errorf("org A ran %d jobs at once, its cap is 3", m)
	}
}

// TestFairShareWeight: with no cap, weights 2:1 and both orgs' backlogs queued, six workers
// finish about twice as many jobs of the weight-2 org over a window.
func TestFairShareWeight(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	vb := e.otherOrg()
	setShare(t, e, e.O, 2, false)
	submitMany(t, e, e.V, 90, "weight two #sim:latency=500ms")
	submitMany(t, e, vb, 90, "weight one #sim:latency=500ms")
	jobstest.StartRuntime(t, e.D.Pool, e.S, 6)
	done := func() int { return e.Count("SELECT count(*) FROM sa_job WHERE state = 'succeeded'") }
	// The window opens once the first round has finished, so both orgs run their share.
	jobstest.WaitFor(t, 20*time.Second, "a first round of jobs", func() bool { return done() >= 12 })
	var from time.Time
	if err := e.D.Bun.QueryRowContext(context.Background(), "SELECT now()").Scan(&from); err != nil {
		t.Fatal(err)
	}
	inWindow := func(org int64) int {
		return e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND state = 'succeeded' AND finished_at > ?", org, from)
	}
	jobstest.WaitFor(t, 30*time.Second, "48 jobs in the window", func() bool { return inWindow(e.O)+inWindow(vb.OrgID) >= 48 })
	a, b := inWindow(e.O), inWindow(vb.OrgID)
	if countJobs(e, e.O, jobs.StateQueued) == 0 || countJobs(e, vb.OrgID, jobs.StateQueued) == 0 {
		t.Fatalf("a backlog ran out inside the window (A %d, B %d finished): the window says nothing", a, b)
	}
	ratio := float64(a) / float64(max(b, 1))
	t.Logf("in the window the weight-2 org finished %d jobs, the weight-1 org %d (ratio %.2f)", a, b, ratio)
	if ratio < 1.6 || ratio > 2.5 {
		t.Errorf("finished %d:%d (ratio %.2f), want about 2:1 for weights 2:1", a, b, ratio)
	}
}

// TestFairShareNewPromptNotHeldBehindBacklog: with no cap, a new prompt of org B starts before
// org A's 500 jobs queued ahead of it have mostly run: the next free slot goes to the org with
// the fewest running jobs.
func TestFairShareNewPromptNotHeldBehindBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	vb := e.otherOrg()
	submitMany(t, e, e.V, 500, "org A's backlog #sim:latency=1s")
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4)
	jobstest.WaitFor(t, 10*time.Second, "org A filling the workers", func() bool { return countJobs(e, e.O, jobs.StateRunning) == 4 })
	submitted := time.Now()
	s := jobstest.Submit(t, e.S, vb, "org B's new prompt #sim:latency=10ms")
	jobstest.WaitFor(t, 30*time.Second, "org B's prompt to start", func() bool { return e.Job(s.JobID).StartedAt != nil })
	t.Logf("org B's prompt started %v after its submit, behind %d queued jobs of A", time.Since(submitted).Round(time.Millisecond),
		countJobs(e, e.O, jobs.StateQueued))
	if n := startedBefore(e, e.O, s.JobID); n > 20 {
		t.Errorf("%d jobs of org A started between B's submit and its start, want at most a round of the workers", n)
	}
}

// startedBefore counts org's jobs that started after the first round and before job did:
// those that took a slot the job was owed.
func startedBefore(e *tenv, org int64, job uuid.UUID) int {
	return e.Count(`SELECT count(*) FROM sa_job AS a, sa_job AS b WHERE b.id = ? AND a.org_id = ?
  AND a.started_at < b.started_at AND a.started_at > b.created_at`, job, org)
}

// TestOrgPausedHoldsItsJobs: a paused org's jobs stay queued, saying they wait for it, while
// another org's run; once resumed they all run, none lost.
func TestOrgPausedHoldsItsJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	vb := e.otherOrg()
	setShare(t, e, e.O, 1, true)
	paused := submitMany(t, e, e.V, 6, "paused org #sim:latency=50ms")
	others := submitMany(t, e, vb, 12, "running org #sim:latency=200ms")
	jobstest.StartRuntime(t, e.D.Pool, e.S, 3)
	for _, s := range others {
		jobstest.WaitFor(t, 20*time.Second, "the other org's jobs", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	jobstest.WaitFor(t, 10*time.Second, "the paused org's jobs to say why they wait", func() bool {
		return e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND state = 'queued' AND waiting_for = ?",
			e.O, jobs.WaitingOrgPaused) == len(paused)
	})
	if n := e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND started_at IS NOT NULL", e.O); n != 0 {
		t.Fatalf("%d jobs of the paused org started", n)
	}
	setShare(t, e, e.O, 1, false)
	for _, s := range paused {
		jobstest.WaitFor(t, 15*time.Second, "the resumed org's jobs", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	if n := e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND attempt <> 1", e.O); n != 0 {
		t.Errorf("%d jobs of the resumed org took more than one attempt", n)
	}
}

// TestFairShareBandAgreesWithRiverPriority: the database's asterion_band, by which a dispatch
// orders an org's jobs, is RiverPriority for every job priority.
func TestFairShareBandAgreesWithRiverPriority(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	for p := 0; p <= 100; p++ {
		var band int
		if err := e.D.Bun.QueryRowContext(context.Background(), "SELECT asterion_band(?::smallint)", p).Scan(&band); err != nil {
			t.Fatal(err)
		}
		if band != jobs.RiverPriority(p) {
			t.Fatalf("asterion_band(%d) = %d, RiverPriority says %d", p, band, jobs.RiverPriority(p))
		}
	}
}
