package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/feed"
	"asterion/jobs/governor"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// TestAsyncExecutionProof follows one prompt through its execution: queued → running → succeeded
// with every row the completion writes, the operation mirrored with a verifiable history, and
// the change feed delivering the three states in order.
func TestAsyncExecutionProof(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	hub := startHub(t, e)
	sub := hub.Subscribe(e.V.Scope(), 64)
	defer sub.Close()

	s := e.Submit("what is async? #sim:latency=300ms")

	// Accepted: prompt, queued job, River vehicle, pending operation with one history entry.
	if s.State != jobs.StateQueued || s.Replayed {
		t.Fatalf("submitted %+v, want queued and not replayed", s)
	}
	if err := s.Operation.Validate(); err != nil {
		t.Fatalf("handle does not validate: %v", err)
	}
	if s.Operation.Status != deferred.StatusPending || s.Operation.Kind != jobs.KindPromptExecute ||
		s.Operation.Subject["prompt_id"] != s.PromptID.String() || s.Operation.Subject["job_id"] != s.JobID.String() {
		t.Fatalf("handle %+v does not describe the submission", s.Operation)
	}
	var prompt db.Entity
	if err := e.D.Bun.NewSelect().Model(&prompt).Where("id = ?", s.PromptID).Scan(ctx); err != nil {
		t.Fatalf("prompt entity: %v", err)
	}
	if prompt.Kind != "prompt" || prompt.CorrelationID != prompt.ID || prompt.ParentID != nil || prompt.OrgID != e.O || prompt.CreatedBy != e.U {
		t.Fatalf("prompt entity %+v", prompt)
	}
	j := e.Job(s.JobID)
	if j.State != "queued" || j.PromptID != s.PromptID || j.RiverJobID == nil || j.OperationID == nil ||
		*j.OperationID != s.Operation.OperationID || j.Priority != 50 || j.Attempt != 1 || j.MaxAttempts != 3 ||
		j.WorkerClaim != nil || j.StartedAt != nil {
		t.Fatalf("queued job row %+v", j)
	}
	if st := e.RiverState(*j.RiverJobID); st != "available" {
		t.Fatalf("river job state %q, want available", st)
	}
	var args jobs.PromptArgs
	var rawArgs []byte
	var riverPrio int
	if err := e.D.Bun.QueryRowContext(ctx, "SELECT args, priority FROM river_job WHERE id = ?", *j.RiverJobID).Scan(&rawArgs, &riverPrio); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(rawArgs, &args); err != nil || args.JobID != s.JobID || riverPrio != jobs.RiverPriority(50) {
		t.Fatalf("river job args %s priority %d", rawArgs, riverPrio)
	}
	op := e.Operation(s.Operation.OperationID)
	if op.Status != "pending" || op.Kind != jobs.KindPromptExecute || op.OrgID != e.O || op.CreatedBy != e.U || op.CorrelationID != s.PromptID {
		t.Fatalf("operation row %+v", op)
	}
	if h := e.History(op.ID); len(h) != 1 || h[0].Status != "pending" || h[0].Seq != 1 || h[0].PrevDigest != deferred.GenesisDigest {
		t.Fatalf("history after accept: %+v", h)
	}

	rt := jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	running := e.WaitState(s.JobID, jobs.StateRunning, 10*time.Second)
	if running.WorkerClaim == nil || !strings.HasPrefix(*running.WorkerClaim, rt.ID()+"/") || running.ClaimedAt == nil ||
		running.StartedAt == nil || running.RunningHeartbeatAt == nil || running.ResponseID != nil {
		t.Fatalf("running row %+v", running)
	}
	if st := e.Operation(op.ID).Status; st != "running" {
		t.Fatalf("operation status while running = %q", st)
	}
	j = e.WaitState(s.JobID, jobs.StateSucceeded, 10*time.Second)
	if j.ResponseID == nil || j.FinishedAt == nil || j.FinishedAt.Before(*j.StartedAt) || j.ErrorKind != nil || j.Attempt != 1 {
		t.Fatalf("succeeded row %+v", j)
	}

	var resp db.Entity
	if err := e.D.Bun.NewSelect().Model(&resp).Where("id = ?", *j.ResponseID).Scan(ctx); err != nil {
		t.Fatalf("response entity: %v", err)
	}
	if resp.Kind != "response" || resp.ParentID == nil || *resp.ParentID != s.PromptID || resp.CorrelationID != s.PromptID ||
		!strings.HasPrefix(resp.Body, "Simulated answer to: what is async?") || resp.OrgID != e.O {
		t.Fatalf("response entity %+v", resp)
	}
	if n := e.Count("SELECT count(*) FROM sa_entity WHERE kind = 'response' AND parent_id = ?", s.PromptID); n != 1 {
		t.Fatalf("%d responses, want 1", n)
	}
	if n := e.Count("SELECT count(*) FROM sa_edge WHERE kind = 'flows-to' AND from_id = ? AND to_id = ?", s.PromptID, resp.ID); n != 1 {
		t.Fatalf("%d flows-to edges, want 1", n)
	}
	if n := e.Count("SELECT count(*) FROM sa_ledger WHERE job_id = ? AND prompt_id = ? AND response_id = ? AND provider = 'sim'", s.JobID, s.PromptID, resp.ID); n != 1 {
		t.Fatalf("%d ledger rows, want 1", n)
	}
	if n := e.Count("SELECT count(*) FROM sa_audit WHERE action = 'job.succeeded' AND subject_type = 'job' AND subject_id = ?", s.JobID.String()); n != 1 {
		t.Fatalf("%d audit rows, want 1", n)
	}
	jobstest.WaitFor(t, 10*time.Second, "river job completed", func() bool { return e.RiverState(*j.RiverJobID) == "completed" })

	// The operation completed with the response in its result and a verifiable history.
	op = e.Operation(op.ID)
	if op.Status != "completed" || op.TerminalAt == nil {
		t.Fatalf("operation %+v, want completed", op)
	}
	var result map[string]string
	if err := json.Unmarshal(op.Result, &result); err != nil || result["response_id"] != resp.ID.String() || result["prompt_id"] != s.PromptID.String() {
		t.Fatalf("operation result %s", op.Result)
	}
	doc, err := jobs.StatusDocOf(op)
	if err != nil || doc.Validate() != nil || !doc.Terminal() {
		t.Fatalf("status document %+v: %v", doc, err)
	}
	hist := e.History(op.ID)
	var statuses []string
	entries := make([]deferred.HistoryEntry, len(hist))
	for i, h := range hist {
		statuses = append(statuses, h.Status)
		entries[i] = deferred.HistoryEntry{Seq: h.Seq, Status: deferred.Status(h.Status), At: h.At, DocDigest: h.DocDigest,
			PrevDigest: h.PrevDigest, EntryDigest: h.EntryDigest}
	}
	if got := strings.Join(statuses, ","); got != "pending,running,completed" {
		t.Fatalf("history statuses %s", got)
	}
	if at, err := deferred.VerifyChain(entries); at != -1 || err != nil {
		t.Fatalf("history chain broken at %d: %v", at, err)
	}
	// The last entry digests the document the status endpoint serves.
	raw, _ := json.Marshal(doc)
	canon, _ := deferred.CanonicalJSON(json.RawMessage(raw))
	if deferred.Digest(canon) != hist[len(hist)-1].DocDigest {
		t.Fatalf("last history entry does not digest the current status document")
	}

	// The subscriber saw queued, running, succeeded in order with increasing seq.
	var got []feed.Event
	deadline := time.After(10 * time.Second)
	for len(got) < 3 {
		select {
		case ev, ok := <-sub.C:
			if !ok {
				t.Fatalf("subscription closed (lagged %v)", sub.Lagged())
			}
			if ev.JobID != nil && *ev.JobID == s.JobID {
				got = append(got, ev)
			}
		case <-deadline:
			t.Fatalf("feed delivered %d events, want 3", len(got))
		}
	}
	var states []string
	for i, ev := range got {
		var p jobs.JobEvent
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		states = append(states, p.State)
		if i > 0 && ev.Seq <= got[i-1].Seq {
			t.Fatalf("seq %d after %d", ev.Seq, got[i-1].Seq)
		}
		if ev.OrgID != e.O || ev.UserID != e.U || ev.PromptID == nil || *ev.PromptID != s.PromptID {
			t.Fatalf("event %+v", ev)
		}
	}
	if strings.Join(states, ",") != "queued,running,succeeded" {
		t.Fatalf("feed states %v", states)
	}
	// Replay from the table agrees with what was pushed.
	replayed, err := e.R.ReplayEvents(ctx, 0, e.V.Scope(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(replayed) != 3 || replayed[0].Seq != got[0].Seq || replayed[2].Seq != got[2].Seq {
		t.Fatalf("replay %+v differs from delivered %+v", replayed, got)
	}
}

// TestPriorityQueueProof checks that priorities order the queue: with one worker started after
// the jobs were queued, lower priority numbers run first, and within a band the oldest first.
func TestPriorityQueueProof(t *testing.T) {
	t.Parallel()
	fake := newFake(nil)
	e := newEnv(t, fake)
	rt := jobstest.NewRuntime(t, e.D.Pool, e.S, 1)
	prios := []int{90, 50, 10, 45, 0, 100}
	ids := map[string]int{}
	var subs []jobs.Submitted
	for _, p := range prios {
		s := e.Submit(fmt.Sprintf("priority %d", p), func(r *jobs.SubmitRequest) { r.Priority = intp(p) })
		ids[s.JobID.String()] = p
		subs = append(subs, s)
	}
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		e.WaitState(s.JobID, jobs.StateSucceeded, 20*time.Second)
	}
	var order []int
	for _, c := range fake.Calls() {
		order = append(order, ids[c.req.JobID])
	}
	// Bands: 0 and 10 → 1; 50 and 45 → 3 (50 is older); 90 and 100 → 4 (90 is older).
	want := []int{10, 0, 50, 45, 90, 100}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("provider called in priority order %v, want %v", order, want)
	}
	// The rows agree: started_at follows the same order and runs never overlap.
	var rows []db.Job
	if err := e.D.Bun.NewSelect().Model(&rows).OrderExpr("started_at").Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	var byStart []int
	for i, r := range rows {
		byStart = append(byStart, r.Priority)
		if i > 0 && r.StartedAt.Before(*rows[i-1].FinishedAt) {
			t.Fatalf("job %d started before the previous finished with one worker", i)
		}
	}
	if fmt.Sprint(byStart) != fmt.Sprint(want) {
		t.Fatalf("started_at order %v, want %v", byStart, want)
	}
	// Priority is kept exactly on the job, and mapped onto River's band.
	for _, s := range subs {
		j := e.Job(s.JobID)
		var rp int
		if err := e.D.Bun.QueryRowContext(context.Background(), "SELECT priority FROM river_job WHERE id = ?", *j.RiverJobID).Scan(&rp); err != nil {
			t.Fatal(err)
		}
		if j.Priority != ids[s.JobID.String()] || rp != jobs.RiverPriority(j.Priority) {
			t.Fatalf("job priority %d river %d", j.Priority, rp)
		}
	}
}

