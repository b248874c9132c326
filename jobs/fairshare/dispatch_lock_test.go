package fairshare_test

import (
	"context"
	"testing"
	"time"

	"asterion/jobs/fairshare"
	"asterion/jobs/jobstest"
)

// TestOwnOrderTakesNoDispatchLock: while another dispatch holds the dispatch lock, a dispatch
// whose org is the only one with work to choose still gives its vehicle to the org's older
// job (the lock weighs orgs, and there is none to weigh); once another org has a due job, the
// next dispatch waits for the lock and, given it, gives the vehicle to that org.
func TestOwnOrderTakesNoDispatchLock(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	older := e.Submit("older")
	newer := e.Submit("newer")

	holder, err := e.D.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.ExecContext(ctx, "SELECT pg_advisory_xact_lock(?)", fairshare.DispatchLock); err != nil {
		t.Fatal(err)
	}
	// A dispatch waits for the dispatch lock itself (a bigint key: its high half in classid, its
	// low half in objid), not for another advisory lock of the service.
	waiting := func() bool {
		return e.Count(`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objsubid = 1
  AND (classid::bigint << 32 | objid::bigint) = ?
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`, fairshare.DispatchLock) > 0
	}
	type result struct {
		d   fairshare.Decision
		err error
	}
	dispatch := func(share *fairshare.Share, v fairshare.Vehicle) chan result {
		out := make(chan result, 1)
		go func() {
			d, err := share.Dispatch(ctx, v, -1)
			out <- result{d, err}
		}()
		return out
	}

	share := newShare(t, e)
	own := dispatch(share, fetch(t, e, newer.JobID))
	var r result
	jobstest.WaitFor(t, 30*time.Second, "the dispatch within one org to end or to wait for the lock", func() bool {
		select {
		case r = <-own:
			return true
		default:
		}
		if waiting() {
			_ = holder.Rollback()
			t.Fatal("a dispatch with no other org to weigh waited for the dispatch lock")
		}
		return false
	})
	if r.err != nil || r.d.Args.Job != older.JobID || !r.d.Swapped {
		t.Fatalf("the vehicle of the newer job went to %+v (%v), want the older job", r.d, r.err)
	}
	if c := share.Counts(); c.Own != 1 || c.Locked != 0 || c.Swapped != 1 {
		t.Fatalf("counts %+v, want one dispatch within the org and none locked", c)
	}

	// Org B has a due job: the dispatch of A's next vehicle weighs the orgs, under the lock.
	b := jobstest.Submit(t, e.S, e.otherOrg(), "org B's prompt")
	weighed := dispatch(share, fetch(t, e, newer.JobID))
	jobstest.WaitFor(t, 30*time.Second, "the dispatch weighing two orgs to wait for the dispatch lock", waiting)
	select {
	case r := <-weighed:
		t.Fatalf("the dispatch ended while another held the dispatch lock: %+v, %v", r.d, r.err)
	default:
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	r = <-weighed
	if r.err != nil || r.d.Args.Job != b.JobID || !r.d.Swapped {
		t.Fatalf("with org A holding a slot, A's vehicle went to %+v (%v), want org B's job", r.d, r.err)
	}
	if c := share.Counts(); c.Own != 1 || c.Locked != 1 {
		t.Fatalf("counts %+v, want one dispatch within the org and one locked", c)
	}
}
