package provider

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the provider call spans.
const tracerName = "asterion/jobs/provider"

// traceFormat is how a call's trace context goes to a provider that speaks HTTP: W3C trace
// context (traceparent and tracestate headers).
var traceFormat = propagation.TraceContext{}

// Traced returns p with a client span around every call, under the span in the call's
// context; the OpenAI adapter sends that span's context to the provider as traceparent. With
// a nil tp it returns p itself.
func Traced(p Provider, tp trace.TracerProvider) Provider {
	if tp == nil {
		return p
	}
	return &traced{p: p, tracer: tp.Tracer(tracerName)}
}

// traced is a Provider whose calls are spans.
type traced struct {
	p      Provider
	tracer trace.Tracer
}

// Name is the wrapped provider's name.
func (t *traced) Name() string { return t.p.Name() }

// DefaultModel is the wrapped provider's default model, or its name when it has none, as
// callers that find no default model use.
func (t *traced) DefaultModel() string {
	if m, ok := t.p.(interface{ DefaultModel() string }); ok {
		return m.DefaultModel()
	}
	return t.p.Name()
}

// Complete calls the wrapped provider inside a span saying which provider, model and attempt,
// and what came of it (the usage of an answer, the kind of a failure).
func (t *traced) Complete(ctx context.Context, req Request) (Response, error) {
	model := req.Options.Model
	if model == "" {
		model = t.DefaultModel()
	}
	ctx, span := t.tracer.Start(ctx, "provider.complete", trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("gen_ai.provider.name", t.p.Name()),
			attribute.String("gen_ai.request.model", model), attribute.String("asterion.job_id", req.JobID),
			attribute.Int("asterion.attempt", req.Attempt)))
	defer span.End()
	resp, err := t.p.Complete(ctx, req)
	if err != nil {
		kind := Classify(err).Kind
		span.SetAttributes(attribute.String("error.type", string(kind)))
		span.SetStatus(codes.Error, string(kind))
		return resp, err
	}
	span.SetAttributes(attribute.String("gen_ai.response.model", resp.Model),
		attribute.Int("gen_ai.usage.input_tokens", resp.PromptTokens),
		attribute.Int("gen_ai.usage.output_tokens", resp.CompletionTokens))
	return resp, nil
}
