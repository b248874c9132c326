package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/jobstest"
)

// rowCounts counts every table a submission writes.
func (e *tenv) rowCounts() map[string]int {
	e.T.Helper()
	out := map[string]int{}
	for _, tbl := range []string{"sa_entity", "sa_job", "sa_operation", "sa_operation_history", "river_job", "sa_event", "sa_idempotency", "sa_audit"} {
		out[tbl] = e.Count("SELECT count(*) FROM " + tbl)
	}
	return out
}

func TestSubmitIdempotency(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.Models = []string{"sim-1", "other-model"} })
	ctx := context.Background()
	withKey := func(key string) func(*jobs.SubmitRequest) {
		return func(r *jobs.SubmitRequest) { r.IdempotencyKey = key }
	}

	first := e.Submit("same body", withKey("key-1"))
	again := e.Submit("same body", withKey("key-1"))
	if first.Replayed || !again.Replayed {
		t.Fatalf("replayed flags %v, %v", first.Replayed, again.Replayed)
	}
	if again.PromptID != first.PromptID || again.JobID != first.JobID || again.Operation.OperationID != first.Operation.OperationID ||
		again.State != jobs.StateQueued {
		t.Fatalf("replay %+v differs from %+v", again, first)
	}
	if again.Operation.StatusHref != first.Operation.StatusHref || !again.Operation.AcceptedAt.Equal(first.Operation.AcceptedAt) ||
		again.Operation.CorrelationID != first.Operation.CorrelationID {
		t.Fatalf("replayed handle %+v differs from %+v", again.Operation, first.Operation)
	}
	// Surrounding white space is not part of the body.
	if trimmed := e.Submit("  same body\n", withKey("key-1")); trimmed.JobID != first.JobID {
		t.Fatalf("the same body with padding got a new job")
	}
	if n := e.Count("SELECT count(*) FROM sa_entity WHERE kind = 'prompt'"); n != 1 {
		t.Fatalf("%d prompts after replays, want 1", n)
	}

	// Same key, different body: conflict, nothing written.
	before := e.rowCounts()
	for _, mod := range []func(*jobs.SubmitRequest){
		func(r *jobs.SubmitRequest) { r.Prompt = "another body" },
		func(r *jobs.SubmitRequest) { r.Priority = intp(10) },
		func(r *jobs.SubmitRequest) { r.MaxAttempts = intp(5) },
		func(r *jobs.SubmitRequest) { r.Options.Model = "other-model" },
		func(r *jobs.SubmitRequest) { at := time.Now().Add(time.Hour); r.ScheduledFor = &at },
	} {
		req := jobs.SubmitRequest{Viewer: e.V, Prompt: "same body", IdempotencyKey: "key-1"}
		mod(&req)
		if _, err := e.S.Submit(ctx, req); !errors.Is(err, jobs.ErrIdempotencyConflict) {
			t.Fatalf("reused key with %+v: %v, want ErrIdempotencyConflict", req, err)
		}
	}
	if after := e.rowCounts(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Fatalf("a conflicting key wrote rows: %v → %v", before, after)
	}
	// The key is per user: another user's identical key is a new submission.
	other := jobstest.CreateUser(t, e.D.Bun, e.O, "member")
	o, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: jobs.Viewer{OrgID: e.O, UserID: other}, Prompt: "same body", IdempotencyKey: "key-1"})
	if err != nil || o.Replayed || o.JobID == first.JobID {
		t.Fatalf("another user's key: %+v, %v", o, err)
	}

	// Five concurrent twins get one submission.
	const twins = 5
	var wg sync.WaitGroup
	got := make([]jobs.Submitted, twins)
	errs := make([]error, twins)
	for i := 0; i < twins; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			got[i], errs[i] = e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Prompt: "concurrent body", IdempotencyKey: "key-2",
				Priority: intp(30)})
		}(i)
	}
	wg.Wait()
	fresh := 0
	for i := range got {
		if errs[i] != nil {
			t.Fatalf("twin %d: %v", i, errs[i])
		}
		if got[i].PromptID != got[0].PromptID || got[i].JobID != got[0].JobID || got[i].Operation.OperationID != got[0].Operation.OperationID {
			t.Fatalf("twin %d got %+v, twin 0 got %+v", i, got[i], got[0])
		}
		if !got[i].Replayed {
			fresh++
		}
	}
	if fresh != 1 {
		t.Fatalf("%d twins were not replays, want 1", fresh)
	}
	if n := e.Count("SELECT count(*) FROM sa_entity WHERE body = 'concurrent body'"); n != 1 {
		t.Fatalf("%d prompt rows for concurrent twins", n)
	}
	if n := e.Count("SELECT count(*) FROM sa_job WHERE prompt_id = ?", got[0].PromptID); n != 1 {
		t.Fatalf("%d jobs for concurrent twins", n)
	}
	if n := e.Count("SELECT count(*) FROM river_job"); n != e.Count("SELECT count(*) FROM sa_job") {
		t.Fatalf("%d river jobs for %d jobs", n, e.Count("SELECT count(*) FROM sa_job"))
	}
	// Without a key, the same body twice is two submissions.
	a, b := e.Submit("no key"), e.Submit("no key")
	if a.JobID == b.JobID || a.PromptID == b.PromptID || a.Operation.OperationID == b.Operation.OperationID {
		t.Fatal("two submissions without a key share ids")
	}
}

