package jobs_test

import (
	"context"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// TestRetryWhenTheProviderRepeatsItsRequestID: some OpenAI-compatible servers answer every call
// with the same id. The response's key is derived from the provider's id so that a second
// write of one job's answer collides, but a retry of the prompt is another job with an answer
// of its own: it succeeds and keeps both responses.
func TestRetryWhenTheProviderRepeatsItsRequestID(t *testing.T) {
	t.Parallel()
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		r := okResponse(c)
		r.RequestID = "chatcmpl-always-the-same"
		return r, nil
	})
	e := newEnv(t, fake)
	ctx := context.Background()
	rt := jobstest.NewRuntime(t, e.D.Pool, e.S, 2)
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first := e.Submit("asked twice")
	old := e.WaitState(first.JobID, jobs.StateSucceeded, 20*time.Second)
	r, err := e.S.Retry(ctx, e.V, old.ID, jobs.Actor{UserID: &e.U, Name: "member"})
	if err != nil {
		t.Fatal(err)
	}
	again := e.WaitState(r.Job.ID, jobs.StateSucceeded, 20*time.Second)
	if old.ResponseID == nil || again.ResponseID == nil || *old.ResponseID == *again.ResponseID {
		t.Fatalf("responses %v and %v; want two distinct responses", old.ResponseID, again.ResponseID)
	}
	if n := e.Count("SELECT count(*) FROM sa_entity WHERE kind = 'response' AND parent_id = ?", old.PromptID); n != 2 {
		t.Errorf("%d responses to the prompt, want 2", n)
	}
}
