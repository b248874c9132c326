package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/feed"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// discard is the logger of every test service: tests assert on rows, not log lines.
var discard = jobstest.Discard

// instantSim is the real sim provider without its random latency.
func instantSim() provider.Provider { return jobstest.InstantSim() }

// tenv is one test's database, org, users, service and read models (jobstest.Env), with the
// helpers the tests of prompt execution add to it.
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

// createOrgUser inserts an org and one user of role in it.
func createOrgUser(t testing.TB, b *bun.DB, role string) (org, user int64) {
	return jobstest.CreateOrgUser(t, b, role)
}

// createUser inserts a user of role into org.
func createUser(t testing.TB, b *bun.DB, org int64, role string) (user int64) {
	return jobstest.CreateUser(t, b, org, role)
}

// runtimeOpts adjust a RuntimeConfig.
type runtimeOpt = func(*jobs.RuntimeConfig)

// newRuntime builds a runtime that is not started yet; the test's cleanup stops it.
func newRuntime(t testing.TB, e *tenv, svc *jobs.Service, workers int, opts ...runtimeOpt) *jobs.Runtime {
	return jobstest.NewRuntime(t, e.D.Pool, svc, workers, opts...)
}

// startRuntime builds and starts a runtime; the test's cleanup stops it.
func startRuntime(t testing.TB, e *tenv, svc *jobs.Service, workers int, opts ...runtimeOpt) *jobs.Runtime {
	return jobstest.StartRuntime(t, e.D.Pool, svc, workers, opts...)
}

// startHub runs a change-feed hub until the test ends and waits until it listens.
func startHub(t testing.TB, e *tenv) *feed.Hub {
	t.Helper()
	h := feed.NewHub(e.D.Pool, e.D.Bun, discard)
	t.Cleanup(h.Start(context.Background()))
	select {
	case <-h.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("hub never became ready")
	}
	return h
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	jobstest.WaitFor(t, timeout, what, cond)
}

func intp(n int) *int { return &n }

// jobEvents reads every numbered and unnumbered change-feed event of a job in insertion order,
// decoded.
func (e *tenv) jobEvents(id uuid.UUID) []jobs.JobEvent {
	e.T.Helper()
	var rows []db.Event
	if err := e.D.Bun.NewSelect().Model(&rows).Where("job_id = ? AND topic = ?", id, feed.TopicJob).OrderExpr("id").
		Scan(context.Background()); err != nil {
		e.T.Fatalf("read events of %s: %v", id, err)
	}
	out := make([]jobs.JobEvent, len(rows))
	for i, r := range rows {
		if err := json.Unmarshal(r.Payload, &out[i]); err != nil {
			e.T.Fatalf("decode event %d: %v", r.ID, err)
		}
	}
	return out
}

// call is one provider call seen by a fake provider.
type call struct {
	req provider.Request
	ctx context.Context
	n   int // 1-based index among all calls
}

// fakeProvider answers through fn and records every call.
type fakeProvider struct {
	fn func(ctx context.Context, c call) (provider.Response, error)

	mu    sync.Mutex
	calls []call
	// called receives every call as it starts (buffered; never blocks a worker).
	called chan call
}

func newFake(fn func(ctx context.Context, c call) (provider.Response, error)) *fakeProvider {
	return &fakeProvider{fn: fn, called: make(chan call, 1024)}
}

func (f *fakeProvider) Name() string { return "fake" }

func (f *fakeProvider) Complete(ctx context.Context, req provider.Request) (provider.Response, error) {
	f.mu.Lock()
	c := call{req: req, ctx: ctx, n: len(f.calls) + 1}
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	select {
	case f.called <- c:
	default:
	}
	if f.fn == nil {
		return okResponse(c), nil
	}
	return f.fn(ctx, c)
}

// Calls returns a copy of the calls so far.
func (f *fakeProvider) Calls() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

// callsFor counts the calls for a job.
func (f *fakeProvider) callsFor(jobID uuid.UUID) int {
	n := 0
	for _, c := range f.Calls() {
		if c.req.JobID == jobID.String() {
			n++
		}
	}
	return n
}

// okResponse answers a call with a request id unique to the call.
func okResponse(c call) provider.Response {
	return provider.Response{Text: fmt.Sprintf("answer %d to %s", c.n, c.req.Text), RequestID: fmt.Sprintf("fake-%d", c.n),
		Provider: "fake", Model: "fake-1", PromptTokens: 1, CompletionTokens: 3}
}

// waitCall waits for the next call the fake provider starts.
func (f *fakeProvider) waitCall(t testing.TB, timeout time.Duration) call {
	t.Helper()
	select {
	case c := <-f.called:
		return c
	case <-time.After(timeout):
		t.Fatalf("no provider call within %s", timeout)
		return call{}
	}
}

// statusJSON marshals the operation's status document and validates it against the schema.
func (e *tenv) statusJSON(v jobs.Viewer, id uuid.UUID) map[string]any {
	e.T.Helper()
	doc, err := e.S.OperationStatus(context.Background(), v, id)
	if err != nil {
		e.T.Fatalf("status of %s: %v", id, err)
	}
	return validStatusDoc(e.T, doc)
}

func validStatusDoc(t testing.TB, doc deferred.StatusDoc) map[string]any {
	return jobstest.ValidStatusDoc(t, doc)
}

func validHandleDoc(t testing.TB, h deferred.Handle) map[string]any {
	return jobstest.ValidHandleDoc(t, h)
}

func strv(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
