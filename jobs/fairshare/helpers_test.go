package fairshare_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
	"asterion/jobs/fairshare"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
	"asterion/jobs/usage"
)

// tenv is one test's database, org, member, service and read models (jobstest.Env).
type tenv struct{ *jobstest.Env }

// newEnv makes a fresh database with one org and member, and a service over prov.
func newEnv(t testing.TB, prov provider.Provider, mods ...func(*jobs.Config)) *tenv {
	t.Helper()
	return &tenv{jobstest.NewEnv(t, prov, mods...)}
}

// service builds another Service over the same database (a second process, say).
func (e *tenv) service(prov provider.Provider, mods ...func(*jobs.Config)) *jobs.Service {
	e.T.Helper()
	return jobstest.NewService(e.T, e.D, prov, mods...)
}

// otherOrg creates another org with a member and returns the member's view.
func (e *tenv) otherOrg() jobs.Viewer {
	e.T.Helper()
	org, user := jobstest.CreateOrgUser(e.T, e.D.Bun, "member")
	return jobs.Viewer{OrgID: org, UserID: user}
}

// priority submits at priority p.
func priority(p int) func(*jobs.SubmitRequest) {
	return func(r *jobs.SubmitRequest) { r.Priority = &p }
}

// setShare writes an org's weight and pause as `asterion org set-weight` and a pause would.
func setShare(t testing.TB, e *tenv, org int64, weight int, paused bool) {
	t.Helper()
	if _, err := e.D.Bun.ExecContext(context.Background(), `INSERT INTO sa_org_share (org_id, weight, paused) VALUES (?, ?, ?)
ON CONFLICT (org_id) DO UPDATE SET weight = EXCLUDED.weight, paused = EXCLUDED.paused, updated_at = now()`,
		org, weight, paused); err != nil {
		t.Fatalf("set the share of org %d: %v", org, err)
	}
}

// submitMany submits n prompts of text as v, changed by mods, from a few goroutines at once (so the intake
// groups them) and returns them in no particular order.
func submitMany(t testing.TB, e *tenv, v jobs.Viewer, n int, text string, mods ...func(*jobs.SubmitRequest)) []jobs.Submitted {
	t.Helper()
	out, err := submitAll(e, v, n, text, mods...)
	if err != nil {
		t.Fatalf("submit %q: %v", text, err)
	}
	return out
}

