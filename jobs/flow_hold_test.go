package jobs_test

import (
	"context"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/governor"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// TestRetryAfterHoldsASlotGrantedBeforeIt: a slot is granted up to the horizon ahead, and a 429
// that arrives while a job waits for its slot holds that job too: no call starts after the
// pause is recorded and before its Retry-After has passed, and the held job spends no attempt.
func TestRetryAfterHoldsASlotGrantedBeforeIt(t *testing.T) {
	t.Parallel()
	const retryAfter = 15 * time.Second
	var calls, slots timedCalls
	release := make(chan struct{})
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		calls.add()
		if c.n == 1 {
			select {
			case <-release:
			case <-ctx.Done():
				return provider.Response{}, ctx.Err()
			}
			return provider.Response{}, &provider.Error{Kind: provider.KindRateLimit, StatusCode: 429,
				RetryAfter: retryAfter, HasRetryAfter: true, Message: "slow down"}
		}
		return okResponse(c), nil
	})
	// Six calls a minute, two at once: the third job's slot is ten seconds after the first two,
	// granted with them (the horizon is a minute), so its worker sleeps on it while the first
	// call is refused.
	e := newEnv(t, fake, func(cfg *jobs.Config) {
		g, err := governor.New(governor.Config{DB: cfg.DB, RPM: 6, Horizon: time.Minute,
			OnGrant: func(_ string, gr governor.Grant) { slots.addAt(gr.At) }})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Governor = g
	})
	ids := []jobs.Submitted{e.Submit("refused"), e.Submit("beside it"), e.Submit("granted ahead")}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4)
	jobstest.WaitFor(t, 30*time.Second, "three slots granted and two calls started", func() bool {
		return len(slots.all()) >= 3 && len(calls.all()) >= 2
	})
	close(release)
	var pausedUntil time.Time
	jobstest.WaitFor(t, 30*time.Second, "the 429's pause recorded", func() bool {
		err := e.D.Bun.NewSelect().TableExpr("sa_governor").ColumnExpr("paused_until").
			Where("paused_until IS NOT NULL").Limit(1).Scan(context.Background(), &pausedUntil)
		return err == nil
	})
	recorded := time.Now()
	for _, s := range ids {
		jobstest.WaitFor(t, 60*time.Second, "every job to succeed", func() bool { return e.Job(s.JobID).State == "succeeded" })
	}
	for _, at := range calls.all() {
		if at.After(recorded) && at.Before(pausedUntil) {
			t.Errorf("a call started %v after the 429's pause was recorded, %v before it ended", at.Sub(recorded), pausedUntil.Sub(at))
		}
	}
	attempts := 0
	for _, s := range ids {
		attempts += e.Job(s.JobID).Attempt
	}
	if attempts != 4 {
		t.Errorf("the three jobs spent %d attempts, want 4: the refused one twice, the held one once", attempts)
	}
}
