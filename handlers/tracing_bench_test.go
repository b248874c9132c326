package handlers

import (
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkTraceRequests is what the request span costs one request: "off" is the server
// without the middleware (tracing off), "on" records every span into memory.
func BenchmarkTraceRequests(b *testing.B) {
	routes := []Route{{Method: "POST", Path: "/sa-core/v1/prompt"}}
	for _, mode := range []string{"off", "on"} {
		b.Run(mode, func(b *testing.B) {
			app := fiber.New(fiber.Config{DisableStartupMessage: true})
			if mode == "on" {
				rec := tracetest.NewSpanRecorder()
				app.Use(traceRequests(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)), routes))
			}
			app.Post("/sa-core/v1/prompt", func(c *fiber.Ctx) error { return c.SendStatus(fiber.StatusAccepted) })
			h := app.Handler()
			var fctx fasthttp.RequestCtx
			b.ReportAllocs()
			for b.Loop() {
				fctx.Request.Reset()
				fctx.Request.Header.SetMethod("POST")
				fctx.Request.SetRequestURI("/sa-core/v1/prompt")
				fctx.Request.Header.Set("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
				h(&fctx)
				if fctx.Response.StatusCode() != fiber.StatusAccepted {
					b.Fatalf("status %d", fctx.Response.StatusCode())
				}
			}
		})
	}
}