// TestConcurrentSubmitsToDifferentParents: 200 continuations submitted from 20 goroutines,
// each to its own parent, keep their parent and correlation and run exactly once.
func TestConcurrentSubmitsToDifferentParents(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	jobstest.StartRuntime(t, e.D.Pool, e.S, 8)
	const n, g = 200, 20
	ctx := context.Background()

	submitAll := func(texts []string, parents []uuid.UUID) []jobs.Submitted {
		out := make([]jobs.Submitted, len(texts))
		var wg sync.WaitGroup
		errs := make(chan error, len(texts))
		for w := 0; w < g; w++ {
			wg.Add(1)
			go func(w int) {
				defer wg.Done()
				for i := w; i < len(texts); i += g {
					req := jobs.SubmitRequest{Viewer: e.V, Prompt: texts[i]}
					if parents != nil {
						p := parents[i]
						req.ParentID = &p
					}
					s, err := e.S.Submit(ctx, req)
					if err != nil {
						errs <- fmt.Errorf("submit %d: %w", i, err)
						return
					}
					out[i] = s
				}
			}(w)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		return out
	}
	waitAll := func(subs []jobs.Submitted) {
		ids := make([]uuid.UUID, len(subs))
		for i, s := range subs {
			ids[i] = s.JobID
		}
		// A failed wait shows the queue (t.Fatal runs the deferred calls).
		defer func() {
			if t.Failed() {
				jobstest.DumpQueue(e.T, e.D)
			}
		}()
		jobstest.WaitFor(t, 150*time.Second, "every job to succeed", func() bool {
			return e.Count("SELECT count(*) FROM sa_job WHERE id = ANY(?::uuid[]) AND state = 'succeeded'", uuidArray(ids)) == len(ids)
		})
	}

	parentTexts := make([]string, n)
	for i := range parentTexts {
		parentTexts[i] = fmt.Sprintf("parent %d", i)
	}
	start := time.Now()
	parents := submitAll(parentTexts, nil)
	t.Logf("%d parents submitted in %s", n, time.Since(start))
	waitAll(parents)
	t.Logf("parents done after %s", time.Since(start))

	childTexts := make([]string, n)
	parentIDs := make([]uuid.UUID, n)
	for i := range childTexts {
		childTexts[i] = fmt.Sprintf("child of %d", i)
		parentIDs[i] = parents[i].PromptID
	}
	start = time.Now()
	children := submitAll(childTexts, parentIDs)
	t.Logf("%d children submitted in %s", n, time.Since(start))
	waitAll(children)
	t.Logf("children done after %s", time.Since(start))

	var prompts []db.Entity
	if err := e.D.Bun.NewSelect().Model(&prompts).Where("kind = 'prompt'").Scan(ctx); err != nil {
		t.Fatal(err)
	}
	byID := map[uuid.UUID]db.Entity{}
	for _, p := range prompts {
		byID[p.ID] = p
	}
	if len(byID) != 2*n {
		t.Fatalf("%d prompts, want %d", len(byID), 2*n)
	}
	for i, c := range children {
		child, parent := byID[c.PromptID], byID[parents[i].PromptID]
		if child.ParentID == nil || *child.ParentID != parent.ID {
			t.Fatalf("child %d has parent %v, want %s", i, child.ParentID, parent.ID)
		}
		if child.CausationID == nil || *child.CausationID != parent.ID {
			t.Fatalf("child %d has causation %v, want %s", i, child.CausationID, parent.ID)
		}
		if child.CorrelationID != parent.CorrelationID || parent.CorrelationID != parent.ID {
			t.Fatalf("child %d correlation %s, parent's %s", i, child.CorrelationID, parent.CorrelationID)
		}
		if child.Body != childTexts[i] {
			t.Fatalf("child %d body %q", i, child.Body)
		}
	}
	checks := map[string]string{
		"prompts without exactly one job": `SELECT count(*) FROM sa_entity p WHERE p.kind = 'prompt'
			AND (SELECT count(*) FROM sa_job j WHERE j.prompt_id = p.id) <> 1`,
		"jobs not succeeded at attempt 1": `SELECT count(*) FROM sa_job WHERE state <> 'succeeded' OR attempt <> 1`,
		"prompts without exactly one response": `SELECT count(*) FROM sa_entity p WHERE p.kind = 'prompt'
			AND (SELECT count(*) FROM sa_entity r WHERE r.kind = 'response' AND r.parent_id = p.id) <> 1`,
		"responses in another correlation than their prompt": `SELECT count(*) FROM sa_entity r JOIN sa_entity p ON p.id = r.parent_id
			WHERE r.kind = 'response' AND r.correlation_id <> p.correlation_id`,
		"jobs whose response_id is not their prompt's response": `SELECT count(*) FROM sa_job j LEFT JOIN sa_entity r ON r.id = j.response_id
			WHERE r.id IS NULL OR r.parent_id <> j.prompt_id`,
		"jobs without exactly one ledger row": `SELECT count(*) FROM sa_job j
			WHERE (SELECT count(*) FROM sa_ledger l WHERE l.job_id = j.id AND l.response_id = j.response_id) <> 1`,
		"jobs without exactly one succeeded event": `SELECT count(*) FROM sa_job j
			WHERE (SELECT count(*) FROM sa_event e WHERE e.job_id = j.id AND e.payload->>'state' = 'succeeded') <> 1`,
		"jobs without exactly one success audit": `SELECT count(*) FROM sa_job j
			WHERE (SELECT count(*) FROM sa_audit a WHERE a.action = 'job.succeeded' AND a.subject_id = j.id::text) <> 1`,
		"operations not completed": `SELECT count(*) FROM sa_job j JOIN sa_operation o ON o.id = j.operation_id WHERE o.status <> 'completed'`,
		"edges not exactly one per prompt": `SELECT count(*) FROM sa_entity p WHERE p.kind = 'prompt'
			AND (SELECT count(*) FROM sa_edge x WHERE x.from_id = p.id AND x.kind = 'flows-to') <> 1`,
	}
	keys := make([]string, 0, len(checks))
	for k := range checks {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if bad := e.Count(checks[k]); bad != 0 {
			t.Errorf("%d %s", bad, k)
		}
	}
	if total := e.Count("SELECT count(*) FROM sa_ledger"); total != 2*n {
		t.Errorf("%d ledger rows, want %d", total, 2*n)
	}
}

// uuidArray renders ids as a PostgreSQL array literal.
func uuidArray(ids []uuid.UUID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = id.String()
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// TestRunSync is the synchronous path (design phase 1): one provider call in-process, a job
// row that ends succeeded or failed without a River job or a retry.
func TestRunSync(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	ok, err := e.S.RunSync(ctx, e.V, "  hello sync  ")
	if err != nil {
		t.Fatal(err)
	}
	j := ok.Job
	if j.State != "succeeded" || j.Attempt != 1 || j.MaxAttempts != 1 || j.RiverJobID != nil || ok.Response == nil ||
		j.ResponseID == nil || *j.ResponseID != ok.Response.ID || ok.Response.ParentID == nil || *ok.Response.ParentID != j.PromptID {
		t.Fatalf("sync result %+v, response %+v", j, ok.Response)
	}
	if op := e.Operation(*j.OperationID); op.Status != "completed" {
		t.Fatalf("operation %s", op.Status)
	}
	if got := eventStates(e.jobEvents(j.ID)); got != "running/1 succeeded/1" && got != "queued/1 running/1 succeeded/1" {
		t.Fatalf("state changes %q", got)
	}
	assertOneResponse(t, e, j.PromptID, j)
	bad, err := e.S.RunSync(ctx, e.V, "flaky #sim:fail=provider_5xx")
	if err != nil {
		t.Fatal(err)
	}
	if bad.Job.State != "failed" || bad.Job.Attempt != 1 || bad.Job.ErrorKind == nil || *bad.Job.ErrorKind != "provider_5xx" || bad.Response != nil {
		t.Fatalf("failed sync run %+v", bad.Job)
	}
	var ve *jobs.ValidationError
	if _, err := e.S.RunSync(ctx, e.V, "   "); !errors.As(err, &ve) {
		t.Fatalf("blank sync prompt: %v", err)
	}
	if n := e.Count("SELECT count(*) FROM river_job WHERE kind = ?", jobs.KindPromptExecute); n != 0 {
		t.Fatalf("%d river jobs for synchronous runs", n)
	}
}

// TestRunSyncHeldByFlowControl: the synchronous run is held as a worker's claim is. It takes
// its call's slot from the provider governor and starts no sooner; a paused org, an org at its
// cap of running jobs and a model an operator paused each refuse it with ErrHeld, writing
// nothing and calling no provider.
func TestRunSyncHeldByFlowControl(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	refused := func(t *testing.T, e *tenv, what string) {
		t.Helper()
		before := e.Count("SELECT count(*) FROM sa_job")
		_, err := e.S.RunSync(ctx, e.V, "held "+what)
		if !errors.Is(err, jobs.ErrHeld) {
			t.Fatalf("a synchronous run %s: %v, want ErrHeld", what, err)
		}
		if n := e.Count("SELECT count(*) FROM sa_job"); n != before {
			t.Fatalf("%d jobs after a refused run, %d before", n, before)
		}
	}
	t.Run("a paused org", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, jobstest.InstantSim())
		if _, err := e.D.Bun.ExecContext(ctx, "INSERT INTO sa_org_share (org_id, paused) VALUES (?, true)", e.O); err != nil {
			t.Fatal(err)
		}
		refused(t, e, "while its org is paused")
	})
	t.Run("an org at its cap", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.OrgMaxRunning = 1 })
		jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
		hang := e.Submit("#sim:hang until the test ends")
		e.WaitState(hang.JobID, jobs.StateRunning, 30*time.Second)
		refused(t, e, "while its org runs its most jobs")
		if _, err := e.S.Cancel(ctx, e.V, hang.JobID, jobs.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
		e.WaitState(hang.JobID, jobs.StateCancelled, 30*time.Second)
		if res, err := e.S.RunSync(ctx, e.V, "below the cap again"); err != nil || res.Job.State != "succeeded" {
			t.Fatalf("a run below the cap: %+v, %v", res.Job, err)
		}
	})
	t.Run("the governor", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		var grants []governor.Grant
		var gov *governor.Governor
		e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) {
			g, err := governor.New(governor.Config{DB: c.DB, RPM: 600, OnGrant: func(_ string, gr governor.Grant) {
				mu.Lock()
				grants = append(grants, gr)
				mu.Unlock()
			}})
			if err != nil {
				t.Fatal(err)
			}
			c.Governor, gov = g, g
		})
		res, err := e.S.RunSync(ctx, e.V, "within the governor")
		if err != nil || res.Job.State != "succeeded" {
			t.Fatalf("a governed run: %+v, %v", res.Job, err)
		}
		mu.Lock()
		got := slices.Clone(grants)
		mu.Unlock()
		if len(got) != 1 {
			t.Fatalf("%d slots granted for one synchronous call, want 1", len(got))
		}
		if res.Job.StartedAt == nil || res.Job.StartedAt.Before(got[0].At) {
			t.Fatalf("started at %v, before its slot %s", res.Job.StartedAt, got[0].At)
		}
		if err := gov.Pause(ctx, provider.SimModel, governor.Pauser{Role: "operator", Actor: "test"}); err != nil {
			t.Fatal(err)
		}
		refused(t, e, "while an operator paused its model")
	})
}
