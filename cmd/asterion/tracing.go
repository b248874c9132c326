package main

import (
	"context"
	"log/slog"
	"time"

	"go.opentelemetry.io/otel/trace"

	"asterion/telemetry"
)

// startTracing sets up tracing as OTEL_EXPORTER_OTLP_ENDPOINT says (cfg, validated by the
// caller) and returns the provider to trace with, nil when tracing is off so that nothing is
// traced at all, and stop, which flushes the spans still buffered.
func startTracing(ctx context.Context, cfg telemetry.Config, log *slog.Logger) (trace.TracerProvider, func(), error) {
	cfg.Version = version
	tel, err := telemetry.New(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	if !tel.Enabled() {
		return nil, func() {}, nil
	}
	log.Info("tracing on: spans are exported over OTLP/HTTP")
	stop := func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := tel.Shutdown(sctx); err != nil {
			log.Warn("flush spans", "err", err)
		}
	}
	return tel.TracerProvider(), stop, nil
}
