package jobs_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/maintenance"
	"asterion/jobs/provider"
)

// gate is a provider behaviour: the first call blocks, ignoring its context like a hung
// process, until the gate opens; every later call answers at once.
type gate struct {
	open chan struct{}
	once sync.Once
}

func newGate() *gate { return &gate{open: make(chan struct{})} }

func (g *gate) release() { g.once.Do(func() { close(g.open) }) }

// releaseFirst makes sure a blocked call never outlives the test: it must run before the
// runtimes' cleanup stops them, so it is registered after they are built.
func (g *gate) releaseFirst(t *testing.T) { t.Cleanup(g.release) }

func (g *gate) fn(ctx context.Context, c call) (provider.Response, error) {
	if c.n == 1 {
		<-g.open
	}
	return okResponse(c), nil
}

func (e *tenv) riverMeta(id int64) map[string]any {
	e.T.Helper()
	var raw []byte
	if err := e.D.Bun.QueryRowContext(context.Background(), "SELECT metadata FROM river_job WHERE id = ?", id).Scan(&raw); err != nil {
		e.T.Fatalf("river job %d metadata: %v", id, err)
	}
	m := map[string]any{}
	_ = json.Unmarshal(raw, &m)
	return m
}

// TestHeartbeatReclaimProof checks reclaim by heartbeat: a worker that dies mid-call
// leaves its job running with a heartbeat that stops; the reclaim re-queues it as a worker
// crash on a new River job; a fresh runtime completes it; the dead worker's late answer, when
// it finally comes, is dropped.
func TestHeartbeatReclaimProof(t *testing.T) {
	t.Parallel()
	g := newGate()
	fake := newFake(g.fn)
	e := newEnv(t, fake, func(c *jobs.Config) { c.StaleAfter = 500 * time.Millisecond })
	ctx := context.Background()
	rtA := jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	g.releaseFirst(t)

	s := e.Submit("the worker will die")
	first := fake.waitCall(t, 10*time.Second)
	j := e.Job(s.JobID)
	if j.State != "running" || j.WorkerClaim == nil || !strings.HasPrefix(*j.WorkerClaim, rtA.ID()+"/") || j.RiverJobID == nil {
		t.Fatalf("claimed job %+v", j)
	}
	oldVehicle, oldClaim := *j.RiverJobID, *j.WorkerClaim
	// Alive: the heartbeat advances, and a reclaim leaves the job alone.
	hb := *j.RunningHeartbeatAt
	jobstest.WaitFor(t, 5*time.Second, "heartbeat to advance", func() bool { return e.Job(s.JobID).RunningHeartbeatAt.After(hb) })
	if rep, err := e.S.ReclaimStuck(ctx); err != nil || rep != (maintenance.ReclaimReport{}) {
		t.Fatalf("reclaim of a live job: %+v, %v", rep, err)
	}

	// The worker dies: its runtime is stopped hard while the provider call hangs.
	stopped := make(chan struct{})
	go func() { defer close(stopped); _ = rtA.Stop(context.Background(), 10*time.Millisecond) }()
	select {
	case <-first.ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("stopping the runtime never cancelled the work context")
	}
	// The heartbeat stops and the row stays running under the dead claim: its last beat grows
	// older than forty beat intervals, which a live heartbeat never lets happen.
	jobstest.WaitFor(t, 20*time.Second, "the dead worker's heartbeat to go stale", func() bool {
		return e.Count("SELECT count(*) FROM sa_job WHERE id = ? AND running_heartbeat_at < now() - interval '2 seconds'", s.JobID) == 1
	})
	after := e.Job(s.JobID)
	if after.State != "running" || *after.WorkerClaim != oldClaim {
		t.Fatalf("after the worker died: %+v", after)
	}
	// Make the heartbeat stale beyond doubt, as five minutes of silence would.
	if _, err := e.D.Bun.ExecContext(ctx, "UPDATE sa_job SET running_heartbeat_at = now() - interval '10 minutes' WHERE id = ?", s.JobID); err != nil {
		t.Fatal(err)
	}
	rep, err := e.S.ReclaimStuck(ctx)
	if err != nil || rep != (maintenance.ReclaimReport{Requeued: 1}) {
		t.Fatalf("reclaim: %+v, %v", rep, err)
	}
	j = e.Job(s.JobID)
	if j.State != "queued" || j.Attempt != 2 || j.ErrorKind == nil || *j.ErrorKind != jobs.KindWorkerCrash || j.WorkerClaim != nil ||
		j.RiverJobID == nil || *j.RiverJobID == oldVehicle {
		t.Fatalf("reclaimed job %+v, want queued attempt 2 worker_crash on a new river job", j)
	}
	if st := e.RiverState(*j.RiverJobID); st != "available" {
		t.Fatalf("new river job is %s", st)
	}
	if _, ok := e.riverMeta(oldVehicle)["cancel_attempted_at"]; !ok {
		t.Fatalf("old river job %d was not cancelled (state %s)", oldVehicle, e.RiverState(oldVehicle))
	}
	if op := e.Operation(*j.OperationID); op.Status != "pending" || op.LastErrorKind == nil || *op.LastErrorKind != jobs.KindWorkerCrash {
		t.Fatalf("operation after reclaim: %s %v", op.Status, op.LastErrorKind)
	}
	if n := e.Count("SELECT count(*) FROM sa_audit WHERE action = 'job.reclaimed' AND subject_id = ?", s.JobID.String()); n != 1 {
		t.Fatalf("%d reclaim audit rows", n)
	}

	// A fresh worker process completes it.
	svcB := e.service(fake, func(c *jobs.Config) { c.StaleAfter = 500 * time.Millisecond })
	rtB := jobstest.StartRuntime(t, e.D.Pool, svcB, 2)
	j = e.WaitState(s.JobID, jobs.StateSucceeded, 20*time.Second)
	if j.Attempt != 2 || !strings.HasPrefix(*j.WorkerClaim, rtB.ID()+"/") {
		t.Fatalf("completed job %+v, want attempt 2 under the new runtime", j)
	}

	// The dead worker's call finally answers: its result must be dropped. River's client of
	// the dead runtime is fully stopped only once that execution has finished and been recorded.
	g.release()
	select {
	case <-rtA.Client().Stopped():
	case <-time.After(30 * time.Second):
		t.Fatal("the dead runtime never finished stopping")
	}
	<-stopped
	if st := e.RiverState(oldVehicle); st == "running" || st == "available" {
		t.Fatalf("old river job is still %s after its execution ended", st)
	}
	assertOneResponse(t, e, s.PromptID, j)
	if len(fake.Calls()) != 2 {
		t.Fatalf("provider called %d times, want 2", len(fake.Calls()))
	}
}

