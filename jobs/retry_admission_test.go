package jobs_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/jobstest"
	"asterion/jobs/usage"
)

// TestRetryPassesAdmission: a retry is new work, so every rule of the one admission holds for
// it as for a submit: the budget, the queue quota, the caller's submit rate and the model list.
// A refused retry leaves the old job as it was.
func TestRetryPassesAdmission(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	finished := func(t *testing.T, e *tenv, text string) jobs.Submitted {
		t.Helper()
		sub := e.Submit(text)
		if _, err := e.S.Cancel(ctx, e.V, sub.JobID, jobs.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
		return sub
	}
	unchanged := func(t *testing.T, e *tenv, sub jobs.Submitted) {
		t.Helper()
		if st := e.Job(sub.JobID).State; st != string(jobs.StateCancelled) {
			t.Errorf("the refused retry left the old job %s", st)
		}
		if n := e.Count("SELECT count(*) FROM sa_job WHERE supersedes = ?", sub.JobID); n != 0 {
			t.Errorf("the refused retry wrote %d jobs", n)
		}
	}
	t.Run("budget", func(t *testing.T) {
		t.Parallel()
		var m *usage.Meter
		e := newEnv(t, jobstest.InstantSim(), withMeter(t, &m))
		old := finished(t, e, "to retry")
		e.Submit("holds the budget")
		setBudget(t, m, e.O, 1)
		_, err := e.S.Retry(ctx, e.V, old.JobID, jobs.Actor{Name: "test"})
		asBudgetRefusal(t, "a retry over the budget", err)
		unchanged(t, e, old)
	})
	t.Run("quota", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.OrgMaxQueued = 1 })
		old := finished(t, e, "to retry")
		e.Submit("fills the quota")
		_, err := e.S.Retry(ctx, e.V, old.JobID, jobs.Actor{Name: "test"})
		if !errors.Is(err, admit.ErrQuotaExceeded) {
			t.Fatalf("a retry over the quota: %v", err)
		}
		unchanged(t, e, old)
	})
	t.Run("rate", func(t *testing.T) {
		t.Parallel()
		var mu sync.Mutex
		now := time.Now()
		clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
		e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.SubmitRate = 1; c.Now = clock })
		old := finished(t, e, "to retry")
		for range 9 {
			e.Submit("within the burst")
		}
		_, err := e.S.Retry(ctx, e.V, old.JobID, jobs.Actor{Name: "test"})
		if !errors.Is(err, admit.ErrSubmitRate) {
			t.Fatalf("a retry beyond the submit rate: %v", err)
		}
		unchanged(t, e, old)
	})
	t.Run("models", func(t *testing.T) {
		t.Parallel()
		e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.Models = []string{"old-model"} })
		old := finished(t, e, "to retry")
		// The deployment no longer lists the model the job ran on.
		later := e.service(jobstest.InstantSim(), func(c *jobs.Config) { c.Models = []string{"new-model"} })
		_, err := later.Retry(ctx, e.V, old.JobID, jobs.Actor{Name: "test"})
		var verr *jobs.ValidationError
		if !errors.As(err, &verr) || verr.Fields["options.model"] == "" {
			t.Fatalf("a retry of a model no longer listed: %v", err)
		}
		unchanged(t, e, old)
	})
}

// TestDefaultModelList: without a list of its own, the deployment admits the provider's own
// model only, so that no caller makes limiters, metrics series or prices by inventing names.
func TestDefaultModelList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	if got := e.S.Admission().Models(); len(got) != 1 || got[0] != "sim-1" {
		t.Errorf("default models %v, want the sim's own", got)
	}
	_, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: e.V, Prompt: "an invented model",
		Options: jobs.ExecutionOptions{Model: "invented-by-a-member"}})
	var verr *jobs.ValidationError
	if !errors.As(err, &verr) || verr.Fields["options.model"] == "" {
		t.Errorf("an invented model: %v", err)
	}
	if n := e.Count("SELECT count(*) FROM sa_job"); n != 0 {
		t.Errorf("%d jobs written", n)
	}
}
