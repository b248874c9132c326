package jobs_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// TestRetryBySupersede: retrying a failed job creates a new job for the same prompt (attempt
// 1, supersedes the old), the old one becomes superseded while its operation keeps its
// terminal status and names the successor; queued, running and superseded jobs refuse.
func TestRetryBySupersede(t *testing.T) {
	t.Parallel()
	var failedOnce atomic.Bool
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		switch {
		case strings.Contains(c.req.Text, "block"):
			<-ctx.Done()
			return provider.Response{}, ctx.Err()
		case c.req.Text == "fails once" && failedOnce.CompareAndSwap(false, true):
			return provider.Response{}, &provider.Error{Kind: provider.KindProvider4xx, StatusCode: 400, Message: "bad request"}
		}
		return okResponse(c), nil
	})
	e := newEnv(t, fake)
	ctx := context.Background()
	actor := jobs.Actor{UserID: &e.U, Name: "member"}
	rt := jobstest.NewRuntime(t, e.D.Pool, e.S, 2)

	failing := e.Submit("fails once", func(r *jobs.SubmitRequest) { r.Priority = intp(20); r.MaxAttempts = intp(4) })
	blocking := e.Submit("block forever")
	// Queued: no retry.
	if _, err := e.S.Retry(ctx, e.V, blocking.JobID, actor); !errors.Is(err, jobs.ErrConflict) {
		t.Fatalf("retry of a queued job: %v, want ErrConflict", err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	old := e.WaitState(failing.JobID, jobs.StateFailed, 20*time.Second)
	e.WaitState(blocking.JobID, jobs.StateRunning, 20*time.Second)
	// Running: no retry.
	if _, err := e.S.Retry(ctx, e.V, blocking.JobID, actor); !errors.Is(err, jobs.ErrConflict) {
		t.Fatalf("retry of a running job: %v, want ErrConflict", err)
	}
	// Another org cannot see it.
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "admin")
	if _, err := e.S.Retry(ctx, jobs.Viewer{OrgID: otherOrg, UserID: otherUser, OrgWide: true}, old.ID, actor); !errors.Is(err, jobs.ErrNotFound) {
		t.Fatalf("retry from another org: %v, want ErrNotFound", err)
	}
	oldHistory := len(e.History(*old.OperationID))

	r, err := e.S.Retry(ctx, e.V, old.ID, actor)
	if err != nil {
		t.Fatalf("Retry: %v", err)
	}
	nj := r.Job
	if nj.ID == old.ID || nj.PromptID != old.PromptID || nj.Attempt != 1 || nj.State != "queued" || nj.Supersedes == nil ||
		*nj.Supersedes != old.ID || nj.Priority != 20 || nj.MaxAttempts != 4 || nj.RiverJobID == nil || nj.OperationID == nil ||
		*nj.OperationID == *old.OperationID || *nj.OperationID != r.Operation.OperationID {
		t.Fatalf("new job %+v", nj)
	}
	if err := r.Operation.Validate(); err != nil || r.Operation.Subject["job_id"] != nj.ID.String() {
		t.Fatalf("new handle %+v: %v", r.Operation, err)
	}
	if got := e.Job(old.ID); got.State != "superseded" || got.ErrorKind == nil || *got.ErrorKind != "provider_4xx" {
		t.Fatalf("old job after retry %+v", got)
	}
	oldOp := e.Operation(*old.OperationID)
	if oldOp.Status != "failed" || oldOp.SuccessorID == nil || *oldOp.SuccessorID != r.Operation.OperationID {
		t.Fatalf("old operation %s successor %v, want failed naming %s", oldOp.Status, oldOp.SuccessorID, r.Operation.OperationID)
	}
	hist := e.History(*old.OperationID)
	if len(hist) != oldHistory || hist[len(hist)-1].Status != "failed" {
		t.Fatalf("old operation history grew: %d → %d", oldHistory, len(hist))
	}
	entries := make([]deferred.HistoryEntry, len(hist))
	for i, h := range hist {
		entries[i] = deferred.HistoryEntry{Seq: h.Seq, Status: deferred.Status(h.Status), At: h.At, DocDigest: h.DocDigest, PrevDigest: h.PrevDigest, EntryDigest: h.EntryDigest}
	}
	if at, err := deferred.VerifyChain(entries); at != -1 {
		t.Fatalf("old operation history broken at %d: %v", at, err)
	}
	if n := e.Count("SELECT count(*) FROM sa_audit WHERE action = 'job.retried' AND subject_id = ?", old.ID.String()); n != 1 {
		t.Fatalf("%d retry audit rows", n)
	}

	// The new job runs and succeeds.
	done := e.WaitState(nj.ID, jobs.StateSucceeded, 20*time.Second)
	if done.ResponseID == nil {
		t.Fatal("retried job without a response")
	}
	// A superseded job cannot be retried again; the new terminal one can.
	if _, err := e.S.Retry(ctx, e.V, old.ID, actor); !errors.Is(err, jobs.ErrConflict) {
		t.Fatalf("retry of a superseded job: %v, want ErrConflict", err)
	}
	detail, err := e.R.GetJob(ctx, e.V, nj.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(detail.History) != 2 || detail.History[0].ID != old.ID || detail.History[1].ID != nj.ID ||
		detail.History[1].Supersedes == nil || *detail.History[1].Supersedes != old.ID || detail.Job.ID != nj.ID {
		t.Fatalf("history %+v, want old then new", detail.History)
	}
	if d2, err := e.R.GetJob(ctx, e.V, old.ID); err != nil || len(d2.History) != 2 || d2.History[0].ID != old.ID {
		t.Fatalf("history from the old job: %+v, %v", d2.History, err)
	}
	// The mission field shows the prompt with its newest job.
	_, items, err := e.R.MissionRecent(ctx, e.V, nil, 100)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, it := range items {
		if it.Prompt.ID == old.PromptID {
			found = true
			if it.Job.ID != nj.ID || it.Response == nil || it.Response.ID != *done.ResponseID {
				t.Fatalf("mission item %+v, want the new job with its response", it)
			}
		}
	}
	if !found {
		t.Fatal("prompt missing from mission/recent")
	}

	// A cancelled job can be retried too.
	if _, err := e.S.Cancel(ctx, e.V, blocking.JobID, actor); err != nil {
		t.Fatal(err)
	}
	r2, err := e.S.Retry(ctx, e.V, blocking.JobID, actor)
	if err != nil {
		t.Fatalf("retry of a cancelled job: %v", err)
	}
	if got := e.Job(blocking.JobID); got.State != "superseded" {
		t.Fatalf("cancelled job after retry: %s", got.State)
	}
	if op := e.Operation(*e.Job(blocking.JobID).OperationID); op.Status != "cancelled" || op.SuccessorID == nil || *op.SuccessorID != r2.Operation.OperationID {
		t.Fatalf("cancelled job's operation %s successor %v", op.Status, op.SuccessorID)
	}
	// Two concurrent retries of one job: exactly one wins.
	if _, err := e.S.Cancel(ctx, e.V, r2.Job.ID, actor); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() { _, err := e.S.Retry(ctx, e.V, r2.Job.ID, actor); errs <- err }()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) || !(errors.Is(e1, jobs.ErrConflict) || errors.Is(e2, jobs.ErrConflict)) {
		t.Fatalf("concurrent retries: %v and %v, want one success and one ErrConflict", e1, e2)
	}
	if n := e.Count("SELECT count(*) FROM sa_job WHERE supersedes = ?", r2.Job.ID); n != 1 {
		t.Fatalf("%d successors of one job", n)
	}
}
