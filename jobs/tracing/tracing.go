package tracing

import (
	"context"
	"encoding/json"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/riverqueue/rivercontrib/otelriver"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the spans package jobs starts.
const TracerName = "asterion/jobs"

// traceFormat is the trace context format of vehicles' metadata.
var traceFormat = propagation.TraceContext{}

// Metadata is River job metadata carrying sc, or nil when sc is not valid.
func Metadata(sc trace.SpanContext) []byte {
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

// RemoteParentOf reads the span context a vehicle's metadata carries (invalid when none).
func RemoteParentOf(metadata []byte) trace.SpanContext {
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
	if sc := RemoteParentOf(job.Metadata); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	}
	return doInner(ctx)
}

// WorkMiddleware is the worker middleware of prompt jobs: the remote parent first, then
// otelriver's work span under it. Nil when tracing is off.
func WorkMiddleware(tp trace.TracerProvider) []rivertype.WorkerMiddleware {
	if tp == nil {
		return nil
	}
	return []rivertype.WorkerMiddleware{&traceParent{}, otelriver.NewMiddleware(&otelriver.MiddlewareConfig{
		TracerProvider: tp, MeterProvider: metricnoop.NewMeterProvider(), EnableWorkSpanJobKindSuffix: true})}
}
