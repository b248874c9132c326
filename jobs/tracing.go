package jobs

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// One trace per prompt: the submit span (Submit) is written into the River job's metadata in
// the W3C trace context format (the keys traceparent and tracestate, as otelriver writes them),
// and the worker starts the job's span as its child. otelriver alone would only link the work
// span to the inserting span, and under group commit one River insert serves the submits of
// several traces, so every vehicle carries its own submit's context instead.

// tracerName is the instrumentation scope of the spans package jobs starts.
const tracerName = "asterion/jobs"

// traceFormat is the trace context format of vehicles' metadata.
var traceFormat = propagation.TraceContext{}

// endSubmitSpan ends the span of a submit with what became of it. A client mistake is not an
// error of the service.
func endSubmitSpan(span trace.Span, out Submitted, err error) {
	if err == nil {
		span.SetAttributes(attribute.String("asterion.prompt_id", out.PromptID.String()),
			attribute.String("asterion.job_id", out.JobID.String()), attribute.Bool("asterion.replayed", out.Replayed))
	} else if ve := (*ValidationError)(nil); !errors.As(err, &ve) && !errors.Is(err, ErrIdempotencyConflict) {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	} else {
		span.SetAttributes(attribute.String("error.type", "client"))
	}
	span.End()
}

// traceMetadata is River job metadata carrying sc, or nil when sc is not valid.
func traceMetadata(sc trace.SpanContext) []byte {
	if !sc.IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	traceFormat.Inject(trace.ContextWithSpanContext(context.Background(), sc), carrier)
	b, err := json.Marshal(carrier)
	if err != nil {
		return nil
	}
	return b
}

// remoteParentOf reads the span context a vehicle's metadata carries (invalid when none).
func remoteParentOf(metadata []byte) trace.SpanContext {
	if len(metadata) == 0 {
		return trace.SpanContext{}
	}
	var m struct {
		Traceparent string `json:"traceparent"`
		Tracestate  string `json:"tracestate"`
	}
	if json.Unmarshal(metadata, &m) != nil || m.Traceparent == "" {
		return trace.SpanContext{}
	}
	carrier := propagation.MapCarrier{"traceparent": m.Traceparent}
	if m.Tracestate != "" {
		carrier["tracestate"] = m.Tracestate
	}
	return trace.SpanContextFromContext(traceFormat.Extract(context.Background(), carrier))
}

// traceParent is River worker middleware that makes the span context in a job's metadata the
// parent of what the job's work starts.
type traceParent struct{ river.WorkerMiddlewareDefaults }

// Work runs doInner under the job's remote parent, if it has one.
func (*traceParent) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	if sc := remoteParentOf(job.Metadata); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return doInner(ctx)
}

// workMiddleware is the worker middleware of prompt jobs: the remote parent first, then
// otelriver's work span under it. Nil when tracing is off.
func workMiddleware(tp trace.TracerProvider) []rivertype.WorkerMiddleware {
	if tp == nil {
		return nil
	}
	return []rivertype.WorkerMiddleware{&traceParent{}, otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), EnableWorkSpanJobKindSuffix: true})}
}
