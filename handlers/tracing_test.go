package handlers

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/provider"
	"asterion/telemetry"
)

// tracedProvider is an OpenAI-protocol provider on httptest that keeps the traceparent
// header of every call.
type tracedProvider struct {
	*httptest.Server
	mu      sync.Mutex
	parents []string
}

func newTracedProvider(t *testing.T) *tracedProvider {
	t.Helper()
	p := &tracedProvider{}
	p.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.parents = append(p.parents, r.Header.Get("traceparent"))
		n := len(p.parents)
		p.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"chatcmpl-trace-%d","model":"gpt-test","choices":[{"message":{"content":"traced answer"}}],`+
			`"usage":{"prompt_tokens":3,"completion_tokens":2}}`, n)
	}))
	t.Cleanup(p.Close)
	return p
}

func (p *tracedProvider) traceparents() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.parents...)
}

// traceHarness is the live server traced into an in-memory exporter.
type traceHarness struct {
	f   *liveServer
	tel *telemetry.Telemetry
	exp *tracetest.InMemoryExporter
	llm *tracedProvider
}

func startTracedServer(t *testing.T, tracing bool) *traceHarness {
	t.Helper()
	h := &traceHarness{exp: tracetest.NewInMemoryExporter(), llm: newTracedProvider(t)}
	cfg := telemetry.Config{}
	if tracing {
		cfg.Exporter = h.exp
	}
	tel, err := telemetry.New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	h.tel = tel
	t.Cleanup(func() { _ = tel.Shutdown(context.Background()) })
	var tp trace.TracerProvider
	if tel.Enabled() {
		tp = tel.TracerProvider()
	}
	llm, err := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: h.llm.URL + "/v1", Model: "gpt-test"})
	if err != nil {
		t.Fatal(err)
	}
	h.f = startLiveServerWith(t, liveServerConfig{Provider: llm,
		// One shared submit transaction at a time, so concurrent submits go together and each
		// vehicle of a group must still carry its own submit's trace.
		Jobs: func(c *jobs.Config) { c.Tracer = tp; c.Intake.GroupWriters = 1 },
		Deps: func(_ *dbtest.DB, d *Deps) { d.Tracer = tp }})
	h.f.StartWorkers(t)
	return h
}

// spansOf flushes and returns the ended spans of trace id, by name, waiting until every name
// of want has one. Each name must have one span, except the work span: a vehicle given back
// (river.JobSnooze) is worked again, each time under the same parent; the one kept is the one
// the provider call ran under.
func (h *traceHarness) spansOf(t *testing.T, id trace.TraceID, want ...string) map[string]tracetest.SpanStub {
	t.Helper()
	var got map[string]tracetest.SpanStub
	dbtest.WaitForDetail(t, 20*time.Second, fmt.Sprintf("trace %s to have spans %v", id, want), func() (bool, string) {
		if err := h.tel.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		all := map[string][]tracetest.SpanStub{}
		for _, s := range h.exp.GetSpans() {
			if s.SpanContext.TraceID() == id {
				all[s.Name] = append(all[s.Name], s)
			}
		}
		got = map[string]tracetest.SpanStub{}
		for name, spans := range all {
			if len(spans) > 1 && name != workSpan {
				t.Fatalf("trace %s has %d %q spans", id, len(spans), name)
			}
			got[name] = spans[0]
		}
		for _, w := range all[workSpan] {
			if w.Parent.SpanID() != all[workSpan][0].Parent.SpanID() {
				t.Errorf("the %q spans of trace %s have different parents", workSpan, id)
			}
			if w.SpanContext.SpanID() == got[providerSpan].Parent.SpanID() {
				got[workSpan] = w
			}
		}
		for _, n := range want {
			if _, ok := got[n]; !ok {
				names := make([]string, 0, len(got))
				for n := range got {
					names = append(names, n)
				}
				return false, fmt.Sprintf("it has %v", names)
			}
		}
		return true, ""
	})
	return got
}

const (
	httpSpan     = "POST /sa-core/v1/prompt"
	submitSpan   = "jobs.submit"
	workSpan     = "river.work/" + jobs.KindPromptExecute
	providerSpan = "provider.complete"
)

// wantChild fails unless child's parent is parent.
func wantChild(t *testing.T, spans map[string]tracetest.SpanStub, child, parent string) {
	t.Helper()
	c, p := spans[child], spans[parent]
	if c.Parent.SpanID() != p.SpanContext.SpanID() {
		t.Errorf("%q has parent %s, want %q (%s)", child, c.Parent.SpanID(), parent, p.SpanContext.SpanID())
	}
}

// TestTraceOnePerPrompt: prompts submitted with a traceparent each make one trace under it:
// the HTTP span under the remote parent, the submit under the HTTP span, the River job's span
// under the submit (across the queue, each vehicle of a shared transaction with its own
// trace), the provider call under the job, and the provider is sent the call's traceparent.
func TestTraceOnePerPrompt(t *testing.T) {
	t.Parallel()
	h := startTracedServer(t, true)
	u := h.f.user(t, "acme", "alice", identity.RoleMember)

	const n = 6
	type sent struct {
		remote trace.SpanContext
		jobID  string
	}
	prompts := make([]sent, n)
	var wg sync.WaitGroup
	for i := range prompts {
		var tid trace.TraceID
		var sid trace.SpanID
		tid[0], tid[15] = 0xab, byte(i+1)
		sid[0], sid[7] = 0xcd, byte(i+1)
		prompts[i].remote = trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid,
			TraceFlags: trace.FlagsSampled, Remote: true})
		wg.Add(1)
		go func() {
			defer wg.Done()
			tp := fmt.Sprintf("00-%s-%s-01", tid, sid)
			r := h.f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": fmt.Sprintf("traced prompt %d", i)},
				"traceparent", tp)
			if r.StatusCode != http.StatusAccepted {
				t.Errorf("submit %d: %s", i, r)
				return
			}
			prompts[i].jobID = mustDecode[liveSubmitted](t, r.Body).JobID
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	sentParents := map[string]bool{}
	for _, p := range prompts {
		h.f.waitJob(t, u, p.jobID, "succeeded")
		spans := h.spansOf(t, p.remote.TraceID(), httpSpan, submitSpan, workSpan, providerSpan)
		for name := range spans {
			if name != httpSpan && name != submitSpan && name != workSpan && name != providerSpan {
				t.Errorf("trace %s has an unexpected span %q", p.remote.TraceID(), name)
			}
		}
		hs := spans[httpSpan]
		if !hs.Parent.IsRemote() || hs.Parent.SpanID() != p.remote.SpanID() {
			t.Errorf("HTTP span's parent = %s (remote %v), want the incoming %s", hs.Parent.SpanID(), hs.Parent.IsRemote(), p.remote.SpanID())
		}
		if hs.SpanKind != trace.SpanKindServer {
			t.Errorf("HTTP span kind = %v, want server", hs.SpanKind)
		}
		attrs := map[string]string{}
		for _, kv := range hs.Attributes {
			attrs[string(kv.Key)] = kv.Value.String()
		}
		if attrs["http.route"] != "/sa-core/v1/prompt" || attrs["http.response.status_code"] != "202" {
			t.Errorf("HTTP span attributes = %v, want http.route /sa-core/v1/prompt and status 202", attrs)
		}
		wantChild(t, spans, submitSpan, httpSpan)
		wantChild(t, spans, workSpan, submitSpan)
		wantChild(t, spans, providerSpan, workSpan)
		ps := spans[providerSpan]
		sentParents[fmt.Sprintf("00-%s-%s-01", ps.SpanContext.TraceID(), ps.SpanContext.SpanID())] = true
	}
	for _, tp := range h.llm.traceparents() {
		if !sentParents[tp] {
			t.Errorf("the provider was sent traceparent %q, not one of a provider call span", tp)
		}
		delete(sentParents, tp)
	}
	if len(sentParents) != 0 {
		t.Errorf("the provider was never sent the traceparents %v", sentParents)
	}
}

// TestTraceNewRootWithoutTraceparent: a submit without a traceparent starts a trace of its
// own, which its job and provider call still join.
func TestTraceNewRootWithoutTraceparent(t *testing.T) {
	t.Parallel()
	h := startTracedServer(t, true)
	u := h.f.user(t, "acme", "bob", identity.RoleMember)
	job := h.f.submit(t, u, "untraced caller")
	h.f.waitJob(t, u, job.JobID, "succeeded")
	var root trace.TraceID
	dbtest.WaitFor(t, 20*time.Second, "the HTTP span", func() bool {
		if err := h.tel.ForceFlush(context.Background()); err != nil {
			t.Fatal(err)
		}
		for _, s := range h.exp.GetSpans() {
			if s.Name == httpSpan {
				root = s.SpanContext.TraceID()
				if s.Parent.IsValid() {
					t.Fatalf("HTTP span without traceparent has parent %s", s.Parent.SpanID())
				}
			}
		}
		return root.IsValid()
	})
	spans := h.spansOf(t, root, httpSpan, submitSpan, workSpan, providerSpan)
	wantChild(t, spans, workSpan, submitSpan)
	wantChild(t, spans, providerSpan, workSpan)
}

// TestTraceOffSendsNothing: with tracing off, a submit with a traceparent records no span and
// the provider is sent no traceparent (the incoming one is not passed on either).
func TestTraceOffSendsNothing(t *testing.T) {
	t.Parallel()
	h := startTracedServer(t, false)
	u := h.f.user(t, "acme", "carol", identity.RoleMember)
	r := h.f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "not traced"},
		"traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %s", r)
	}
	h.f.waitJob(t, u, mustDecode[liveSubmitted](t, r.Body).JobID, "succeeded")
	if got := h.exp.GetSpans(); len(got) != 0 {
		t.Errorf("%d spans recorded with tracing off", len(got))
	}
	if tps := h.llm.traceparents(); len(tps) != 1 || tps[0] != "" {
		t.Errorf("provider got traceparents %q with tracing off, want one call without", tps)
	}
	var rows int
	if err := h.f.DB.Bun.NewRaw("SELECT count(*) FROM river_job WHERE metadata->>'traceparent' IS NOT NULL").Scan(context.Background(), &rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d River jobs carry a traceparent with tracing off", rows)
	}
}

// TestTraceRetryJoinsTheRetryRequest: the job a retry queues runs under the retry request's
// span, with its provider call under it.
func TestTraceRetryJoinsTheRetryRequest(t *testing.T) {
	t.Parallel()
	h := startTracedServer(t, true)
	u := h.f.user(t, "acme", "dave", identity.RoleMember)
	first := h.f.submit(t, u, "to be retried")
	h.f.waitJob(t, u, first.JobID, "succeeded")
	const tid, sid = "5bf92f3577b34da6a3ce929d0e0e4737", "10f067aa0ba902b8"
	r := h.f.do(t, "POST", "/sa-core/v1/jobs/"+first.JobID+"/retry", u.Tok, nil, "traceparent", "00-"+tid+"-"+sid+"-01")
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("retry: %s", r)
	}
	next := mustDecode[struct {
		Job liveJob `json:"job"`
	}](t, r.Body).Job
	h.f.waitJob(t, u, next.JobID, "succeeded")
	id, err := trace.TraceIDFromHex(tid)
	if err != nil {
		t.Fatal(err)
	}
	const retrySpan = "POST /sa-core/v1/jobs/:id/retry"
	spans := h.spansOf(t, id, retrySpan, workSpan, providerSpan)
	if got := spans[retrySpan].Parent.SpanID().String(); got != sid {
		t.Errorf("retry span's parent %s, want the caller's %s", got, sid)
	}
	wantChild(t, spans, workSpan, retrySpan)
	wantChild(t, spans, providerSpan, workSpan)
}
