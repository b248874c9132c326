package jobs_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/flowctl"
	"asterion/jobs/governor"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// withMaxPause gives a service a provider governor with no configured limit and the given
// MaxPause (zero: the default), and returns it through g.
func withMaxPause(t *testing.T, maxPause time.Duration, g **governor.Governor) func(*jobs.Config) {
	return func(cfg *jobs.Config) {
		gov, err := governor.New(governor.Config{DB: cfg.DB, MaxPause: maxPause})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Governor = gov
		*g = gov
	}
}

// modelState reads the governor's state of model; ok is false before the model was seen.
func modelState(t *testing.T, g *governor.Governor, model string) (governor.State, bool) {
	t.Helper()
	states, err := g.States(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range states {
		if s.Model == model {
			return s, true
		}
	}
	return governor.State{}, false
}

// vehicle is a job's River job as the database has it now.
type vehicle struct {
	state                 string
	scheduledAt, dbNow    time.Time
	waitingForProviderCap bool
}

func (e *tenv) vehicleOf(id uuid.UUID) vehicle {
	e.T.Helper()
	var v vehicle
	if err := e.D.Bun.QueryRowContext(context.Background(), `SELECT r.state, r.scheduled_at, now(),
		coalesce(j.waiting_for = ?, false) FROM sa_job AS j JOIN river_job AS r ON r.id = j.river_job_id WHERE j.id = ?`,
		jobs.WaitingProviderCapacity, id).Scan(&v.state, &v.scheduledAt, &v.dbNow, &v.waitingForProviderCap); err != nil {
		e.T.Fatalf("vehicle of job %s: %v", id, err)
	}
	return v
}

// retryIn is how long until a queued job's row lets it run again, on the database's clock.
func (e *tenv) retryIn(id uuid.UUID) time.Duration {
	e.T.Helper()
	var secs float64
	if err := e.D.Bun.QueryRowContext(context.Background(), "SELECT extract(epoch FROM scheduled_at - now()) FROM sa_job WHERE id = ?",
		id).Scan(&secs); err != nil {
		e.T.Fatalf("scheduled_at of job %s: %v", id, err)
	}
	return time.Duration(secs * float64(time.Second))
}

// TestMemberRetryAfterCannotHoldEveryOrg: a member's prompt that makes the sim answer 429 with
// a Retry-After of centuries pauses the shared model for at most 60 s, its own retry waits no
// longer, another org's prompts that wait for the model sleep no longer than the pause, and
// an admin's resume ends the provider's pause and wakes them at once: they run.
func TestMemberRetryAfterCannotHoldEveryOrg(t *testing.T) {
	t.Parallel()
	var g *governor.Governor
	// The limited job's vehicle sleeps its real retry delay (not the tests' FastWait), as in
	// production: otherwise its next attempt races the resume and pauses the model again.
	realWait := func(cfg *jobs.Config) { cfg.Wait = func(d time.Duration) time.Duration { return d } }
	e := newEnv(t, jobstest.InstantSim(), withMaxPause(t, 0, &g), realWait)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 4)
	ctx := context.Background()

	attack := e.Submit("x #sim:fail=rate_limit #sim:retry_after=9000000000")
	var st governor.State
	jobstest.WaitFor(t, 30*time.Second, "the sim's 429 to pause the model", func() bool {
		var ok bool
		st, ok = modelState(t, g, provider.SimModel)
		return ok && st.ProviderPaused()
	})
	if left := st.PausedUntil.Sub(st.Now); left > provider.MaxSimRetryAfter {
		t.Fatalf("the model is paused for %v more, want at most %v", left, provider.MaxSimRetryAfter)
	}
	if st.PauseRole() != governor.RoleProvider {
		t.Errorf("pause role %q, want %q", st.PauseRole(), governor.RoleProvider)
	}
	// The 429's own retry (after its Retry-After) is bounded the same way.
	jobstest.WaitFor(t, 30*time.Second, "the limited job to be queued for its retry", func() bool {
		j := e.Job(attack.JobID)
		return j.State == string(jobs.StateQueued) && j.Attempt == 2
	})
	if retryIn := e.retryIn(attack.JobID); retryIn > provider.MaxSimRetryAfter {
		t.Errorf("the limited job retries in %v, want at most %v", retryIn, provider.MaxSimRetryAfter)
	}

	// Another org's prompts wait for the model, their vehicles asleep no longer than the pause.
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "member")
	other := jobs.Viewer{OrgID: otherOrg, UserID: otherUser}
	waiting := make([]jobs.Submitted, 3)
	for i := range waiting {
		waiting[i] = jobstest.Submit(t, e.S, other, "another org's prompt")
	}
	for _, w := range waiting {
		var v vehicle
		jobstest.WaitFor(t, 30*time.Second, "the other org's vehicle to sleep on the pause", func() bool {
			v = e.vehicleOf(w.JobID)
			return v.state == "scheduled" && v.waitingForProviderCap
		})
		if v.scheduledAt.After(st.PausedUntil.Add(time.Second)) || v.scheduledAt.Sub(v.dbNow) > provider.MaxSimRetryAfter {
			t.Errorf("job %s's vehicle sleeps until %v (%v from now), past the pause's end %v", w.JobID, v.scheduledAt,
				v.scheduledAt.Sub(v.dbNow), st.PausedUntil)
		}
	}

	// An admin resumes the model: the provider's pause ends and every waiting vehicle is
	// runnable now, long before the pause would have ended.
	fc, err := flowctl.New(flowctl.Config{DB: e.D.Bun, Governor: g})
	if err != nil {
		t.Fatal(err)
	}
	if err := fc.SetModelPaused(ctx, flowctl.Viewer{OrgID: e.O, AllOrgs: true}, flowctl.Actor{Name: "cli"}, provider.SimModel, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := modelState(t, g, provider.SimModel); st.ProviderPaused() || st.OperatorPaused {
		t.Errorf("after the resume the model is still paused: %+v", st)
	}
	for _, w := range waiting {
		if v := e.vehicleOf(w.JobID); v.state == "scheduled" || v.scheduledAt.After(v.dbNow) {
			t.Errorf("after the resume job %s's vehicle is %s until %v (now %v)", w.JobID, v.state, v.scheduledAt, v.dbNow)
		}
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		st, _ := modelState(t, g, provider.SimModel)
		t.Logf("model: %+v", st)
		for _, w := range append(waiting, attack) {
			j := e.Job(w.JobID)
			t.Logf("job %s: %s attempt %d waiting_for %v scheduled_at %v; vehicle %+v", j.ID, j.State, j.Attempt, j.WaitingFor,
				j.ScheduledAt, e.vehicleOf(w.JobID))
		}
		jobstest.DumpQueue(t, e.D)
	})
	// They run (the check above shows the resume woke them; this deadline is generous because
	// on a loaded machine the limited job's next attempt may come first and pause the model
	// again, for at most another 60 s).
	for _, w := range waiting {
		e.WaitState(w.JobID, jobs.StateSucceeded, 150*time.Second)
	}
	if n := e.Count("SELECT count(*) FROM sa_audit WHERE action = ? AND subject_id = ?", flowctl.ActionModelResumed, provider.SimModel); n != 1 {
		t.Errorf("%d audit rows of the resume, want 1", n)
	}
}