// TestIdempotentReplayOutlivesTheRules: a replay asks for nothing new, so the rules that would
// refuse the same request sent afresh do not refuse it: the user's submit rate spent, and a
// scheduled time that has come and gone. The same rules still refuse new submissions, and a
// different schedule under the key is a conflict.
func TestIdempotentReplayOutlivesTheRules(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		now = time.Now()
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	// One submit every ten seconds, a burst of one.
	e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.SubmitRate = 0.1; c.Now = clock })
	ctx := context.Background()
	at := now.Add(30 * time.Second)
	asked := func() jobs.SubmitRequest {
		local := at.In(time.FixedZone("east", 2*60*60))
		return jobs.SubmitRequest{Viewer: e.V, Prompt: "scheduled", IdempotencyKey: "sched-1", ScheduledFor: &local}
	}
	first, err := e.S.Submit(ctx, asked())
	if err != nil {
		t.Fatal(err)
	}
	var re *admit.SubmitRateError
	if _, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Prompt: "a new one"}); !errors.As(err, &re) {
		t.Fatalf("a new submit past the rate: %v, want a SubmitRateError", err)
	}
	again, err := e.S.Submit(ctx, asked())
	if err != nil || !again.Replayed || again.JobID != first.JobID {
		t.Fatalf("a replay past the rate: %+v, %v; want the first submission", again, err)
	}
	mu.Lock()
	now = now.Add(2 * time.Minute)
	mu.Unlock()
	fresh := asked()
	fresh.IdempotencyKey = "sched-2"
	var verr *jobs.ValidationError
	if _, err := e.S.Submit(ctx, fresh); !errors.As(err, &verr) || verr.Fields["scheduled_for"] == "" {
		t.Fatalf("a new submit for a time gone: %v, want a field error on scheduled_for", err)
	}
	late, err := e.S.Submit(ctx, asked())
	if err != nil || !late.Replayed || late.JobID != first.JobID || late.Operation.OperationID != first.Operation.OperationID {
		t.Fatalf("a replay once the schedule is past: %+v, %v; want the first submission", late, err)
	}
	other := asked()
	moved := at.Add(time.Minute)
	other.ScheduledFor = &moved
	if _, err := e.S.Submit(ctx, other); !errors.Is(err, jobs.ErrIdempotencyConflict) {
		t.Fatalf("the key with another schedule: %v, want ErrIdempotencyConflict", err)
	}
	if n := e.Count("SELECT count(*) FROM sa_job"); n != 1 {
		t.Fatalf("%d jobs, want the first only", n)
	}
}

