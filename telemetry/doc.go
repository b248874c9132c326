// Package telemetry sets up OpenTelemetry tracing for the server: a TracerProvider that
// exports over OTLP/HTTP when OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set, and nothing otherwise. It is a package of its own
// because it is wiring that cmd, handlers and jobs share and none of them owns.
//
// One trace follows each prompt: the HTTP request (handlers), the submit transaction (jobs),
// the River job that runs it and the provider call (jobs/provider). Trace context crosses
// process and queue boundaries in the W3C trace context format (the traceparent and
// tracestate headers, and the same keys in a River job's metadata), which each of those
// packages speaks with propagation.TraceContext; no global provider or propagator is set.
//
// When tracing is off, Telemetry.Enabled is false and callers leave their tracing out
// entirely (a nil trace.TracerProvider in their configuration), so the hot paths pay nothing.
package telemetry