// TestOpenAIRetryAfterPausesAtMostMaxPause: an OpenAI-compatible provider that answers 429 with
// a Retry-After of centuries, or with its requests exhausted until a reset as far away, holds
// the model for at most MaxPause, and the limited job's retry waits no longer.
func TestOpenAIRetryAfterPausesAtMostMaxPause(t *testing.T) {
	t.Parallel()
	const maxPause = 2 * time.Minute
	for _, tt := range []struct {
		name    string
		headers map[string]string
	}{
		{"Retry-After", map[string]string{"Retry-After": "9000000000"}},
		{"x-ratelimit-reset-requests", map[string]string{"X-Ratelimit-Remaining-Requests": "0", "X-Ratelimit-Reset-Requests": "9000000000"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				for k, v := range tt.headers {
					w.Header().Set(k, v)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusTooManyRequests)
				_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests"}}`)
			}))
			t.Cleanup(srv.Close)
			prov, err := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: srv.URL + "/v1", Model: "gpt-test"})
			if err != nil {
				t.Fatal(err)
			}
			var g *governor.Governor
			e := newEnv(t, prov, withMaxPause(t, maxPause, &g))
			jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
			sub := e.Submit("hello")
			var st governor.State
			jobstest.WaitFor(t, 30*time.Second, "the provider's 429 to pause the model", func() bool {
				var ok bool
				st, ok = modelState(t, g, "gpt-test")
				return ok && st.ProviderPaused()
			})
			if left := st.PausedUntil.Sub(st.Now); left > maxPause {
				t.Errorf("the model is paused for %v more, want at most %v", left, maxPause)
			}
			jobstest.WaitFor(t, 30*time.Second, "the limited job to be queued for its retry", func() bool {
				j := e.Job(sub.JobID)
				return j.State == string(jobs.StateQueued) && j.Attempt == 2
			})
			if retryIn := e.retryIn(sub.JobID); retryIn > maxPause {
				t.Errorf("the limited job retries in %v, want at most %v", retryIn, maxPause)
			}
		})
	}
}
