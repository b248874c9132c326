package jobs_test

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/provider"
	"asterion/jobs/usage"
)

// setShare writes an org's weight and pause as `asterion org set-weight` and a pause would.
func setShare(t testing.TB, e *tenv, org int64, weight int, paused bool) {
	t.Helper()
	if _, err := e.D.Bun.ExecContext(context.Background(), `INSERT INTO sa_org_share (org_id, weight, paused) VALUES (?, ?, ?)
ON CONFLICT (org_id) DO UPDATE SET weight = EXCLUDED.weight, paused = EXCLUDED.paused, updated_at = now()`,
		org, weight, paused); err != nil {
		t.Fatalf("set the share of org %d: %v", org, err)
	}
}

// submitMany submits n prompts of text as v from a few goroutines at once (so the intake
// groups them) and returns them in no particular order.
func submitMany(t testing.TB, e *tenv, v jobs.Viewer, n int, text string) []jobs.Submitted {
	t.Helper()
	out, err := submitAll(e, v, n, text)
	if err != nil {
		t.Fatalf("submit %q: %v", text, err)
	}
	return out
}

// submitAll is submitMany for any goroutine: it returns the first error.
func submitAll(e *tenv, v jobs.Viewer, n int, text string) ([]jobs.Submitted, error) {
	var mu sync.Mutex
	var out []jobs.Submitted
	var first error
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				s, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: v, Prompt: text})
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					out = append(out, s)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return out, first
}

// countJobs counts the jobs of org in state.
func countJobs(e *tenv, org int64, state jobs.State) int {
	return e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND state = ?", org, string(state))
}

// sampleMostRunning samples how many jobs of org run at once until the test ends, keeping the
// most seen.
func sampleMostRunning(t *testing.T, e *tenv, org int64) *atomic.Int64 {
	var most atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			var n int64
			if e.D.Bun.NewSelect().TableExpr("sa_job").ColumnExpr("count(*)").
				Where("org_id = ? AND state = 'running'", org).Scan(context.Background(), &n) == nil && n > most.Load() {
				most.Store(n)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return &most
}

// TestFairShareCapHoldsNoOrgBehind: with ASTERION_ORG_MAX_RUNNING=3 and ten workers, org A's
// hundred one-second prompts never run more than three at once, and all ten of org B's,
// submitted behind them, finish within 8 s of their submit while A still has queued work.
func TestFairShareCapHoldsNoOrgBehind(t *testing.T) {
	t.Parallel()
	e := newEnv(t, instantSim(), func(c *jobs.Config) { c.OrgMaxRunning = 3 })
	orgB, userB := createOrgUser(t, e.D.Bun, "member")
	most := sampleMostRunning(t, e, e.O)
	startRuntime(t, e, e.S, 10)
	submitMany(t, e, e.V, 100, "org A's backlog #sim:latency=1s")
	submitted := time.Now()
	b := submitMany(t, e, jobs.Viewer{OrgID: orgB, UserID: userB}, 10, "org B's prompt #sim:latency=1s")
	deadline := submitted.Add(8 * time.Second)
	for _, s := range b {
		waitFor(t, time.Until(deadline), "org B's prompts", func() bool { return e.Job(s.JobID).State == "succeeded" })
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
	e := newEnv(t, instantSim())
	orgB, userB := createOrgUser(t, e.D.Bun, "member")
	setShare(t, e, e.O, 2, false)
	submitMany(t, e, e.V, 90, "weight two #sim:latency=500ms")
	submitMany(t, e, jobs.Viewer{OrgID: orgB, UserID: userB}, 90, "weight one #sim:latency=500ms")
	startRuntime(t, e, e.S, 6)
	done := func() int { return e.Count("SELECT count(*) FROM sa_job WHERE state = 'succeeded'") }
	// The window opens once the first round has finished, so both orgs run their share.
	waitFor(t, 20*time.Second, "a first round of jobs", func() bool { return done() >= 12 })
	var from time.Time
	if err := e.D.Bun.QueryRowContext(context.Background(), "SELECT now()").Scan(&from); err != nil {
		t.Fatal(err)
	}
	inWindow := func(org int64) int {
		return e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND state = 'succeeded' AND finished_at > ?", org, from)
	}
	waitFor(t, 30*time.Second, "48 jobs in the window", func() bool { return inWindow(e.O)+inWindow(orgB) >= 48 })
	a, b := inWindow(e.O), inWindow(orgB)
	if countJobs(e, e.O, jobs.StateQueued) == 0 || countJobs(e, orgB, jobs.StateQueued) == 0 {
		t.Fatalf("a backlog ran out inside the window (A %d, B %d finished): the window says nothing", a, b)
	}
	ratio := float64(a) / float64(max(b, 1))
	t.Logf("in the window the weight-2 org finished %d jobs, the weight-1 org %d (ratio %.2f)", a, b, ratio)
	if ratio < 1.6 || ratio > 2.5 {
		t.Errorf("finished %d:%d (ratio %.2f), want about 2:1 for weights 2:1", a, b, ratio)
	}
}

// TestFairShareNewPromptNotHeldBehindBacklog: with no cap, a new prompt of org B starts within
// about 2 s although org A queued 500 jobs before it: the next free slot goes to the org with
// the fewest running jobs.
func TestFairShareNewPromptNotHeldBehindBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, instantSim())
	orgB, userB := createOrgUser(t, e.D.Bun, "member")
	submitMany(t, e, e.V, 500, "org A's backlog #sim:latency=1s")
	startRuntime(t, e, e.S, 4)
	waitFor(t, 10*time.Second, "org A filling the workers", func() bool { return countJobs(e, e.O, jobs.StateRunning) == 4 })
	submitted := time.Now()
	s, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: jobs.Viewer{OrgID: orgB, UserID: userB},
		Prompt: "org B's new prompt #sim:latency=10ms"})
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 2500*time.Millisecond, "org B's prompt to start", func() bool { return e.Job(s.JobID).StartedAt != nil })
	t.Logf("org B's prompt started %v after its submit, behind %d queued jobs of A", time.Since(submitted).Round(time.Millisecond),
		countJobs(e, e.O, jobs.StateQueued))
	if countJobs(e, e.O, jobs.StateQueued) < 400 {
		t.Errorf("org A's backlog had mostly run before B's prompt started")
	}
}