// assertOneResponse checks that exactly one response, edge and ledger row exist for the
// prompt and that they are the job's.
func assertOneResponse(t *testing.T, e *tenv, promptID any, j db.Job) {
	t.Helper()
	if n := e.Count("SELECT count(*) FROM sa_entity WHERE kind = 'response' AND parent_id = ?", promptID); n != 1 {
		t.Fatalf("%d responses, want 1", n)
	}
	if n := e.Count("SELECT count(*) FROM sa_entity WHERE kind = 'response' AND id = ?", *j.ResponseID); n != 1 {
		t.Fatalf("the job's response %s is not the one written", *j.ResponseID)
	}
	if n := e.Count("SELECT count(*) FROM sa_ledger WHERE job_id = ?", j.ID); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
	if n := e.Count("SELECT count(*) FROM sa_edge WHERE from_id = ?", promptID); n != 1 {
		t.Fatalf("%d edges, want 1", n)
	}
	if n := e.Count("SELECT count(*) FROM sa_audit WHERE action = 'job.succeeded' AND subject_id = ?", j.ID.String()); n != 1 {
		t.Fatalf("%d success audit rows, want 1", n)
	}
}

// TestConcurrentSafetyProof checks that two executions never both write: a job reclaimed while
// its first worker's provider call is still in flight runs again elsewhere; when the first
// call answers after the second execution succeeded, the late result is dropped. Both calls
// return the same provider request id, so the late write would also collide on the response id.
func TestConcurrentSafetyProof(t *testing.T) {
	t.Parallel()
	g := newGate()
	var textMu sync.Mutex
	texts := map[int]string{}
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		r, _ := g.fn(ctx, c)
		r.RequestID = "same-request" // one provider answer seen twice
		r.Text = map[int]string{1: "late answer", 2: "winning answer"}[c.n]
		textMu.Lock()
		texts[c.n] = r.Text
		textMu.Unlock()
		return r, nil
	})
	// Worker A's heartbeat is stalled (it never beats within the test), so its claim goes stale
	// while its call is in flight.
	e := newEnv(t, fake, func(c *jobs.Config) { c.HeartbeatInterval = time.Hour; c.StaleAfter = 300 * time.Millisecond })
	ctx := context.Background()
	rtA := jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	g.releaseFirst(t)
	s := e.Submit("raced")
	first := fake.waitCall(t, 10*time.Second)
	j := e.Job(s.JobID)
	oldVehicle := *j.RiverJobID
	if !strings.HasPrefix(*j.WorkerClaim, rtA.ID()+"/") {
		t.Fatalf("claim %v", *j.WorkerClaim)
	}
	// Stale without any help: wait past StaleAfter, then reclaim from another process.
	svcB := e.service(fake, func(c *jobs.Config) { c.StaleAfter = 300 * time.Millisecond })
	var rep maintenance.ReclaimReport
	jobstest.WaitFor(t, 10*time.Second, "reclaim of the stale job", func() bool {
		r, err := svcB.ReclaimStuck(ctx)
		if err != nil {
			t.Fatal(err)
		}
		rep.Requeued += r.Requeued
		rep.Failed += r.Failed
		return rep.Requeued+rep.Failed > 0
	})
	if rep != (maintenance.ReclaimReport{Requeued: 1}) {
		t.Fatalf("reclaim %+v", rep)
	}
	// River passes the cancellation of the old vehicle to worker A's context.
	select {
	case <-first.ctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("worker A's context was not cancelled after its vehicle was")
	}
	jobstest.StartRuntime(t, e.D.Pool, svcB, 2)
	won := e.WaitState(s.JobID, jobs.StateSucceeded, 20*time.Second)
	if won.Attempt != 2 {
		t.Fatalf("winner %+v", won)
	}
	// Now the first call answers, late.
	g.release()
	jobstest.WaitFor(t, 20*time.Second, "old river job finalised", func() bool { return e.RiverState(oldVehicle) != "running" })
	final := e.Job(s.JobID)
	if final.State != "succeeded" || *final.WorkerClaim != *won.WorkerClaim || *final.ResponseID != *won.ResponseID || !final.UpdatedAt.Equal(won.UpdatedAt) {
		t.Fatalf("the late writer changed the job: %+v → %+v", won, final)
	}
	assertOneResponse(t, e, s.PromptID, final)
	var body string
	if err := e.D.Bun.QueryRowContext(ctx, "SELECT body FROM sa_entity WHERE id = ?", *final.ResponseID).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if body != "winning answer" {
		t.Fatalf("response body %q, want the winner's", body)
	}
	if n := e.Count("SELECT count(*) FROM sa_event WHERE job_id = ? AND payload->>'state' = 'succeeded'", s.JobID); n != 1 {
		t.Fatalf("%d succeeded events", n)
	}
}

