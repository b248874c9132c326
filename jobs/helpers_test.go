package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

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

// startHub runs a change-feed hub until the test ends and waits until it listens.
func startHub(t testing.TB, e *tenv) *feed.Hub {
	t.Helper()
	h := feed.NewHub(e.D.Pool, e.D.Bun, jobstest.Discard)
	t.Cleanup(h.Start(context.Background()))
	select {
	case <-h.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("hub never became ready")
	}
	return h
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
	return jobstest.ValidStatusDoc(e.T, doc)
}

func strv(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
