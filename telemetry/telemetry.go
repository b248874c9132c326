package telemetry

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The environment variables Config reads (named by the OpenTelemetry specification).
const (
	EnvEndpoint       = "OTEL_EXPORTER_OTLP_ENDPOINT"
	EnvTracesEndpoint = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
	EnvProtocol       = "OTEL_EXPORTER_OTLP_PROTOCOL"
	EnvServiceName    = "OTEL_SERVICE_NAME"
)

// DefaultServiceName is the service.name of the spans when OTEL_SERVICE_NAME is not set.
const DefaultServiceName = "asterion"

// Config configures tracing. The zero value leaves tracing off.
type Config struct {
	// Endpoint is the OTLP/HTTP base URL (OTEL_EXPORTER_OTLP_ENDPOINT); spans go to its path
	// /v1/traces. Empty with TracesEndpoint empty too: no exporter, tracing off.
	Endpoint string
	// TracesEndpoint is the full URL spans are sent to (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); it
	// wins over Endpoint.
	TracesEndpoint string
	// Protocol is OTEL_EXPORTER_OTLP_PROTOCOL: "" or "http/protobuf", the only one supported.
	Protocol string
	// ServiceName is the service.name resource attribute (default DefaultServiceName).
	ServiceName string
	// Version is the service.version resource attribute; empty leaves it out.
	Version string
	// Exporter, when set, receives the spans instead of an OTLP exporter, and turns tracing
	// on (tests pass the SDK's in-memory exporter).
	Exporter sdktrace.SpanExporter
}

// ConfigFromEnv reads the OTLP settings from the environment through getenv.
func ConfigFromEnv(getenv func(string) string) Config {
	return Config{
		Endpoint:       strings.TrimSpace(getenv(EnvEndpoint)),
		TracesEndpoint: strings.TrimSpace(getenv(EnvTracesEndpoint)),
		Protocol:       strings.TrimSpace(getenv(EnvProtocol)),
		ServiceName:    strings.TrimSpace(getenv(EnvServiceName)),
	}
}

// Validate reports every bad value of c, one per line.
func (c Config) Validate() error {
	var errs []error
	for _, e := range [...]struct{ name, v string }{{EnvEndpoint, c.Endpoint}, {EnvTracesEndpoint, c.TracesEndpoint}} {
		name, v := e.name, e.v
		if v == "" {
			continue
		}
		if u, err := url.Parse(v); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("%s: want an http or https URL such as http://127.0.0.1:4318, got %q", name, v))
		}
	}
	if c.Protocol != "" && c.Protocol != "http/protobuf" {
		errs = append(errs, fmt.Errorf("%s: only http/protobuf is supported, got %q", EnvProtocol, c.Protocol))
	}
	return errors.Join(errs...)
}

// enabled reports whether c asks for spans to be exported.
func (c Config) enabled() bool {
	return c.Exporter != nil || c.Endpoint != "" || c.TracesEndpoint != ""
}

// tracesURL is where the OTLP exporter sends spans.
func (c Config) tracesURL() string {
	if c.TracesEndpoint != "" {
		return c.TracesEndpoint
	}
	u, _ := url.Parse(c.Endpoint) // Validate checked it.
	return u.JoinPath("v1", "traces").String()
}

// Telemetry is the process's tracing: a real TracerProvider when enabled, a no-op one
// otherwise.
type Telemetry struct {
	provider trace.TracerProvider
	sdk      *sdktrace.TracerProvider
}

// New validates cfg and builds the tracing it asks for. With no endpoint and no Exporter it
// creates no exporter and returns a disabled Telemetry whose provider records nothing.
func New(ctx context.Context, cfg Config) (*Telemetry, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if !cfg.enabled() {
		return &Telemetry{provider: noop.NewTracerProvider()}, nil
	}
	exp := cfg.Exporter
	if exp == nil {
		var err error
		// The exporter still reads OTEL_EXPORTER_OTLP_HEADERS, _TIMEOUT and the TLS settings
		// from the process environment.
		exp, err = otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(cfg.tracesURL()))
		if err != nil {
			return nil, fmt.Errorf("telemetry: OTLP exporter: %w", err)
		}
	}
	name := cfg.ServiceName
	if name == "" {
		name = DefaultServiceName
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", name)}
	if cfg.Version != "" {
		attrs = append(attrs, attribute.String("service.version", cfg.Version))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nil, fmt.Errorf("telemetry: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	return &Telemetry{provider: tp, sdk: tp}, nil
}

// Enabled reports whether spans are recorded and exported.
func (t *Telemetry) Enabled() bool { return t.sdk != nil }

// TracerProvider is the provider spans start from: a no-op one when tracing is off.
func (t *Telemetry) TracerProvider() trace.TracerProvider { return t.provider }

// ForceFlush exports every span ended so far.
func (t *Telemetry) ForceFlush(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.ForceFlush(ctx); err != nil {
		return fmt.Errorf("telemetry: flush spans: %w", err)
	}
	return nil
}

// Shutdown exports the spans still buffered and stops the exporter; spans started after it
// are dropped.
func (t *Telemetry) Shutdown(ctx context.Context) error {
	if t.sdk == nil {
		return nil
	}
	if err := t.sdk.Shutdown(ctx); err != nil {
		return fmt.Errorf("telemetry: shut down tracing: %w", err)
	}
	return nil
}