// TestOrgPausedHoldsItsJobs: a paused org's jobs stay queued, saying they wait for it, while
// another org's run; once resumed they all run, none lost.
func TestOrgPausedHoldsItsJobs(t *testing.T) {
	t.Parallel()
	e := newEnv(t, instantSim())
	orgB, userB := createOrgUser(t, e.D.Bun, "member")
	setShare(t, e, e.O, 1, true)
	paused := submitMany(t, e, e.V, 6, "paused org #sim:latency=50ms")
	others := submitMany(t, e, jobs.Viewer{OrgID: orgB, UserID: userB}, 12, "running org #sim:latency=200ms")
	startRuntime(t, e, e.S, 3)
	for _, s := range others {
		waitFor(t, 20*time.Second, "the other org's jobs", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	waitFor(t, 10*time.Second, "the paused org's jobs to say why they wait", func() bool {
		return e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND state = 'queued' AND waiting_for = ?",
			e.O, jobs.WaitingOrgPaused) == len(paused)
	})
	if n := e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND started_at IS NOT NULL", e.O); n != 0 {
		t.Fatalf("%d jobs of the paused org started", n)
	}
	setShare(t, e, e.O, 1, false)
	for _, s := range paused {
		waitFor(t, 15*time.Second, "the resumed org's jobs", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	if n := e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND attempt <> 1", e.O); n != 0 {
		t.Errorf("%d jobs of the resumed org took more than one attempt", n)
	}
}

// TestFairShareNoJobRunsTwice: two processes on one database, three orgs of different weights
// and a cap, and submits racing the workers' swaps: every job reaches the provider exactly
// once, has one attempt row, and succeeds.
func TestFairShareNoJobRunsTwice(t *testing.T) {
	t.Parallel()
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		select {
		case <-time.After(time.Duration(10+c.n%30) * time.Millisecond):
		case <-ctx.Done():
			return provider.Response{}, ctx.Err()
		}
		return okResponse(c), nil
	})
	var meterA, meterB *usage.Meter
	capped := func(c *jobs.Config) { c.OrgMaxRunning = 4 }
	e := newEnv(t, fake, capped, withMeter(t, &meterA))
	second := e.service(fake, capped, withMeter(t, &meterB))
	orgB, userB := createOrgUser(t, e.D.Bun, "member")
	orgC, userC := createOrgUser(t, e.D.Bun, "member")
	setShare(t, e, orgB, 2, false)
	setShare(t, e, orgC, 3, false)
	startRuntime(t, e, e.S, 6)
	startRuntime(t, e, second, 6)
	var all []jobs.Submitted
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for _, v := range []jobs.Viewer{e.V, {OrgID: orgB, UserID: userB}, {OrgID: orgC, UserID: userC}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := submitAll(e, v, 70, "race")
			errs <- err
			mu.Lock()
			all = append(all, s...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("submit: %v", err)
		}
	}
	waitFor(t, 60*time.Second, "every job", func() bool {
		return e.Count("SELECT count(*) FROM sa_job WHERE state = 'succeeded'") == len(all)
	})
	for _, s := range all {
		if n := fake.callsFor(s.JobID); n != 1 {
			t.Errorf("job %s reached the provider %d times", s.JobID, n)
		}
	}
	if n := e.Count("SELECT count(*) FROM sa_attempt"); n != len(all) {
		t.Errorf("%d attempt rows for %d jobs", n, len(all))
	}
	if n := e.Count("SELECT count(*) FROM (SELECT job_id FROM sa_attempt GROUP BY job_id HAVING count(*) <> 1) AS x"); n != 0 {
		t.Errorf("%d jobs have other than one attempt row", n)
	}
	swapped := e.Count(`SELECT count(*) FROM sa_job AS j JOIN river_job AS r ON r.id = j.river_job_id
WHERE (r.args ->> 'job_id')::uuid <> j.id`)
	t.Logf("%d of %d jobs ran on another job's vehicle", swapped, len(all))
	if swapped == 0 {
		t.Errorf("no job changed vehicle: the race tested no swap")
	}
}

