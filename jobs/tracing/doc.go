// Package tracing carries one trace per prompt from its submit to its execution: the submit's
// span context is written into the River job's metadata in the W3C trace context format (the
// keys traceparent and tracestate, as otelriver writes them), and the worker middleware starts
// the job's work under that context, then otelriver's work span under it.
//
// otelriver alone would only link the work span to the inserting span, and under group commit
// one River insert serves the submits of several traces, so every vehicle carries its own
// submit's context instead. It is a package of its own because it is only this bridge between
// OpenTelemetry and River's metadata: package jobs writes Metadata on each vehicle it inserts
// and gives WorkMiddleware to the worker; nothing here reads the database.
package tracing
