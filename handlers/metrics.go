package handlers

import (
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// HTTPMetrics counts requests and their latency by method, route pattern and status.
type HTTPMetrics struct {
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// NewHTTPMetrics registers the HTTP collectors on reg.
func NewHTTPMetrics(reg prometheus.Registerer) *HTTPMetrics {
	m := &HTTPMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "asterion_http_requests_total", Help: "HTTP requests by method, route and status.",
		}, []string{"method", "route", "status"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "asterion_http_request_duration_seconds", Help: "HTTP request latency by method and route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
		}, []string{"method", "route"}),
	}
	reg.MustRegister(m.requests, m.duration)
	return m
}

// middleware observes every request; the route label is the pattern, never the raw path, so
// ids do not explode the label space.
func (m *HTTPMetrics) middleware(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	status := c.Response().StatusCode()
	if err != nil {
		if fe, ok := err.(*fiber.Error); ok {
			status = fe.Code
		} else {
			status = fiber.StatusInternalServerError
		}
	}
	route := c.Route().Path
	if route == "" || route == "/" && c.Path() != "/" {
		route = "unmatched"
	}
	method := methodLabel(c.Method())
	m.requests.WithLabelValues(method, route, strconv.Itoa(status)).Inc()
	m.duration.WithLabelValues(method, route).Observe(time.Since(start).Seconds())
	return err
}

// methodLabel is the method label of a request: one of the standard methods as a constant of
// this program, or "other". A label value is kept by the registry for good, and c.Method() is a
// view of the transport's request buffer, rewritten by the connection's next request (a kept
// "GET" would read "POS" or "GETT" later and collide with another series).
func methodLabel(m string) string {
	for _, known := range [...]string{fiber.MethodGet, fiber.MethodHead, fiber.MethodPost, fiber.MethodPut,
		fiber.MethodPatch, fiber.MethodDelete, fiber.MethodOptions, fiber.MethodConnect, fiber.MethodTrace} {
		if m == known {
			return known
		}
	}
	return "other"
}
