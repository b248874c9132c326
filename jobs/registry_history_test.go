package jobs_test

import (
	"context"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/jobstest"
)

// completedPrompts runs n prompts to completion with a worker pool that is stopped afterwards.
func completedPrompts(t *testing.T, e *tenv, n int) []jobs.Submitted {
	t.Helper()
	rt := jobstest.NewRuntime(t, e.D.Pool, e.S, 4)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	subs := make([]jobs.Submitted, n)
	for i := range subs {
		subs[i] = e.Submit("history please")
	}
	for _, sub := range subs {
		e.WaitState(sub.JobID, jobs.StateSucceeded, 10*time.Second)
	}
	if err := rt.Stop(context.Background(), 2*time.Second); err != nil {
		t.Fatal(err)
	}
	return subs
}

func TestHistoryTamperedRowIsDetected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	tampers := []struct{ name, sql string }{
		{"status rewritten", "UPDATE sa_operation_history SET status = 'failed' WHERE operation_id = ? AND seq = 2"},
		{"doc digest rewritten", "UPDATE sa_operation_history SET doc_digest = repeat('0', 64) WHERE operation_id = ? AND seq = 2"},
		{"time moved", "UPDATE sa_operation_history SET at = at - interval '1 second' WHERE operation_id = ? AND seq = 2"},
		{"entry deleted", "DELETE FROM sa_operation_history WHERE operation_id = ? AND seq = 2"},
	}
	subs := completedPrompts(t, e, len(tampers))
	for i, tc := range tampers {
		id := subs[i].Operation.OperationID
		d, err := e.R.GetOperation(ctx, e.Op, id)
		if err != nil || d.ChainBrokenAt != -1 || len(d.History) != 3 {
			t.Fatalf("%s: untouched history: %v, broken at %d, %d entries", tc.name, err, d.ChainBrokenAt, len(d.History))
		}
		if _, err := e.D.Bun.ExecContext(ctx, tc.sql, id); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		d, err = e.R.GetOperation(ctx, e.Op, id)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d.ChainBrokenAt != 1 || d.ChainError == "" {
			t.Errorf("%s: broken at %d (%q), want entry 1", tc.name, d.ChainBrokenAt, d.ChainError)
		}
	}
	// Cutting entries off the end leaves a chain that verifies on its own: the head recorded
	// on the registry row still shows it.
	cuts := []struct{ name, sql string }{
		{"last entry deleted", "DELETE FROM sa_operation_history WHERE operation_id = ? AND seq = 3"},
		{"last entry replaced by a forged tail", "UPDATE sa_operation_history SET entry_digest = repeat('a', 64) WHERE operation_id = ? AND seq = 3"},
	}
	cutSubs := completedPrompts(t, e, len(cuts))
	for i, tc := range cuts {
		id := cutSubs[i].Operation.OperationID
		if _, err := e.D.Bun.ExecContext(ctx, tc.sql, id); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		d, err := e.R.GetOperation(ctx, e.Op, id)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if d.ChainBrokenAt == -1 || d.ChainError == "" {
			t.Errorf("%s: not detected (%d entries)", tc.name, len(d.History))
		}
	}
	// The others are untouched by a neighbour's tampering.
	if d, err := e.R.GetOperation(ctx, e.Op, subs[0].Operation.OperationID); err != nil || d.ChainBrokenAt != 1 {
		t.Errorf("first operation: %v, broken at %d", err, d.ChainBrokenAt)
	}
}

func TestHistorySurvivesRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	sub := completedPrompts(t, e, 1)[0]
	id := sub.Operation.OperationID
	ctx := context.Background()
	before, err := e.R.GetOperation(ctx, e.V, id)
	if err != nil {
		t.Fatal(err)
	}
	// A new process: a new Service over the same database.
	s2 := e.service(jobstest.InstantSim())
	r2 := jobstest.NewReads(t, s2)
	after, err := r2.GetOperation(ctx, e.V, id)
	if err != nil {
		t.Fatal(err)
	}
	if after.ChainBrokenAt != -1 || len(after.History) != len(before.History) || len(after.History) != 3 {
		t.Fatalf("after restart: broken at %d, %d entries (before %d)", after.ChainBrokenAt, len(after.History), len(before.History))
	}
	for i := range before.History {
		if before.History[i].EntryDigest != after.History[i].EntryDigest || before.History[i].Status != after.History[i].Status {
			t.Errorf("entry %d changed across the restart: %+v → %+v", i, before.History[i], after.History[i])
		}
	}
	// The new process keeps writing verified histories: a retry supersedes the job.
	jobstest.StartRuntime(t, e.D.Pool, s2, 1)
	re, err := s2.Retry(ctx, e.V, sub.JobID, jobs.Actor{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	e.WaitState(re.Job.ID, jobs.StateSucceeded, 10*time.Second)
	d2, err := r2.GetOperation(ctx, e.V, re.Operation.OperationID)
	if err != nil || d2.ChainBrokenAt != -1 || len(d2.History) != 3 {
		t.Fatalf("successor's history: %v, broken at %d, %d entries", err, d2.ChainBrokenAt, len(d2.History))
	}
	old, err := r2.GetOperation(ctx, e.V, id)
	if err != nil || old.ChainBrokenAt != -1 || len(old.History) != 3 || old.Operation.SuccessorID == nil ||
		*old.Operation.SuccessorID != re.Operation.OperationID {
		t.Fatalf("old operation after retry: %v, broken at %d, successor %v", err, old.ChainBrokenAt, old.Operation.SuccessorID)
	}
}
