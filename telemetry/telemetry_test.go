package telemetry

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it keeps every export request it is sent.
type otlpReceiver struct {
	*httptest.Server
	mu       sync.Mutex
	paths    []string
	requests []*coltrace.ExportTraceServiceRequest
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	t.Helper()
	r := &otlpReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, err := io.ReadAll(req.Body)
		var msg coltrace.ExportTraceServiceRequest
		if err == nil {
			err = proto.Unmarshal(body, &msg)
		}
		r.mu.Lock()
		r.paths = append(r.paths, req.Method+" "+req.URL.Path+" "+req.Header.Get("Content-Type"))
		if err == nil {
			r.requests = append(r.requests, &msg)
		}
		r.mu.Unlock()
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *otlpReceiver) seen() ([]string, []*coltrace.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.paths...), append([]*coltrace.ExportTraceServiceRequest(nil), r.requests...)
}

func envOf(kv map[string]string) func(string) string { return func(k string) string { return kv[k] } }

// TestTraceOffWithoutEndpoint: without an endpoint no exporter is made, even though the
// process environment names a receiver (which the SDK's exporter would read), and no span is
// recorded or sent.
func TestTraceOffWithoutEndpoint(t *testing.T) {
	rec := newOTLPReceiver(t)
	t.Setenv(EnvEndpoint, rec.URL)
	tel, err := New(context.Background(), ConfigFromEnv(envOf(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if tel.Enabled() {
		t.Fatal("Enabled() = true without an endpoint")
	}
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "nothing")
	if span.IsRecording() || span.SpanContext().IsValid() {
		t.Errorf("span of the disabled provider records (%v) or has a valid context (%v)", span.IsRecording(), span.SpanContext())
	}
	span.End()
	if err := tel.ForceFlush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if paths, _ := rec.seen(); len(paths) != 0 {
		t.Errorf("the receiver got %d export requests with tracing off: %v", len(paths), paths)
	}
}

// TestTraceExportsOverOTLP: with OTEL_EXPORTER_OTLP_ENDPOINT set, spans reach the receiver at
// /v1/traces as OTLP protobuf, with the service's resource, once Shutdown flushes them.
func TestTraceExportsOverOTLP(t *testing.T) {
	t.Parallel()
	rec := newOTLPReceiver(t)
	cfg := ConfigFromEnv(envOf(map[string]string{EnvEndpoint: rec.URL + "/otlp", EnvServiceName: "asterion-test"}))
	cfg.Version = "v9.9.9"
	tel, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !tel.Enabled() {
		t.Fatal("Enabled() = false with an endpoint")
	}
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "exported")
	span.End()
	if paths, _ := rec.seen(); len(paths) != 0 {
		t.Fatalf("spans were sent before a flush (the batcher should hold them): %v", paths)
	}
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	paths, reqs := rec.seen()
	if len(paths) != 1 || paths[0] != "POST /otlp/v1/traces application/x-protobuf" {
		t.Fatalf("export requests = %q, want one POST /otlp/v1/traces of protobuf", paths)
	}
	var names []string
	attrs := map[string]string{}
	for _, rs := range reqs[0].ResourceSpans {
		for _, kv := range rs.GetResource().GetAttributes() {
			attrs[kv.Key] = kv.GetValue().GetStringValue()
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				names = append(names, s.Name)
			}
		}
	}
	if strings.Join(names, ",") != "exported" {
		t.Errorf("exported spans = %v, want [exported]", names)
	}
	if attrs["service.name"] != "asterion-test" || attrs["service.version"] != "v9.9.9" {
		t.Errorf("resource = %v, want service.name asterion-test and service.version v9.9.9", attrs)
	}
}

// TestTraceTracesEndpointWins: OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is used as is.
func TestTraceTracesEndpointWins(t *testing.T) {
	t.Parallel()
	rec := newOTLPReceiver(t)
	tel, err := New(context.Background(), ConfigFromEnv(envOf(map[string]string{
		EnvEndpoint: "http://127.0.0.1:1", EnvTracesEndpoint: rec.URL + "/custom/path"})))
	if err != nil {
		t.Fatal(err)
	}
	_, span := tel.TracerProvider().Tracer("test").Start(context.Background(), "exported")
	span.End()
	if err := tel.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if paths, _ := rec.seen(); len(paths) != 1 || !strings.HasPrefix(paths[0], "POST /custom/path ") {
		t.Fatalf("export requests = %q, want one POST /custom/path", paths)
	}
}

func TestTraceConfigValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{EnvEndpoint: "localhost:4318"}, EnvEndpoint + ": want an http or https URL"},
		{map[string]string{EnvTracesEndpoint: "ftp://collector/v1/traces"}, EnvTracesEndpoint + ": want an http or https URL"},
		{map[string]string{EnvEndpoint: "http://collector:4318", EnvProtocol: "grpc"}, EnvProtocol + ": only http/protobuf"},
	} {
		_, err := New(context.Background(), ConfigFromEnv(envOf(tc.env)))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v) = %v, want an error containing %q", tc.env, err, tc.want)
		}
	}
	if err := ConfigFromEnv(envOf(map[string]string{EnvEndpoint: "https://collector:4318", EnvProtocol: "http/protobuf"})).Validate(); err != nil {
		t.Errorf("a good config: %v", err)
	}
}
