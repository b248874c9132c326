package jobs_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/jobstest"
)

// TestExpiryHangingPromptEndsExpired: a #sim:hang prompt under a 2 s TTL policy is expired by
// the leader's poller, and its job cancelled with error_kind expired.
func TestExpiryHangingPromptEndsExpired(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) { c.Policy = deferred.Policy{MaxTTL: 2 * time.Second} })
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2, func(c *jobs.RuntimeConfig) { c.PollEvery = 500 * time.Millisecond })
	start := time.Now()
	sub := e.Submit("#sim:hang forever")
	h := jobstest.ValidHandleDoc(t, sub.Operation)
	if got := sub.Operation.ExpiresAt.Sub(sub.Operation.AcceptedAt); got != 2*time.Second {
		t.Fatalf("TTL %s, want the configured 2 s (handle %v)", got, h)
	}
	e.WaitState(sub.JobID, jobs.StateRunning, 10*time.Second)
	var op = e.Operation(sub.Operation.OperationID)
	jobstest.WaitFor(t, 15*time.Second, "the operation to expire", func() bool {
		op = e.Operation(sub.Operation.OperationID)
		return op.Status == "expired"
	})
	took := time.Since(start)
	t.Logf("expired %s after submit (TTL 2 s, poller every 500 ms)", took)
	if took < 2*time.Second {
		t.Errorf("expired after %s, before its TTL", took)
	}
	j := e.WaitState(sub.JobID, jobs.StateCancelled, 5*time.Second)
	if strv(j.ErrorKind) != "expired" {
		t.Errorf("job error_kind %q, want expired", strv(j.ErrorKind))
	}
	jobstest.WaitFor(t, 10*time.Second, "the river job to be cancelled", func() bool { return e.RiverState(*j.RiverJobID) == "cancelled" })
	st := e.statusJSON(e.V, op.ID)
	errObj, _ := st["error"].(map[string]any)
	if st["status"] != "expired" || errObj["kind"] != "expired" {
		t.Errorf("status %v", st)
	}
	if got := strings.Join(e.HistoryStatuses(op.ID), ","); got != "pending,running,expired" {
		t.Errorf("history %s", got)
	}
	if e.S.Stats().Expiries.Load() < 1 {
		t.Errorf("poller expiries counter %d", e.S.Stats().Expiries.Load())
	}
	// Expired is terminal: the poller never touches it again.
	polls := e.Operation(op.ID).PollCount
	rounds := e.S.Stats().Rounds.Load()
	jobstest.WaitFor(t, 20*time.Second, "two more rounds of the poller", func() bool { return e.S.Stats().Rounds.Load() >= rounds+2 })
	if after := e.Operation(op.ID).PollCount; after != polls {
		t.Errorf("poll_count moved from %d to %d after expiry", polls, after)
	}
	if _, err := e.S.CancelOperation(context.Background(), e.V, op.ID, jobs.Actor{Name: "test"}); err == nil {
		t.Error("cancel of an expired operation succeeded")
	}
}

// TestPollScheduleOfMirroredOperations: a prompt operation's status moves with its job in the
// same transaction, so the poller visits it only at its expiry, however long its TTL: a
// standing backlog of pending prompts costs the poller nothing until they expire.
func TestPollScheduleOfMirroredOperations(t *testing.T) {
	t.Parallel()
	for _, ttl := range []time.Duration{time.Hour, 20 * time.Second} {
		t.Run(ttl.String(), func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, jobstest.InstantSim(), func(cfg *jobs.Config) { cfg.Policy = deferred.Policy{MaxTTL: ttl, DefaultTTL: ttl} })
			sub := e.Submit("scheduled for " + ttl.String())
			op := e.Operation(sub.Operation.OperationID)
			if got := op.ExpiresAt.Sub(op.AcceptedAt); got != ttl {
				t.Fatalf("expires %s after acceptance, want the policy's %s", got, ttl)
			}
			if !op.NextPollAt.Equal(op.ExpiresAt) {
				t.Fatalf("next poll %s after acceptance, want at its expiry (%s)", op.NextPollAt.Sub(op.AcceptedAt), ttl)
			}
			if op.RetryAfterSeconds != jobs.DefaultRetryAfterSeconds {
				t.Fatalf("retry_after_seconds %d: the hint to clients is unchanged", op.RetryAfterSeconds)
			}
			// A poll now (an operator's "poll now") asks the owner and leaves it due at its expiry.
			if _, err := e.S.PollOperation(context.Background(), e.Op, op.ID); err != nil {
				t.Fatal(err)
			}
			after := e.Operation(op.ID)
			if after.PollCount != op.PollCount+1 {
				t.Fatalf("poll_count %d after a poll, want %d", after.PollCount, op.PollCount+1)
			}
			if !after.NextPollAt.Equal(op.ExpiresAt) {
				t.Fatalf("next poll %s after the poll, want at its expiry %s", after.NextPollAt, op.ExpiresAt)
			}
		})
	}
}

