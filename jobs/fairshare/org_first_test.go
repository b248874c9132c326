package fairshare_test

import (
	"context"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/fairshare"
	"asterion/jobs/jobstest"
)

// TestOrgFirstWhateverTheBand: org A queues 60 prompts at priority 0 on four workers, and org
// B's one prompt at the default priority, submitted after them, starts before A's backlog has
// drained: B's job is in a worse River band than every vehicle of A's, and the dispatch of A's
// next vehicle gives the slot to B all the same. When B's job starts, at most ten of A's have
// started since (the round the workers had fetched, and its margin).
func TestOrgFirstWhateverTheBand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	vb := e.otherOrg()
	const n = 60
	submitMany(t, e, e.V, n, "org A's urgent backlog #sim:latency=200ms", priority(0))
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4)
	jobstest.WaitFor(t, 20*time.Second, "org A filling the workers", func() bool { return countJobs(e, e.O, jobs.StateRunning) == 4 })
	b := jobstest.Submit(t, e.S, vb, "org B's prompt #sim:latency=10ms")
	jobstest.WaitFor(t, 60*time.Second, "org B's prompt to start", func() bool { return e.Job(b.JobID).StartedAt != nil })
	notStarted := e.Count(`SELECT count(*) FROM sa_job AS a, sa_job AS b WHERE b.id = ? AND a.org_id = ?
  AND (a.started_at IS NULL OR a.started_at > b.started_at)`, b.JobID, e.O)
	t.Logf("%d of org A's %d jobs had not started when org B's did", notStarted, n)
	if notStarted < n-10 {
		t.Errorf("only %d of org A's %d jobs at priority 0 were still to start when org B's prompt at priority 50 started: "+
			"B waited for A's backlog", notStarted, n)
	}
	e.WaitState(b.JobID, jobs.StateSucceeded, 30*time.Second)
	jobstest.WaitFor(t, 60*time.Second, "org A's backlog", func() bool { return countJobs(e, e.O, jobs.StateSucceeded) == n })
}

// TestNotQueuedWorkTakesTheFastPath: a job of org B scheduled for later, waiting for the
// provider or waiting for a budget is not queued work to choose an org by: the dispatch of a
// vehicle of org A's backlog takes its one read and runs A's job, not the locked path. The
// control, B's job due and not waiting, takes the vehicle.
func TestNotQueuedWorkTakesTheFastPath(t *testing.T) {
	t.Parallel()
	later := func(r *jobs.SubmitRequest) { at := time.Now().Add(time.Hour); r.ScheduledFor = &at }
	for _, tc := range []struct {
		name       string
		mod        func(*jobs.SubmitRequest)
		waitingFor string
		takes      bool
	}{
		{name: "scheduled for later", mod: later},
		{name: "waiting for the provider", waitingFor: jobs.WaitingProviderCapacity},
		{name: "waiting for a budget", waitingFor: "budget"},
		{name: "due and not waiting", takes: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, jobstest.InstantSim())
			vb := e.otherOrg()
			var a []jobs.Submitted
			for i := 0; i < 5; i++ {
				a = append(a, e.Submit("org A's backlog", priority(0)))
			}
			var mods []func(*jobs.SubmitRequest)
			if tc.mod != nil {
				mods = append(mods, tc.mod)
			}
			b := jobstest.Submit(t, e.S, vb, "org B's prompt", mods...)
			if tc.waitingFor != "" {
				// As the worker leaves a waiting job: saying why, its vehicle snoozed.
				if _, err := e.D.Bun.ExecContext(context.Background(), "UPDATE sa_job SET waiting_for = ? WHERE id = ?",
					tc.waitingFor, b.JobID); err != nil {
					t.Fatal(err)
				}
				if _, err := e.D.Bun.ExecContext(context.Background(), `UPDATE river_job SET state = 'scheduled',
    scheduled_at = now() + interval '1 hour' WHERE id = ?`, *e.Job(b.JobID).RiverJobID); err != nil {
					t.Fatal(err)
				}
			}
			// Two workers have fetched A's first two vehicles; the first dispatches.
			share := newShare(t, e)
			v := fetch(t, e, a[0].JobID)
			fetch(t, e, a[1].JobID)
			d, err := share.Dispatch(context.Background(), v, -1)
			if err != nil {
				t.Fatal(err)
			}
			c := share.Counts()
			t.Logf("decision %+v, counts %+v", d, c)
			if tc.takes {
				if d.Outcome != fairshare.Run || d.Args.Job != b.JobID || c.Swapped != 1 {
					t.Fatalf("org B's due job did not take org A's vehicle: %+v, %+v", d, c)
				}
				return
			}
			if d.Outcome != fairshare.Run || d.Args.Job != a[0].JobID {
				t.Fatalf("org A's vehicle was not given its own job: %+v", d)
			}
			if c.Fast != 1 || c.Locked != 0 {
				t.Fatalf("the dispatch took the locked path (%+v): org B's job counted as queued work", c)
			}
			// The same with workers: A's backlog runs, B's job stays where it is.
			release(t, e)
			jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
			for _, s := range a {
				e.WaitState(s.JobID, jobs.StateSucceeded, 30*time.Second)
			}
			if j := e.Job(b.JobID); j.State != "queued" || j.StartedAt != nil {
				t.Fatalf("org B's job that was not queued work ran: %+v", j)
			}
			if n := e.Count(`SELECT count(*) FROM sa_job AS j JOIN river_job AS r ON r.id = j.river_job_id
WHERE (r.args ->> 'job_id')::uuid <> j.id`); n != 0 {
				t.Errorf("%d jobs changed vehicle", n)
			}
		})
	}
}

