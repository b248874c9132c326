package handlers

import (
	"errors"
	"strings"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the HTTP server spans.
const tracerName = "asterion/handlers"

// traceFormat is the trace context format of incoming requests: W3C trace context.
var traceFormat = propagation.TraceContext{}

// traceRequests is middleware that makes every request a server span, named by its route,
// under the caller's span when the request carries a traceparent header. The handlers'
// context (c.UserContext) carries the span, so what they call joins the trace. Probes,
// metrics and static files are not traced: they are many and say nothing about a prompt.
func traceRequests(tp trace.TracerProvider, routes []Route) fiber.Handler {
	tracer := tp.Tracer(tracerName)
	known := make(map[string]bool, len(routes))
	for _, r := range routes {
		known[r.Method+" "+r.Path] = true
	}
	return func(c *fiber.Ctx) error {
		if untraced(c.Path()) {
			return c.Next()
		}
		// fasthttp reuses the request's buffers: copy what the span keeps past the handler.
		method := strings.Clone(c.Method())
		parent := c.UserContext()
		ctx := traceFormat.Extract(parent, requestHeaderCarrier{&c.Request().Header})
		ctx, span := tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer),
			trace.WithAttributes(attribute.String("http.request.method", method),
				attribute.String("url.path", strings.Clone(c.Path())),
				attribute.String("asterion.request_id", strings.Clone(requestIDOf(c)))))
		defer span.End()
		c.SetUserContext(ctx)
		err := c.Next()
		c.SetUserContext(parent)
		// After the chain, c.Route is the route that answered (or the catch-all, not a route of
		// the table, for an unknown path).
		if r := c.Route(); known[method+" "+r.Path] {
			span.SetName(method + " " + r.Path)
			span.SetAttributes(attribute.String("http.route", r.Path))
		}
		status := c.Response().StatusCode()
		var fe *fiber.Error
		if errors.As(err, &fe) {
			status = fe.Code
		} else if err != nil {
			status = fiber.StatusInternalServerError
		}
		span.SetAttributes(attribute.Int("http.response.status_code", status))
		if status >= 500 {
			span.SetStatus(codes.Error, "")
		}
		return err
	}
}

// untraced reports whether a request to path gets no span.
func untraced(path string) bool {
	switch path {
	case "/metrics", "/readyz", "/healthz":
		return true
	}
	return strings.HasPrefix(path, "/static/")
}

// requestHeaderCarrier reads trace context from fasthttp's request headers.
type requestHeaderCarrier struct{ h *fasthttp.RequestHeader }

// Get returns a copy of the header's value.
func (r requestHeaderCarrier) Get(key string) string { return string(r.h.Peek(key)) }

// Set sets a header (unused: requests are only read).
func (r requestHeaderCarrier) Set(key, value string) { r.h.Set(key, value) }

// Keys lists the header names.
func (r requestHeaderCarrier) Keys() []string {
	var keys []string
	r.h.VisitAll(func(k, _ []byte) { keys = append(keys, string(k)) })
	return keys
}