// TestReclaimStuck: a job started longer ago than StuckAfter, or out of attempts, fails as
// stuck instead of being re-queued, and its worker's late outcome is dropped.
func TestReclaimStuck(t *testing.T) {
	t.Parallel()
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		<-ctx.Done()
		return provider.Response{}, ctx.Err()
	})
	e := newEnv(t, fake, func(c *jobs.Config) { c.HeartbeatInterval = time.Hour; c.StaleAfter = time.Minute })
	ctx := context.Background()
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	old := e.Submit("started long ago")
	last := e.Submit("out of attempts", func(r *jobs.SubmitRequest) { r.MaxAttempts = intp(1) })
	c1, c2 := fake.waitCall(t, 10*time.Second), fake.waitCall(t, 10*time.Second)
	e.WaitState(old.JobID, jobs.StateRunning, 5*time.Second)
	e.WaitState(last.JobID, jobs.StateRunning, 5*time.Second)
	if _, err := e.D.Bun.ExecContext(ctx, `UPDATE sa_job SET running_heartbeat_at = now() - interval '10 minutes',
		started_at = CASE WHEN id = ? THEN now() - interval '1 hour' ELSE started_at END WHERE id IN (?, ?)`,
		old.JobID, old.JobID, last.JobID); err != nil {
		t.Fatal(err)
	}
	rep, err := e.S.ReclaimStuck(ctx)
	if err != nil || rep != (maintenance.ReclaimReport{Failed: 2}) {
		t.Fatalf("reclaim %+v, %v", rep, err)
	}
	for _, s := range []jobs.Submitted{old, last} {
		j := e.Job(s.JobID)
		if j.State != "failed" || j.ErrorKind == nil || *j.ErrorKind != jobs.KindStuck || j.FinishedAt == nil || j.Attempt != 1 {
			t.Fatalf("stuck job %+v", j)
		}
		if op := e.Operation(*j.OperationID); op.Status != "timed-out" {
			t.Fatalf("operation of a stuck job is %s, want timed-out", op.Status)
		}
	}
	// The cancelled vehicles abandon the calls; the workers' outcomes are dropped.
	for _, c := range []call{c1, c2} {
		select {
		case <-c.ctx.Done():
		case <-time.After(10 * time.Second):
			t.Fatal("a stuck job's provider call was not cancelled")
		}
	}
	for _, s := range []jobs.Submitted{old, last} {
		rid := *e.Job(s.JobID).RiverJobID
		jobstest.WaitFor(t, 10*time.Second, "vehicle finalised", func() bool { return e.RiverState(rid) == "cancelled" })
		j := e.Job(s.JobID)
		if j.State != "failed" || *j.ErrorKind != jobs.KindStuck {
			t.Fatalf("a late outcome overwrote the stuck job: %+v", j)
		}
	}
	if len(fake.Calls()) != 2 {
		t.Fatalf("provider called %d times after the stuck jobs failed, want 2", len(fake.Calls()))
	}
}