func TestSubmitValidationWritesNothing(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	parent := e.Submit("a parent")
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "member")
	otherEnvSvc := e.service(jobstest.InstantSim())
	foreign, err := otherEnvSvc.Submit(ctx, jobs.SubmitRequest{Viewer: jobs.Viewer{OrgID: otherOrg, UserID: otherUser}, Prompt: "their prompt"})
	if err != nil {
		t.Fatal(err)
	}
	missing := uuid.New()
	cases := []struct {
		name  string
		field string
		mod   func(*jobs.SubmitRequest)
	}{
		{"empty prompt", "prompt", func(r *jobs.SubmitRequest) { r.Prompt = "" }},
		{"blank prompt", "prompt", func(r *jobs.SubmitRequest) { r.Prompt = " \t\n " }},
		{"32769 characters", "prompt", func(r *jobs.SubmitRequest) { r.Prompt = strings.Repeat("a", jobs.MaxPromptChars+1) }},
		{"32769 multibyte characters", "prompt", func(r *jobs.SubmitRequest) { r.Prompt = strings.Repeat("é", jobs.MaxPromptChars+1) }},
		{"invalid UTF-8", "prompt", func(r *jobs.SubmitRequest) { r.Prompt = "bad \xff byte" }},
		{"priority 101", "priority", func(r *jobs.SubmitRequest) { r.Priority = intp(101) }},
		{"priority -1", "priority", func(r *jobs.SubmitRequest) { r.Priority = intp(-1) }},
		{"max_attempts 0", "max_attempts", func(r *jobs.SubmitRequest) { r.MaxAttempts = intp(0) }},
		{"max_attempts 11", "max_attempts", func(r *jobs.SubmitRequest) { r.MaxAttempts = intp(11) }},
		{"missing parent", "parent_id", func(r *jobs.SubmitRequest) { r.ParentID = &missing }},
		{"another org's parent", "parent_id", func(r *jobs.SubmitRequest) { r.ParentID = &foreign.PromptID }},
		{"missing parent with a key", "parent_id", func(r *jobs.SubmitRequest) { r.ParentID = &missing; r.IdempotencyKey = "k-parent" }},
		{"key with a space", "Idempotency-Key", func(r *jobs.SubmitRequest) { r.IdempotencyKey = "a key" }},
		{"key of 256 characters", "Idempotency-Key", func(r *jobs.SubmitRequest) { r.IdempotencyKey = strings.Repeat("k", 256) }},
		{"depth 65", "options.depth", func(r *jobs.SubmitRequest) { r.Options.Depth = intp(65) }},
	}
	for _, c := range cases {
		before := e.rowCounts()
		req := jobs.SubmitRequest{Viewer: e.V, Prompt: "valid"}
		c.mod(&req)
		_, err := e.S.Submit(ctx, req)
		var ve *jobs.ValidationError
		if !errors.As(err, &ve) || !errors.Is(err, jobs.ErrInvalid) {
			t.Errorf("%s: %v, want a ValidationError", c.name, err)
			continue
		}
		if _, ok := ve.Fields[c.field]; !ok || len(ve.Fields) != 1 {
			t.Errorf("%s: fields %v, want only %q", c.name, ve.Fields, c.field)
		}
		if after := e.rowCounts(); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s wrote rows: %v → %v", c.name, before, after)
		}
	}
	// Several broken fields are all named.
	_, err = e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Prompt: "", Priority: intp(200), MaxAttempts: intp(0)})
	var ve *jobs.ValidationError
	if !errors.As(err, &ve) || len(ve.Fields) != 3 {
		t.Fatalf("three broken fields: %v", err)
	}
	// A key used by a rejected request is still free for a valid one.
	s, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Prompt: "now valid", IdempotencyKey: "k-parent"})
	if err != nil || s.Replayed {
		t.Fatalf("key after a rejected request: %+v, %v", s, err)
	}
	// Limits themselves are accepted.
	for _, mod := range []func(*jobs.SubmitRequest){
		func(r *jobs.SubmitRequest) { r.Prompt = strings.Repeat("é", jobs.MaxPromptChars) },
		func(r *jobs.SubmitRequest) { r.Priority = intp(0); r.MaxAttempts = intp(1) },
		func(r *jobs.SubmitRequest) { r.Priority = intp(100); r.MaxAttempts = intp(10) },
		func(r *jobs.SubmitRequest) { r.ParentID = &parent.PromptID },
	} {
		req := jobs.SubmitRequest{Viewer: e.V, Prompt: "edge"}
		mod(&req)
		if _, err := e.S.Submit(ctx, req); err != nil {
			t.Errorf("valid edge request %+v rejected: %v", req.Priority, err)
		}
	}
	// An operator may continue a member's prompt of the same org.
	if _, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.Op, Prompt: "follow-up", ParentID: &parent.PromptID}); err != nil {
		t.Errorf("operator continuing a member's prompt: %v", err)
	}
	// Another member of the same org may not.
	peer := jobstest.CreateUser(t, e.D.Bun, e.O, "member")
	if _, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: jobs.Viewer{OrgID: e.O, UserID: peer}, Prompt: "x", ParentID: &parent.PromptID}); err == nil {
		t.Errorf("a member continued another member's prompt")
	}
}

// TestCommitHookRunsAfterCommitsOnly: the hook the server points at its change-feed hub runs
// once a submit has committed, and not for a submit that wrote nothing (a client mistake) or
// whose transaction rolled back (an idempotency conflict).
func TestCommitHookRunsAfterCommitsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	var n int
	var mu sync.Mutex
	e.S.NotifyCommits(func() { mu.Lock(); n++; mu.Unlock() })
	count := func() int { mu.Lock(); defer mu.Unlock(); return n }
	e.Submit("first", func(r *jobs.SubmitRequest) { r.IdempotencyKey = "k1" })
	if got := count(); got != 1 {
		t.Fatalf("hook ran %d times after one committed submit, want 1", got)
	}
	if _, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: e.V, Prompt: "  "}); err == nil {
		t.Fatal("a blank prompt was accepted")
	}
	_, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: e.V, Prompt: "other text", IdempotencyKey: "k1"})
	if !errors.Is(err, jobs.ErrIdempotencyConflict) {
		t.Fatalf("reused key with another body: %v, want ErrIdempotencyConflict", err)
	}
	if got := count(); got != 1 {
		t.Fatalf("hook ran %d times, want still 1 after a refused and a rolled-back submit", got)
	}
}
