package fairshare_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/usage"
)

// TestFairShareNoJobRunsTwice: two processes on one database, three orgs of different weights
// and a cap, jobs of every priority (so swaps cross bands), and submits racing the workers'
// swaps: every job reaches the provider exactly once, has one attempt row, and succeeds.
func TestFairShareNoJobRunsTwice(t *testing.T) {
	t.Parallel()
	fake := newFake(func(n int) time.Duration { return time.Duration(10+n%30) * time.Millisecond })
	var meterA, meterB *usage.Meter
	capped := func(c *jobs.Config) { c.OrgMaxRunning = 4 }
	e := newEnv(t, fake, capped, withMeter(t, &meterA))
	second := e.service(fake, capped, withMeter(t, &meterB))
	vb, vc := e.otherOrg(), e.otherOrg()
	setShare(t, e, vb.OrgID, 2, false)
	setShare(t, e, vc.OrgID, 3, false)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 6)
	jobstest.StartRuntime(t, e.D.Pool, second, 6)
	var all []jobs.Submitted
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	anyPriority := func(r *jobs.SubmitRequest) { p := rand.IntN(101); r.Priority = &p }
	for _, v := range []jobs.Viewer{e.V, vb, vc} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := submitAll(e, v, 70, "race", anyPriority)
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
	jobstest.WaitFor(t, 90*time.Second, "every job", func() bool {
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
	crossed := e.Count(`SELECT count(*) FROM sa_job AS j JOIN river_job AS r ON r.id = j.river_job_id
WHERE asterion_band(((r.args ->> 'priority')::int)::smallint) <> asterion_band(j.priority)`)
	t.Logf("%d of %d jobs ran on another job's vehicle, %d on one made for another band", swapped, len(all), crossed)
	if swapped == 0 || crossed == 0 {
		t.Errorf("no job changed vehicle, or none across bands: the race tested no swap of the kind")
	}
}

// TestFairShareSwapKeepsTheDisplacedJobsPlace: when the org's oldest job rides a vehicle late
// in River's fetch order (one back from a stopped worker, say), the first vehicle fetched takes
// it, and the job it displaces keeps that vehicle's place: the org's jobs still start oldest
// first, and one swap settles it instead of one per job of the backlog.
func TestFairShareSwapKeepsTheDisplacedJobsPlace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
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
	jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	for _, s := range subs {
		e.WaitState(s.JobID, jobs.StateSucceeded, 10*time.Second)
	}
	startsInOrder(t, e, subs)
	want := slices.Clone(before)
	want[0], want[1] = before[1], before[0]
	for i, s := range subs {
		if got := vehicle(s.JobID); got != want[i] {
			t.Errorf("job %d rode vehicle %d, want %d (vehicles before: %v)", i, got, want[i], before)
		}
	}
}

// TestCrossBandSwapKeepsTheOrgsOrder: when org B's prompt of a worse band takes a vehicle of
// org A's priority-0 backlog, A's displaced job keeps that vehicle's place (its River priority
// and its time in River's order) on the vehicle it got from B: A's jobs still start oldest
// first, and that one swap settles it, where a displaced job left in B's band would make every
// later dispatch of A swap again, one at a time under the dispatch lock.
func TestCrossBandSwapKeepsTheOrgsOrder(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	vb := e.otherOrg()
	var a []jobs.Submitted
	for i := 0; i < 8; i++ {
		a = append(a, e.Submit("org A's backlog", priority(0)))
	}
	b := jobstest.Submit(t, e.S, vb, "org B's prompt", priority(80))
	vB := vehicleOf(t, e, b.JobID)
	// Two workers fetch A's first two vehicles; the first dispatch gives its slot to B.
	share := newShare(t, e)
	v := fetch(t, e, a[0].JobID)
	fetch(t, e, a[1].JobID)
	d, err := share.Dispatch(context.Background(), v, -1)
	if err != nil || d.Args.Job != b.JobID {
		t.Fatalf("org B's job did not take org A's vehicle: %+v, %v", d, err)
	}
	if got := vehicleOf(t, e, a[0].JobID); got.ID != vB.ID || got.Priority != v.Priority || got.ScheduledAt.After(v.ScheduledAt) {
		t.Fatalf("org A's displaced job rides vehicle %d at River priority %d from %v, want vehicle %d at %d from %v at the latest",
			got.ID, got.Priority, got.ScheduledAt, vB.ID, v.Priority, v.ScheduledAt)
	}
	// B's job is cancelled (what it does next is fair share between orgs, not A's order), and
	// one worker then runs A's backlog in River's order, through the fair share of its service.
	release(t, e)
	if _, err := e.S.Cancel(context.Background(), vb, b.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	for _, s := range a {
		e.WaitState(s.JobID, jobs.StateSucceeded, 20*time.Second)
	}
	startsInOrder(t, e, a)
	if n := e.Count(`SELECT count(*) FROM sa_job AS j JOIN river_job AS r ON r.id = j.river_job_id
WHERE (r.args ->> 'job_id')::uuid <> j.id`); n != 2 {
		t.Errorf("%d jobs ended on another job's vehicle, want 2 (B's and the job of A it displaced)", n)
	}
}

// startsInOrder fails the test unless the jobs of subs started in the order given.
func startsInOrder(t *testing.T, e *tenv, subs []jobs.Submitted) {
	t.Helper()
	for i := 1; i < len(subs); i++ {
		if a, b := e.Job(subs[i-1].JobID), e.Job(subs[i].JobID); !a.StartedAt.Before(*b.StartedAt) {
			t.Errorf("job %d started at %v, not before job %d at %v", i-1, a.StartedAt, i, b.StartedAt)
		}
	}
}

// TestOwnOrderByTheJobsBand: an org's order is its jobs' own bands, not their vehicles': the
// newer of two priority-50 jobs on a vehicle of River's first band (as a swap may leave it)
// gives that vehicle to the older one when it is fetched.
func TestOwnOrderByTheJobsBand(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	older := e.Submit("older", priority(50))
	newer := e.Submit("newer", priority(50))
	if _, err := e.D.Bun.ExecContext(context.Background(), "UPDATE river_job SET priority = 1 WHERE id = ?",
		*e.Job(newer.JobID).RiverJobID); err != nil {
		t.Fatal(err)
	}
	share := newShare(t, e)
	d, err := share.Dispatch(context.Background(), fetch(t, e, newer.JobID), -1)
	if err != nil || d.Args.Job != older.JobID || !d.Swapped {
		t.Fatalf("the vehicle of the newer job went to %+v (%v), want the older job", d, err)
	}
}
