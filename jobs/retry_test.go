package jobs_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
	"asterion/jobs/retrypolicy"
)

// schedRecorder wraps the sim provider and, on every attempt after the first, records the
// job's scheduled_at: the backoff the re-queue wrote (a claim does not touch it).
type schedRecorder struct {
	e   *tenv
	sim provider.Provider

	mu    sync.Mutex
	sched map[string]map[int]time.Time // job id → attempt → scheduled_at
	calls map[string]int
}

func newSchedRecorder() *schedRecorder {
	return &schedRecorder{sim: jobstest.InstantSim(), sched: map[string]map[int]time.Time{}, calls: map[string]int{}}
}

func (r *schedRecorder) Name() string { return "sim" }

func (r *schedRecorder) Complete(ctx context.Context, req provider.Request) (provider.Response, error) {
	var at time.Time
	if err := r.e.D.Bun.QueryRowContext(ctx, "SELECT scheduled_at FROM sa_job WHERE id = ?", req.JobID).Scan(&at); err != nil {
		return provider.Response{}, fmt.Errorf("read scheduled_at: %w", err)
	}
	r.mu.Lock()
	if r.sched[req.JobID] == nil {
		r.sched[req.JobID] = map[int]time.Time{}
	}
	r.sched[req.JobID][req.Attempt] = at
	r.calls[req.JobID]++
	r.mu.Unlock()
	return r.sim.Complete(ctx, req)
}

func (r *schedRecorder) scheduledAt(job uuid.UUID, attempt int) (time.Time, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.sched[job.String()][attempt]
	return at, ok
}

func (r *schedRecorder) callCount(job uuid.UUID) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.calls[job.String()]
}

// retryEnv is an env whose provider records scheduled_at, with the jitter pinned to rnd.
func retryEnv(t *testing.T, rnd float64) (*tenv, *schedRecorder) {
	rec := newSchedRecorder()
	e := newEnv(t, rec, func(c *jobs.Config) { c.Rand = constRand(rnd) })
	rec.e = e
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4)
	return e, rec
}

// requeueDelays returns, for each re-queue of the job, the attempt it re-queued for and the
// recorded backoff: scheduled_at minus the updated_at of the re-queue.
func requeueDelays(t *testing.T, e *tenv, rec *schedRecorder, job uuid.UUID) map[int]time.Duration {
	t.Helper()
	out := map[int]time.Duration{}
	for _, ev := range e.jobEvents(job) {
		if ev.State != "queued" || ev.Attempt == 1 {
			continue
		}
		at, ok := rec.scheduledAt(job, ev.Attempt)
		if !ok {
			t.Fatalf("attempt %d never ran", ev.Attempt)
		}
		out[ev.Attempt] = at.Sub(ev.UpdatedAt)
	}
	return out
}

func eventStates(evs []jobs.JobEvent) string {
	var parts []string
	for _, ev := range evs {
		parts = append(parts, fmt.Sprintf("%s/%d", ev.State, ev.Attempt))
	}
	return strings.Join(parts, " ")
}

// TestRetryProof checks the retry rules end to end: transient failures re-queue with the
// recorded backoff and the job succeeds on the third attempt.
func TestRetryProof(t *testing.T) {
	t.Parallel()
	for _, rnd := range []float64{0, 0.999} {
		t.Run(fmt.Sprintf("jitter=%v", rnd), func(t *testing.T) {
			t.Parallel()
			e, rec := retryEnv(t, rnd)
			s := e.Submit("flaky #sim:fail=provider_5xx:2")
			j := e.WaitState(s.JobID, jobs.StateSucceeded, 30*time.Second)
			if j.Attempt != 3 || j.ErrorKind != nil || j.ResponseID == nil {
				t.Fatalf("final job %+v, want succeeded on attempt 3 with errors cleared", j)
			}
			evs := e.jobEvents(s.JobID)
			if got, want := eventStates(evs), "queued/1 running/1 queued/2 running/2 queued/3 running/3 succeeded/3"; got != want {
				t.Fatalf("state changes %q, want %q", got, want)
			}
			for _, ev := range evs {
				if ev.State == "queued" && ev.Attempt > 1 && (ev.ErrorKind == nil || *ev.ErrorKind != "provider_5xx") {
					t.Fatalf("re-queue for attempt %d with error kind %v", ev.Attempt, ev.ErrorKind)
				}
			}
			delays := requeueDelays(t, e, rec, s.JobID)
			bounds := map[int][2]time.Duration{2: {5 * time.Second, 10 * time.Second}, 3: {25 * time.Second, 40 * time.Second}}
			for attempt, b := range bounds {
				d, ok := delays[attempt]
				if !ok {
					t.Fatalf("no re-queue before attempt %d", attempt)
				}
				if d < b[0] || d > b[1] {
					t.Errorf("backoff before attempt %d = %s, want within [%s, %s]", attempt, d, b[0], b[1])
				}
				if want := retrypolicy.Backoff(attempt, constRand(rnd)).Truncate(time.Millisecond); d != want {
					t.Errorf("backoff before attempt %d = %s, want exactly %s", attempt, d, want)
				}
			}
			if n := rec.callCount(s.JobID); n != 3 {
				t.Errorf("provider called %d times, want 3", n)
			}
			if n := e.Count("SELECT count(*) FROM sa_entity WHERE kind = 'response' AND parent_id = ?", s.PromptID); n != 1 {
				t.Errorf("%d responses, want 1", n)
			}
			var statuses []string
			for _, h := range e.History(*j.OperationID) {
				statuses = append(statuses, h.Status)
			}
			if got := strings.Join(statuses, ","); got != "pending,running,pending,running,pending,running,completed" {
				t.Errorf("operation history %s", got)
			}
			jobstest.WaitFor(t, 10*time.Second, "river job completed", func() bool { return e.RiverState(*j.RiverJobID) == "completed" })
		})
	}
}

