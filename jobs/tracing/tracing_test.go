package tracing

import (
	"context"
	"testing"

	"github.com/riverqueue/river/rivertype"

	"go.opentelemetry.io/otel/trace"
)

// TestTraceMetadataRoundTrip: a vehicle's metadata carries the submit's span context in W3C
// form, and the worker reads back the same context as a remote parent.
func TestTraceMetadataRoundTrip(t *testing.T) {
	t.Parallel()
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5},
		TraceFlags: trace.FlagsSampled})
	md := Metadata(sc)
	if want := `{"traceparent":"00-01020300000000000000000000000000-0405000000000000-01"}`; string(md) != want {
		t.Fatalf("metadata = %s, want %s", md, want)
	}
	got := RemoteParentOf(md)
	if !got.IsRemote() || got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() {
		t.Errorf("read back %v, want the remote %v", got, sc)
	}
	if Metadata(trace.SpanContext{}) != nil {
		t.Error("an untraced submit must leave the metadata empty")
	}
	for _, md := range []string{"", "{}", `{"traceparent":"garbage"}`, "not json", `{"snoozes":2}`} {
		if RemoteParentOf([]byte(md)).IsValid() {
			t.Errorf("metadata %q gave a valid parent", md)
		}
	}
	// River adds keys of its own to the metadata; ours survive beside them.
	if !RemoteParentOf([]byte(`{"snoozes":1,"traceparent":"00-01020300000000000000000000000000-0405000000000000-01"}`)).IsValid() {
		t.Error("traceparent beside River's keys not read")
	}
	var parent trace.SpanContext
	err := (&traceParent{}).Work(context.Background(), &rivertype.JobRow{Metadata: md}, func(ctx context.Context) error {
		parent = trace.SpanContextFromContext(ctx)
		return nil
	})
	if err != nil || parent.SpanID() != sc.SpanID() || !parent.IsRemote() {
		t.Fatalf("middleware: %v, work ran under %v, want the remote %v", err, parent, sc)
	}
}
