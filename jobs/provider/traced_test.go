package provider

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func newRecordingTracer() (*sdktrace.TracerProvider, *tracetest.SpanRecorder) {
	rec := tracetest.NewSpanRecorder()
	return sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), rec
}

func attrsOf(s sdktrace.ReadOnlySpan) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// TestTraceOpenAISendsTraceparent: a traced OpenAI call is a client span under the caller's
// span, and the provider is sent that call span's traceparent.
func TestTraceOpenAISendsTraceparent(t *testing.T) {
	t.Parallel()
	var got string
	cs := newChatServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","model":"gpt-test-2","choices":[{"message":{"content":"hi"}}],"usage":{"prompt_tokens":4,"completion_tokens":1}}`)
	})
	tp, rec := newRecordingTracer()
	p := Traced(newTestOpenAI(t, cs.URL, 0), tp)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "job")
	if _, err := p.Complete(ctx, Request{JobID: "j1", Attempt: 2, Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	parent.End()
	spans := rec.Ended()
	if len(spans) != 2 || spans[0].Name() != "provider.complete" {
		t.Fatalf("ended spans = %d (first %q), want provider.complete then job", len(spans), spans[0].Name())
	}
	call := spans[0]
	if call.Parent().SpanID() != parent.SpanContext().SpanID() || call.SpanKind() != trace.SpanKindClient {
		t.Errorf("call span parent %s kind %v, want %s client", call.Parent().SpanID(), call.SpanKind(), parent.SpanContext().SpanID())
	}
	if want := fmt.Sprintf("00-%s-%s-01", call.SpanContext().TraceID(), call.SpanContext().SpanID()); got != want {
		t.Errorf("provider got traceparent %q, want %q", got, want)
	}
	a := attrsOf(call)
	for k, want := range map[string]string{"gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-test",
		"gen_ai.response.model": "gpt-test-2", "gen_ai.usage.input_tokens": "4", "asterion.attempt": "2", "asterion.job_id": "j1"} {
		if a[k] != want {
			t.Errorf("attribute %s = %q, want %q", k, a[k], want)
		}
	}
}

// TestTraceOpenAIUntracedSendsNone: without a span in the context, no traceparent is sent.
func TestTraceOpenAIUntracedSendsNone(t *testing.T) {
	t.Parallel()
	got := "unset"
	cs := newChatServer(t, func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("traceparent")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"id":"c1","choices":[{"message":{"content":"hi"}}]}`)
	})
	if _, err := newTestOpenAI(t, cs.URL, 0).Complete(context.Background(), Request{Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	if got != "" {
		t.Errorf("traceparent %q sent without a span", got)
	}
}

// TestTraceSimFailureSpan: the sim's calls are spans too, and a failure says its kind.
func TestTraceSimFailureSpan(t *testing.T) {
	t.Parallel()
	tp, rec := newRecordingTracer()
	sim := NewSim(SimConfig{})
	if Traced(sim, nil) != Provider(sim) {
		t.Fatal("Traced with a nil provider must return the provider itself")
	}
	p := Traced(sim, tp)
	if p.Name() != SimName || p.(interface{ DefaultModel() string }).DefaultModel() != SimModel {
		t.Errorf("traced sim: name %q, default model %q", p.Name(), p.(interface{ DefaultModel() string }).DefaultModel())
	}
	if _, err := p.Complete(context.Background(), Request{Text: "#sim:fail=auth"}); err == nil {
		t.Fatal("want the directive's failure")
	}
	spans := rec.Ended()
	if len(spans) != 1 || spans[0].Status().Description != "auth" || attrsOf(spans[0])["error.type"] != "auth" {
		t.Fatalf("spans = %d, status %+v, want one with error.type auth", len(spans), spans[0].Status())
	}
}