// TestFairShareBandAgreesWithRiverPriority: the database's asterion_band, by which dispatches
// keep to a vehicle's priority band, is RiverPriority for every job priority.
func TestFairShareBandAgreesWithRiverPriority(t *testing.T) {
	t.Parallel()
	e := newEnv(t, instantSim())
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

// TestFairShareSwapKeepsTheDisplacedJobsPlace: when the org's oldest job rides a vehicle late
// in River's fetch order (one back from a stopped worker, say), the first vehicle fetched takes
// it, and the job it displaces keeps that vehicle's place: the org's jobs still start oldest
// first, and one swap settles it instead of one per job of the backlog.
func TestFairShareSwapKeepsTheDisplacedJobsPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, instantSim())
	ctx := context.Background()
	var subs []jobs.Submitted
	for i := 0; i < 5; i++ {
		subs = append(subs, e.Submit("in order"))
	}
	vehicle := func(id uuid.UUID) int64 { return *e.Job(id).RiverJobID }
	first := vehicle(subs[0].JobID)
	if _, err := e.D.Bun.ExecContext(ctx, `UPDATE river_job SET scheduled_at = now() - CASE WHEN id = ? THEN interval '1 second' ELSE interval '1 minute' END
WHERE queue = ?`, first, jobs.QueuePrompts); err != nil {
		t.Fatal(err)
	}
	before := make([]int64, len(subs))
	for i, s := range subs {
		before[i] = vehicle(s.JobID)
	}
	startRuntime(t, e, e.S, 1)
	for _, s := range subs {
		e.WaitState(s.JobID, jobs.StateSucceeded, 10*time.Second)
	}
	for i := 1; i < len(subs); i++ {
		if a, b := e.Job(subs[i-1].JobID), e.Job(subs[i].JobID); !a.StartedAt.Before(*b.StartedAt) {
			t.Errorf("job %d started at %v, not before job %d at %v", i-1, a.StartedAt, i, b.StartedAt)
		}
	}
	want := slices.Clone(before)
	want[0], want[1] = before[1], before[0]
	for i, s := range subs {
		if got := vehicle(s.JobID); got != want[i] {
			t.Errorf("job %d rode vehicle %d, want %d (vehicles before: %v)", i, got, want[i], before)
		}
	}
}