// submitAll is submitMany for any goroutine: it returns the first error.
func submitAll(e *tenv, v jobs.Viewer, n int, text string, mods ...func(*jobs.SubmitRequest)) ([]jobs.Submitted, error) {
	var mu sync.Mutex
	var out []jobs.Submitted
	var first error
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				req := jobs.SubmitRequest{Viewer: v, Prompt: text}
				for _, m := range mods {
					m(&req)
				}
				s, err := e.S.Submit(context.Background(), req)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				if err == nil {
					out = append(out, s)
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	return out, first
}

// countJobs counts the jobs of org in state.
func countJobs(e *tenv, org int64, state jobs.State) int {
	return e.Count("SELECT count(*) FROM sa_job WHERE org_id = ? AND state = ?", org, string(state))
}

// sampleMostRunning samples how many jobs of org run at once until the test ends, keeping the
// most seen.
func sampleMostRunning(t *testing.T, e *tenv, org int64) *atomic.Int64 {
	return sampleMost(t, e, "SELECT count(*) FROM sa_job WHERE org_id = ? AND state = 'running'", org)
}

// sampleMost runs a SELECT count(*) … query every 10 ms until the test ends, keeping the most
// it counted: a state that holds for a while is seen, however loaded the machine, where one
// reading at a chosen moment may fall just before or after it.
func sampleMost(t *testing.T, e *tenv, query string, args ...any) *atomic.Int64 {
	var most atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			var n int64
			if e.D.Bun.QueryRowContext(context.Background(), query, args...).Scan(&n) == nil && n > most.Load() {
				most.Store(n)
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return &most
}

// withMeter gives the service a usage meter, so that every attempt is recorded.
func withMeter(t *testing.T, m **usage.Meter) func(*jobs.Config) {
	return func(cfg *jobs.Config) {
		meter, err := usage.New(usage.Config{DB: cfg.DB, StatusTTL: -1})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Usage = meter
		*m = meter
	}
}

// fakeProvider answers after a delay and counts the calls of every job.
type fakeProvider struct {
	delay func(n int) time.Duration
	mu    sync.Mutex
	n     int
	calls map[string]int
}

func newFake(delay func(n int) time.Duration) *fakeProvider {
	return &fakeProvider{delay: delay, calls: map[string]int{}}
}

func (f *fakeProvider) Name() string { return "fake" }

func (f *fakeProvider) Complete(ctx context.Context, req provider.Request) (provider.Response, error) {
	f.mu.Lock()
	f.n++
	n := f.n
	f.calls[req.JobID]++
	f.mu.Unlock()
	select {
	case <-time.After(f.delay(n)):
	case <-ctx.Done():
		return provider.Response{}, ctx.Err()
	}
	return provider.Response{Text: fmt.Sprintf("answer %d", n), RequestID: fmt.Sprintf("fake-%d", n),
		Provider: "fake", Model: "fake-1", PromptTokens: 1, CompletionTokens: 3}, nil
}

// callsFor counts the calls for a job.
func (f *fakeProvider) callsFor(job uuid.UUID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[job.String()]
}

// newShare builds a Share over the env's database, as a worker of the service would use it.
func newShare(t testing.TB, e *tenv, mods ...func(*fairshare.Config)) *fairshare.Share {
	t.Helper()
	cfg := fairshare.Config{DB: e.D.Bun, Logger: jobstest.Discard, Queue: jobs.QueuePrompts}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := fairshare.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// vehicleOf reads, as a worker that fetched it would see it, the vehicle job id rides now.
func vehicleOf(t testing.TB, e *tenv, job uuid.UUID) fairshare.Vehicle {
	t.Helper()
	var v fairshare.Vehicle
	var argJob string
	err := e.D.Bun.QueryRowContext(context.Background(), `SELECT r.id, r.priority, r.scheduled_at, r.args ->> 'job_id',
    (r.args ->> 'priority')::int, coalesce((r.args ->> 'org_id')::bigint, 0)
FROM sa_job AS j JOIN river_job AS r ON r.id = j.river_job_id WHERE j.id = ?`, job).Scan(&v.ID, &v.Priority, &v.ScheduledAt,
		&argJob, &v.Args.Priority, &v.Args.Org)
	if err != nil {
		t.Fatalf("read the vehicle of job %s: %v", job, err)
	}
	v.Args.Job = uuid.MustParse(argJob)
	return v
}

// fetch does to the vehicle job id rides what River's fetch does (the vehicle is running, a
// worker holds it) and returns it as the worker sees it.
func fetch(t testing.TB, e *tenv, job uuid.UUID) fairshare.Vehicle {
	t.Helper()
	v := vehicleOf(t, e, job)
	if _, err := e.D.Bun.ExecContext(context.Background(), `UPDATE river_job SET state = 'running', attempt = attempt + 1,
    attempted_at = now() WHERE id = ?`, v.ID); err != nil {
		t.Fatalf("fetch vehicle %d: %v", v.ID, err)
	}
	return v
}

// release gives back every vehicle fetch took, as a worker that snoozed them at once would.
func release(t testing.TB, e *tenv) {
	t.Helper()
	if _, err := e.D.Bun.ExecContext(context.Background(), `UPDATE river_job SET state = 'available'
WHERE state = 'running' AND queue = ?`, jobs.QueuePrompts); err != nil {
		t.Fatalf("release the fetched vehicles: %v", err)
	}
}