// TestPriorityCeilingAcrossBands: a worker with a priority ceiling never runs a job above it,
// even when fair share would give its slot to another org's job of a worse band: a ceiling-40
// worker running org A's priority-0 backlog leaves org B's priority-50 job queued, and a
// vehicle of A's band that a swap gave B's job is declined by it.
func TestPriorityCeilingAcrossBands(t *testing.T) {
	t.Parallel()
	fake := newFake(func(int) time.Duration { return 20 * time.Millisecond })
	e := newEnv(t, fake)
	vb := e.otherOrg()
	a := submitMany(t, e, e.V, 12, "org A's backlog", priority(0))
	b := jobstest.Submit(t, e.S, vb, "org B's prompt", priority(50))

	// A swap by an unrestricted dispatch puts B's job on a vehicle of A's band; a ceiling-40
	// dispatch of that vehicle declines it.
	share := newShare(t, e)
	v := fetch(t, e, a[0].JobID)
	fetch(t, e, a[1].JobID)
	d, err := share.Dispatch(context.Background(), v, -1)
	if err != nil {
		t.Fatal(err)
	}
	if d.Args.Job != b.JobID || !d.Swapped {
		t.Fatalf("the unrestricted dispatch did not give org B's job the vehicle: %+v", d)
	}
	if d, err = share.Dispatch(context.Background(), v, 40); err != nil || d.Outcome != fairshare.Decline {
		t.Fatalf("a ceiling-40 dispatch of the vehicle carrying a priority-50 job: %+v, %v", d, err)
	}

	release(t, e)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2, func(c *jobs.RuntimeConfig) { c.PriorityCeiling = 40 })
	for _, s := range a {
		e.WaitState(s.JobID, jobs.StateSucceeded, 30*time.Second)
	}
	if j := e.Job(b.JobID); j.State != "queued" || j.StartedAt != nil || fake.callsFor(b.JobID) != 0 {
		t.Fatalf("a worker with ceiling 40 ran a job of priority 50: %+v", j)
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	if j := e.WaitState(b.JobID, jobs.StateSucceeded, 30*time.Second); j.Attempt != 1 || fake.callsFor(b.JobID) != 1 {
		t.Fatalf("after an unrestricted worker started: %+v, %d calls", j, fake.callsFor(b.JobID))
	}
}

// TestEndedWaitIsQueuedWorkAgain: a job marked waiting for the provider or a budget whose
// vehicle has woken is queued work again once the leader clears the mark, so a vehicle of
// another org's better band gives it the slot instead of leaving it behind that org's backlog;
// a job whose vehicle still sleeps keeps its mark.
func TestEndedWaitIsQueuedWorkAgain(t *testing.T) {
	t.Parallel()
	for _, waitingFor := range []string{jobs.WaitingProviderCapacity, "budget"} {
		t.Run(waitingFor, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, jobstest.InstantSim())
			ctx := context.Background()
			vb, vc := e.otherOrg(), e.otherOrg()
			var a []jobs.Submitted
			for i := 0; i < 5; i++ {
				a = append(a, e.Submit("org A's backlog", priority(0)))
			}
			awake := jobstest.Submit(t, e.S, vb, "org B's prompt, its wait over")
			asleep := jobstest.Submit(t, e.S, vc, "org C's prompt, still waiting")
			if _, err := e.D.Bun.ExecContext(ctx, "UPDATE sa_job SET waiting_for = ? WHERE id IN (?, ?)",
				waitingFor, awake.JobID, asleep.JobID); err != nil {
				t.Fatal(err)
			}
			if _, err := e.D.Bun.ExecContext(ctx, `UPDATE river_job SET state = 'scheduled',
    scheduled_at = now() + interval '1 hour' WHERE id = ?`, *e.Job(asleep.JobID).RiverJobID); err != nil {
				t.Fatal(err)
			}
			share := newShare(t, e)
			fetch(t, e, a[1].JobID)
			d, err := share.Dispatch(ctx, fetch(t, e, a[0].JobID), -1)
			if err != nil || d.Args.Job != a[0].JobID || share.Counts().Locked != 0 {
				t.Fatalf("with B's job marked, A's dispatch: %+v, %+v, %v", d, share.Counts(), err)
			}
			n, err := share.ClearEndedWaits(ctx)
			if err != nil || n != 1 {
				t.Fatalf("cleared %d waits (%v), want B's one", n, err)
			}
			if j := e.Job(asleep.JobID); j.WaitingFor == nil || *j.WaitingFor != waitingFor {
				t.Fatalf("the mark of C's job, whose vehicle sleeps, was cleared: %+v", j.WaitingFor)
			}
			if d, err = share.Dispatch(ctx, fetch(t, e, a[2].JobID), -1); err != nil || d.Args.Job != awake.JobID {
				t.Fatalf("once B's wait was cleared, A's next vehicle went to %+v (%v), want B's job", d, err)
			}
		})
	}
}

