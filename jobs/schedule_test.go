package jobs_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// TestScheduledPrompt: a prompt scheduled 3 s ahead is handed to the queue for that time, is not
// called before then and runs after it; its operation expires counting from then; one cancelled
// while it waits ends cancelled with no provider call. How soon after its time a scheduled call
// starts is a latency, not a rule: it is the queue's poll interval plus the machine's load, so it
// is left to the benchmarks.
func TestScheduledPrompt(t *testing.T) {
	t.Parallel()
	var starts timedCalls
	fake := newFake(func(_ context.Context, c call) (provider.Response, error) {
		starts.add()
		return okResponse(c), nil
	})
	e := newEnv(t, fake)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	at := time.Now().Add(3 * time.Second)
	sub := e.Submit("later", func(r *jobs.SubmitRequest) { r.ScheduledFor = &at })
	cancelled := e.Submit("later, but not at all", func(r *jobs.SubmitRequest) { r.ScheduledFor = &at })
	j := e.Job(sub.JobID)
	if j.ScheduledFor == nil || j.ScheduledFor.Sub(at).Abs() > time.Millisecond || j.ScheduledAt.Sub(at).Abs() > time.Millisecond {
		t.Fatalf("scheduled job: scheduled_for %v, scheduled_at %v, want %v", j.ScheduledFor, j.ScheduledAt, at)
	}
	if j.RiverJobID == nil {
		t.Fatal("the scheduled job has no River job")
	}
	var riverAt time.Time
	if err := e.D.Bun.QueryRowContext(context.Background(), "SELECT scheduled_at FROM river_job WHERE id = ?",
		*j.RiverJobID).Scan(&riverAt); err != nil {
		t.Fatal(err)
	}
	if riverAt.Sub(at).Abs() > time.Millisecond {
		t.Errorf("the queue holds the scheduled job for %v, want %v", riverAt, at)
	}
	if got, want := sub.Operation.ExpiresAt.Sub(sub.Operation.AcceptedAt), 3*time.Second; got < want {
		t.Errorf("the operation expires %v after acceptance, want its TTL counted from the scheduled time", got)
	}
	if _, err := e.S.Cancel(context.Background(), e.V, cancelled.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	jobstest.WaitFor(t, 20*time.Second, "the scheduled job to succeed", func() bool { return e.Job(sub.JobID).State == "succeeded" })
	calls := starts.all()
	if len(calls) != 1 {
		t.Fatalf("%d provider calls, want one (the cancelled job makes none)", len(calls))
	}
	if calls[0].Before(at) {
		t.Errorf("the scheduled call started %v before its time", at.Sub(calls[0]))
	}
	if c := e.Job(cancelled.JobID); c.State != "cancelled" || c.CancelOutcome == nil || *c.CancelOutcome != jobs.CancelBeforeStart {
		t.Errorf("the cancelled scheduled job: %s %v", c.State, c.CancelOutcome)
	}
}

func TestScheduleLimits(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	for name, at := range map[string]time.Time{
		"more than 30 days ahead":        time.Now().Add(31 * 24 * time.Hour),
		"more than a minute in the past": time.Now().Add(-2 * time.Minute),
	} {
		_, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: e.V, Prompt: name, ScheduledFor: &at})
		var verr *jobs.ValidationError
		if !errors.As(err, &verr) || verr.Fields["scheduled_for"] == "" {
			t.Errorf("%s: %v", name, err)
		}
	}
	past := time.Now().Add(-10 * time.Second)
	sub := e.Submit("a moment ago runs now", func(r *jobs.SubmitRequest) { r.ScheduledFor = &past })
	if j := e.Job(sub.JobID); j.ScheduledFor != nil || j.ScheduledAt.Before(time.Now().Add(-5*time.Second)) {
		t.Errorf("a time just past: scheduled_for %v, scheduled_at %v", j.ScheduledFor, j.ScheduledAt)
	}
}