// TestLateWriterWhileSecondExecutionRuns: the first worker's late answer arrives while the
// reclaimed job is running again under another claim. Only the claim tells the two apart (the
// state is running for both, and the answers have different request ids): the late result is
// dropped, the second execution is left alone and its result is the one written.
func TestLateWriterWhileSecondExecutionRuns(t *testing.T) {
	t.Parallel()
	first, second := make(chan struct{}), make(chan struct{})
	var once1, once2 sync.Once
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		switch c.n {
		case 1:
			<-first
		case 2:
			<-second
		}
		return okResponse(c), nil
	})
	e := newEnv(t, fake, func(c *jobs.Config) { c.HeartbeatInterval = time.Hour; c.StaleAfter = 300 * time.Millisecond })
	ctx := context.Background()
	jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	svcB := e.service(fake, func(c *jobs.Config) { c.StaleAfter = time.Minute })
	rtB := jobstest.NewRuntime(t, e.D.Pool, svcB, 1)
	t.Cleanup(func() { once1.Do(func() { close(first) }); once2.Do(func() { close(second) }) })

	s := e.Submit("two executions at once")
	fake.waitCall(t, 10*time.Second)
	oldVehicle := *e.Job(s.JobID).RiverJobID
	jobstest.WaitFor(t, 10*time.Second, "reclaim of the stale job", func() bool {
		r, err := e.S.ReclaimStuck(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return r.Requeued == 1
	})
	if err := rtB.Start(ctx); err != nil {
		t.Fatal(err)
	}
	fake.waitCall(t, 10*time.Second)
	running := e.WaitState(s.JobID, jobs.StateRunning, 5*time.Second)
	if running.Attempt != 2 || !strings.HasPrefix(*running.WorkerClaim, rtB.ID()+"/") {
		t.Fatalf("second execution %+v", running)
	}
	// The first answer arrives now, while the second execution is in flight.
	once1.Do(func() { close(first) })
	jobstest.WaitFor(t, 20*time.Second, "old river job finalised", func() bool { return e.RiverState(oldVehicle) != "running" })
	j := e.Job(s.JobID)
	if j.State != "running" || *j.WorkerClaim != *running.WorkerClaim || j.ResponseID != nil {
		t.Fatalf("the late writer changed the running job: %+v", j)
	}
	if n := e.Count("SELECT count(*) FROM sa_entity WHERE kind = 'response'"); n != 0 {
		t.Fatalf("the late writer wrote %d responses", n)
	}
	once2.Do(func() { close(second) })
	j = e.WaitState(s.JobID, jobs.StateSucceeded, 20*time.Second)
	assertOneResponse(t, e, s.PromptID, j)
	var body string
	if err := e.D.Bun.QueryRowContext(ctx, "SELECT body FROM sa_entity WHERE id = ?", *j.ResponseID).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(body, "answer 2 ") {
		t.Fatalf("response %q is not the second execution's", body)
	}
}