// TestEndedWaitRunsBeforeTheBacklog: with workers running, a job of org B whose wait for the
// provider is over starts while org A's priority-0 backlog still has most of its jobs to run.
func TestEndedWaitRunsBeforeTheBacklog(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	vb := e.otherOrg()
	const n = 40
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4, func(c *jobs.RuntimeConfig) { c.PollEvery = 200 * time.Millisecond })
	jobstest.WaitFor(t, 60*time.Second, "the leader's first poll", func() bool {
		return e.Count("SELECT count(*) FROM river_job WHERE kind = 'asterion.poll_operations' AND state = 'completed'") > 0
	})
	submitMany(t, e, e.V, n, "org A's urgent backlog #sim:latency=500ms", priority(0))
	jobstest.WaitFor(t, 20*time.Second, "org A filling the workers", func() bool { return countJobs(e, e.O, jobs.StateRunning) == 4 })
	// B's vehicle, of a worse band, is not fetched while A's are there; B's job says it
	// waited for the provider, as a job whose snooze has just ended does.
	b := jobstest.Submit(t, e.S, vb, "org B's prompt #sim:latency=10ms")
	if _, err := e.D.Bun.ExecContext(context.Background(), "UPDATE sa_job SET waiting_for = ? WHERE id = ?",
		jobs.WaitingProviderCapacity, b.JobID); err != nil {
		t.Fatal(err)
	}
	jobstest.WaitFor(t, 60*time.Second, "org B's prompt to start", func() bool { return e.Job(b.JobID).StartedAt != nil })
	notStarted := e.Count(`SELECT count(*) FROM sa_job AS a, sa_job AS b WHERE b.id = ? AND a.org_id = ?
  AND (a.started_at IS NULL OR a.started_at > b.started_at)`, b.JobID, e.O)
	t.Logf("%d of org A's %d jobs had not started when org B's did", notStarted, n)
	if notStarted < n/2 {
		t.Errorf("only %d of org A's %d jobs were still to start when org B's prompt, its wait over, started", notStarted, n)
	}
}

// TestOrgFirstOnOneWorker: on a single worker the orgs hold the same share (none) whenever it
// is free, and equals take turns: org B's prompt, submitted after org A's 40 at priority 0,
// starts while at least half of A's have yet to.
func TestOrgFirstOnOneWorker(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	vb := e.otherOrg()
	const n = 40
	submitMany(t, e, e.V, n, "org A's urgent backlog #sim:latency=50ms", priority(0))
	jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	jobstest.WaitFor(t, 20*time.Second, "org A's first job", func() bool { return countJobs(e, e.O, jobs.StateRunning) == 1 })
	b := jobstest.Submit(t, e.S, vb, "org B's prompt #sim:latency=10ms")
	jobstest.WaitFor(t, 60*time.Second, "org B's prompt to start", func() bool { return e.Job(b.JobID).StartedAt != nil })
	notStarted := e.Count(`SELECT count(*) FROM sa_job AS a, sa_job AS b WHERE b.id = ? AND a.org_id = ?
  AND (a.started_at IS NULL OR a.started_at > b.started_at)`, b.JobID, e.O)
	t.Logf("%d of org A's %d jobs had not started when org B's did", notStarted, n)
	if notStarted < n/2 {
		t.Errorf("only %d of org A's %d jobs were still to start when org B's prompt started on the one worker", notStarted, n)
	}
}