// TestClaimNeverStartsAJobWhoseOperationExpired: the poller visits operations in rounds, so a
// job can reach a worker after its operation expired and before the poller does. The claim
// refuses to start it and expires it there: whether the job waited in the queue from its submit
// (no worker ran before its expiry) or came back to it from a retry's backoff that outlived the
// operation. The poller is kept away (one round an hour), so only the claim can expire them.
func TestClaimNeverStartsAJobWhoseOperationExpired(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, text string
		// attempts is the number of attempts the job made before a claim expired it.
		attempts int
		// runtimeFirst starts the workers before the submit (the retry door), otherwise only
		// after the operation expired.
		runtimeFirst bool
		ttl          time.Duration
	}{
		{name: "queued from its submit", text: "waited past its expiry", ttl: 2 * time.Second},
		// The retry's backoff (the rate limit's Retry-After) is really waited, and outlives
		// the operation; the first attempt has the TTL to start.
		{name: "queued by a retry", text: "#sim:fail=rate_limit:1 #sim:retry_after=6 retried past its expiry",
			attempts: 1, runtimeFirst: true, ttl: 3 * time.Second},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t, jobstest.InstantSim(), func(cfg *jobs.Config) {
				cfg.Policy = deferred.Policy{MaxTTL: c.ttl, DefaultTTL: c.ttl}
				cfg.Wait = nil
			})
			start := func() {
				jobstest.StartRuntime(t, e.D.Pool, e.S, 2, func(rc *jobs.RuntimeConfig) { rc.PollEvery = time.Hour })
			}
			if c.runtimeFirst {
				start()
			}
			sub := e.Submit(c.text)
			opID := sub.Operation.OperationID
			jobstest.WaitFor(t, 30*time.Second, "the operation's expiry to pass", func() bool {
				return e.Count("SELECT count(*) FROM sa_operation WHERE id = ? AND now() >= expires_at", opID) == 1
			})
			if !c.runtimeFirst {
				start()
			}
			jobstest.WaitFor(t, 30*time.Second, "the job to settle", func() bool { return jobs.State(e.Job(sub.JobID).State).Terminal() })
			j := e.Job(sub.JobID)
			if j.State != string(jobs.StateCancelled) {
				t.Fatalf("job %s (error %q: %s), want cancelled", j.State, strv(j.ErrorKind), strv(j.ErrorMessage))
			}
			if strv(j.ErrorKind) != "expired" {
				t.Errorf("job error_kind %q, want expired", strv(j.ErrorKind))
			}
			// A claim stamps claimed_at; the one that expired the job rolled its own back.
			if j.Attempt != c.attempts+1 || (j.ClaimedAt == nil) != (c.attempts == 0) {
				t.Errorf("attempt %d, claimed at %v: want %d attempts made", j.Attempt, j.ClaimedAt, c.attempts)
			}
			if j.ClaimedAt != nil && !j.ClaimedAt.Before(sub.Operation.ExpiresAt) {
				t.Errorf("claimed at %s, not before its operation's expiry %s", j.ClaimedAt, sub.Operation.ExpiresAt)
			}
			if j.ResponseID != nil {
				t.Errorf("job answered (response %s) after its operation expired", *j.ResponseID)
			}
			op := e.Operation(opID)
			if op.Status != "expired" || strv(op.LastErrorKind) != "expired" {
				t.Errorf("operation %s (last error %q), want expired", op.Status, strv(op.LastErrorKind))
			}
			history := e.HistoryStatuses(opID)
			if history[len(history)-1] != "expired" || strings.Count(strings.Join(history, ","), "expired") != 1 {
				t.Errorf("history %v, want one expired entry, last", history)
			}
			if c.attempts == 0 && strings.Join(history, ",") != "pending,expired" {
				t.Errorf("history %v, want pending,expired: the job never ran", history)
			}
			jobstest.WaitFor(t, 10*time.Second, "the river job to be cancelled", func() bool { return e.RiverState(*j.RiverJobID) == "cancelled" })
			if e.S.Stats().Rounds.Load() != 0 {
				t.Fatalf("the poller ran %d rounds: it, not the claim, may have expired the job", e.S.Stats().Rounds.Load())
			}
		})
	}
}