// TestReclaimMovesJobOffOrphanedVehicle: a worker fetched a job's vehicle and died before its
// claim committed, so River holds the vehicle as running while the job is still queued and no
// heartbeat can go stale. The reclaim pass moves the job to a new vehicle (the old one is
// cancelled), keeping its attempt, and a runtime then runs it once; a vehicle fetched only a
// moment ago is left alone.
func TestReclaimMovesJobOffOrphanedVehicle(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.StaleAfter = time.Minute })
	ctx := context.Background()
	orphan := e.Submit("fetched by a worker that died")
	fresh := e.Submit("fetched a moment ago")
	// What a dead fetch leaves behind, written as River's fetch would have.
	for _, tc := range []struct {
		sub jobs.Submitted
		age string
	}{{orphan, "10 minutes"}, {fresh, "1 second"}} {
		if _, err := e.D.Bun.ExecContext(ctx, `UPDATE river_job SET state = 'running', attempt = 1,
			attempted_at = now() - ?::interval, attempted_by = ARRAY['dead-worker'] WHERE id = ?`,
			tc.age, *e.Job(tc.sub.JobID).RiverJobID); err != nil {
			t.Fatal(err)
		}
	}
	oldVehicle, freshVehicle := *e.Job(orphan.JobID).RiverJobID, *e.Job(fresh.JobID).RiverJobID
	rep, err := e.S.ReclaimStuck(ctx)
	if err != nil || rep != (maintenance.ReclaimReport{Revehicled: 1}) {
		t.Fatalf("reclaim %+v, %v", rep, err)
	}
	j := e.Job(orphan.JobID)
	if j.State != "queued" || j.Attempt != 1 || *j.RiverJobID == oldVehicle {
		t.Fatalf("orphaned job after reclaim: state %s attempt %d vehicle %d (was %d)", j.State, j.Attempt, *j.RiverJobID, oldVehicle)
	}
	if m := e.riverMeta(oldVehicle); m["cancel_attempted_at"] == nil {
		t.Errorf("old vehicle not cancelled: metadata %v", m)
	}
	if f := e.Job(fresh.JobID); *f.RiverJobID != freshVehicle || f.State != "queued" {
		t.Fatalf("fresh job touched: %+v", f)
	}
	if again, err := e.S.ReclaimStuck(ctx); err != nil || again != (maintenance.ReclaimReport{}) {
		t.Fatalf("second reclaim %+v, %v", again, err)
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	e.WaitState(orphan.JobID, jobs.StateSucceeded, 10*time.Second)
	if n := e.Count("SELECT count(*) FROM sa_ledger WHERE job_id = ?", orphan.JobID); n != 1 {
		t.Errorf("%d ledger rows for the moved job, want 1", n)
	}
}