// TestRetryRateLimit: a rate limit waits exactly its Retry-After, or at least a minute.
func TestRetryRateLimit(t *testing.T) {
	t.Parallel()
	e, rec := retryEnv(t, 0.999)
	with := e.Submit("slow down #sim:fail=rate_limit:1 #sim:retry_after=7")
	without := e.Submit("slow down #sim:fail=rate_limit:1")
	for _, c := range []struct {
		s    jobs.Submitted
		want func(time.Duration) bool
		desc string
	}{
		{with, func(d time.Duration) bool { return d == 7*time.Second }, "exactly 7s"},
		{without, func(d time.Duration) bool { return d >= 60*time.Second }, "at least 60s"},
	} {
		j := e.WaitState(c.s.JobID, jobs.StateSucceeded, 30*time.Second)
		if j.Attempt != 2 {
			t.Fatalf("job %+v, want success on attempt 2", j)
		}
		d, ok := requeueDelays(t, e, rec, c.s.JobID)[2]
		if !ok || !c.want(d) {
			t.Errorf("rate-limit wait %s (recorded %v), want %s", d, ok, c.desc)
		}
		evs := e.jobEvents(c.s.JobID)
		if got := eventStates(evs); got != "queued/1 running/1 queued/2 running/2 succeeded/2" {
			t.Errorf("state changes %q", got)
		}
		if evs[2].ErrorKind == nil || *evs[2].ErrorKind != "rate_limit" {
			t.Errorf("re-queue error kind %v, want rate_limit", evs[2].ErrorKind)
		}
	}
}

// TestRetryNonRetryableAndExhausted: provider_4xx, auth and parse fail after one attempt;
// a timeout on every attempt fails after max_attempts with kind timeout.
func TestRetryNonRetryableAndExhausted(t *testing.T) {
	t.Parallel()
	e, rec := retryEnv(t, 0)
	kinds := []string{"provider_4xx", "auth", "parse"}
	subs := map[string]jobs.Submitted{}
	for _, k := range kinds {
		subs[k] = e.Submit("doomed #sim:fail=" + k)
	}
	timeout := e.Submit("never answers in time #sim:fail=timeout", func(r *jobs.SubmitRequest) { r.MaxAttempts = intp(2) })
	for _, k := range kinds {
		s := subs[k]
		j := e.WaitState(s.JobID, jobs.StateFailed, 30*time.Second)
		if j.Attempt != 1 || j.ErrorKind == nil || *j.ErrorKind != k || j.ErrorMessage == nil || j.FinishedAt == nil || j.ResponseID != nil {
			t.Errorf("%s: job %+v, want failed on attempt 1 with that kind", k, j)
		}
		if n := rec.callCount(s.JobID); n != 1 {
			t.Errorf("%s: provider called %d times, want 1", k, n)
		}
		op := e.Operation(*j.OperationID)
		if op.Status != "failed" || op.LastErrorKind == nil || *op.LastErrorKind != k {
			t.Errorf("%s: operation %s last error %v", k, op.Status, op.LastErrorKind)
		}
		if got := eventStates(e.jobEvents(s.JobID)); got != "queued/1 running/1 failed/1" {
			t.Errorf("%s: state changes %q", k, got)
		}
		if n := e.Count("SELECT count(*) FROM sa_audit WHERE action = 'job.failed' AND subject_id = ?", s.JobID.String()); n != 1 {
			t.Errorf("%s: %d failure audit rows", k, n)
		}
	}
	j := e.WaitState(timeout.JobID, jobs.StateFailed, 30*time.Second)
	if j.Attempt != 2 || j.ErrorKind == nil || *j.ErrorKind != "timeout" {
		t.Errorf("timeout job %+v, want failed on attempt 2 with kind timeout", j)
	}
	if n := rec.callCount(timeout.JobID); n != 2 {
		t.Errorf("timeout: provider called %d times, want 2", n)
	}
	if got := eventStates(e.jobEvents(timeout.JobID)); got != "queued/1 running/1 queued/2 running/2 failed/2" {
		t.Errorf("timeout: state changes %q", got)
	}
	if op := e.Operation(*j.OperationID); op.Status != "timed-out" {
		t.Errorf("timeout: operation status %s, want timed-out", op.Status)
	}
	// River never runs a finished job again: every vehicle ends finalised.
	for _, s := range append([]jobs.Submitted{timeout}, subs["auth"], subs["parse"], subs["provider_4xx"]) {
		rid := *e.Job(s.JobID).RiverJobID
		jobstest.WaitFor(t, 10*time.Second, "river job finalised", func() bool {
			st := e.RiverState(rid)
			return st == "cancelled" || st == "completed" || st == "discarded"
		})
	}
	if n := e.Count("SELECT count(*) FROM sa_entity WHERE kind = 'response'"); n != 0 {
		t.Errorf("%d responses written for failed jobs", n)
	}
}
