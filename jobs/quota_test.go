package jobs_test

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/jobstest"
)

func TestModelList(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.Models = []string{"small", "large"} })
	def := e.Submit("no model asked")
	var opts jobs.ExecutionOptions
	if err := json.Unmarshal(e.Job(def.JobID).ExecutionOptions, &opts); err != nil || opts.Model != "small" {
		t.Errorf("default model %q (%v), want the first listed", opts.Model, err)
	}
	e.Submit("asks the second", func(r *jobs.SubmitRequest) { r.Options.Model = "large" })
	_, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: e.V, Prompt: "asks another",
		Options: jobs.ExecutionOptions{Model: "huge"}})
	var verr *jobs.ValidationError
	if !errors.As(err, &verr) || verr.Fields["options.model"] == "" {
		t.Errorf("an unlisted model: %v", err)
	}
}

func TestOrgQueueQuota(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.OrgMaxQueued = 2 })
	e.Submit("one")
	e.Submit("two")
	_, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: e.V, Prompt: "three"})
	var qe *admit.QuotaExceededError
	if !errors.As(err, &qe) || qe.Active != 2 || qe.Max != 2 || qe.RetryAfter() < 1 {
		t.Fatalf("a third queued job: %v", err)
	}
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "member")
	if _, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: jobs.Viewer{OrgID: otherOrg, UserID: otherUser},
		Prompt: "another org is not held"}); err != nil {
		t.Errorf("another org: %v", err)
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	jobstest.WaitFor(t, 20*time.Second, "the org's jobs to finish", func() bool {
		_, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: e.V, Prompt: "room again"})
		return err == nil
	})
}

func TestSubmitRate(t *testing.T) {
	t.Parallel()
	var (
		mu  sync.Mutex
		now = time.Now()
	)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.SubmitRate = 1; c.Now = clock })
	for i := 0; i < 10; i++ {
		e.Submit("within the burst")
	}
	_, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: e.V, Prompt: "one too many"})
	var re *admit.SubmitRateError
	if !errors.As(err, &re) || re.RetryAfter() != 1 {
		t.Fatalf("the eleventh submit at once: %v", err)
	}
	if _, err := e.S.Submit(context.Background(), jobs.SubmitRequest{Viewer: e.Op, Prompt: "another user"}); err != nil {
		t.Errorf("another user of the org: %v", err)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	e.Submit("a second later")
}
