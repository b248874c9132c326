// Package handlers is Asterion's HTTP surface on Fiber: the route table (routes.go), the one
// authorization middleware, the REST API (docs/api.md), the pages and the SSE streams. Handlers
// translate HTTP to calls on the jobs and identity packages and hold no business rules.
package handlers

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/filesystem"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/valyala/fasthttp/fasthttpadaptor"
	"go.opentelemetry.io/otel/trace"

	"asterion/db"
	"asterion/handlers/openai"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/batch"
	"asterion/jobs/chain"
	"asterion/jobs/feed"
	"asterion/jobs/flowctl"
	"asterion/jobs/output"
	"asterion/jobs/readmodel"
	"asterion/static"
	"asterion/views"
)

// BodyLimit is the largest request body accepted; a larger one answers 413.
const BodyLimit = 256 * 1024

// Deps are the server's collaborators, passed in explicitly.
type Deps struct {
	Identity *identity.Service
	Jobs     *jobs.Service
	// Reads are the read models the API and the pages show; nil means read models over Jobs'
	// database, registry and meter.
	Reads *readmodel.Reads
	// Chains accepts and reads flow.chain operations, and Batches keeps the front door's files
	// and runs its batches: both from NewOwners over Jobs, built once by the process. When
	// both are nil and Jobs is set, New builds them with NewOwners (whose batch worker then
	// runs only on pools built after it).
	Chains  *chain.Chains
	Batches *batch.Batches
	// Flow reads and steers flow control for the health page; nil means one over Jobs' database
	// that knows no configured provider limits (the learned ones still show).
	Flow *flowctl.Control
	// Hub fans change-feed events out to SSE streams.
	Hub *feed.Hub
	// Output delivers the live output of running jobs to SSE streams; nil: streams carry no
	// output (it is still read from the table).
	Output *output.Hub
	// Ready reports whether the database is reachable and migrations are current.
	Ready    func(ctx context.Context) error
	Logger   *slog.Logger
	Registry *prometheus.Registry
	// SecureCookies sets the Secure flag on cookies (serving over TLS).
	SecureCookies bool
	// Version is printed by /healthz.
	Version string
	RiverUI http.Handler // River's own web UI (riverui.Handler), mounted at /admin/river for admins; nil leaves it out.
	// Streams bounds the SSE streams; it must be valid (StreamConfig.Validate).
	Streams StreamConfig
	// Limits are the transport limits; they must pass Limits.Validate (zero values are defaults).
	Limits Limits
	// Tracer, when set, makes every request a span (tracing.go); nil leaves tracing out.
	Tracer trace.TracerProvider
}

// Server is the HTTP application.
type Server struct {
	app  *fiber.App
	deps Deps
	log  *slog.Logger
	// dashboard is what the operator dashboard shares across requests and streams.
	dashboard *dashboardState
	// streams bounds and guards every SSE stream.
	streams *streamGuard
	// metricsSlots bounds the queue-metrics computations running at once (metrics_slots.go).
	metricsSlots chan struct{}
	// ready caches the readiness check of /readyz (health.go).
	ready *readyCache
	// dropCache caches the rendered settled drops of mission fields (mission_drop_cache.go).
	dropCache *missionDropCache
	// outputFrames caches the encoded job.output events of the API's streams (output_frames.go).
	outputFrames *outputFrames
	// conns is the listener Serve serves on (tests read its open connections).
	conns atomic.Pointer[connGuard]
}

// New builds the Fiber app with every route of routes.go.
func New(deps Deps) *Server {
	if deps.Logger == nil {
		deps.Logger = slog.Default()
	}
	if deps.Registry == nil {
		deps.Registry = prometheus.NewRegistry()
	}
	if err := deps.Limits.Validate(); err != nil {
		panic("handlers.New: " + err.Error())
	}
	deps.Limits = deps.Limits.withDefaults()
	if (deps.Chains == nil) != (deps.Batches == nil) {
		panic("handlers.New: Deps.Chains and Deps.Batches come together, from NewOwners")
	}
	if deps.Chains == nil && deps.Jobs != nil {
		o, err := NewOwners(deps.Jobs)
		if err != nil {
			panic("handlers.New: " + err.Error())
		}
		deps.Chains, deps.Batches = o.Chains, o.Batches
	}
	if deps.Reads == nil && deps.Jobs != nil {
		deps.Reads = readmodel.Of(deps.Jobs)
	}
	if deps.Flow == nil && deps.Jobs != nil {
		// The database is set, so New cannot fail.
		deps.Flow, _ = flowctl.New(flowctl.Config{DB: deps.Jobs.DB()})
	}
	s := &Server{deps: deps, log: deps.Logger, dashboard: newDashboardState(deps), streams: newStreamGuard(deps.Streams),
		metricsSlots: make(chan struct{}, metricsConcurrency), ready: &readyCache{now: time.Now},
		dropCache: newMissionDropCache(missionDropCacheBytes), outputFrames: newOutputFrames(outputFramesKept)}
	s.app = fiber.New(fiber.Config{
		AppName: "asterion",
		// fasthttp reads at most BodyLimit of a body ahead of the handlers.
		BodyLimit:             BodyLimit,
		DisableStartupMessage: true,
		ReadTimeout:           30 * time.Second,
		IdleTimeout:           120 * time.Second,
		ErrorHandler:          s.handleError,

		// Bodies are streamed: a file upload reads its body as it arrives and is never held
		// whole; every other route reads at most BodyLimit of it (enforceBodyLimit), which
		// answers the 413. The form is not parsed before the handler, which would read the
		// whole upload ahead of the authorization.
		StreamRequestBody:            true,
		DisablePreParseMultipartForm: true,
	})
	metrics := NewHTTPMetrics(deps.Registry)
	s.app.Use(s.recoverPanic, s.requestID, browserHeaders, s.accessLog, metrics.middleware, enforceBodyLimit)
	if deps.Tracer != nil {
		s.app.Use(traceRequests(deps.Tracer, s.routes()))
	}
	s.app.Use(s.requestDeadline)
	s.app.Use("/static", filesystem.New(filesystem.Config{Root: http.FS(static.FS), MaxAge: 3600}))
	for _, r := range s.routes() {
		s.app.Add(r.Method, r.Path, s.authorize(r.Access, r.Surface), r.Handler)
	}
	s.app.Use(func(c *fiber.Ctx) error {
		if isOpenAIPath(c.Path()) {
			return writeOpenAIError(c, openai.InvalidURL(c.Method(), c.Path()))
		}
		if isAPIPath(c.Path()) {
			return problem(c, fiber.StatusNotFound, "no such resource")
		}
		return s.errorPage(c, fiber.StatusNotFound, "Not found", "There is nothing at this address.")
	})
	return s
}

// App exposes the Fiber app for tests.
func (s *Server) App() *fiber.App { return s.app }

// Serve serves on ln until ctx ends, then shuts down gracefully within 5 s (open SSE streams end at once).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	errc := make(chan error, 1)
	guard := newConnGuard(ln, s.deps.Limits.MaxConnsPerIP, s.deps.Limits.WriteTimeout, s.log)
	s.conns.Store(guard)
	go func() { errc <- s.app.Listener(guard) }()
	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	if err := s.app.ShutdownWithTimeout(5 * time.Second); err != nil {
		return fmt.Errorf("shut down http: %w", err)
	}
	return nil
}

func isAPIPath(p string) bool { return strings.HasPrefix(p, "/sa-core/") }

// handleError turns an error no handler answered into a clean response: a problem document
// for the API, a page otherwise; never a stack trace, SQL or an internal path.
func (s *Server) handleError(c *fiber.Ctx, err error) error {
	// Errors the transport raises (a body over the limit, a bad request line) reach here
	// without the middleware having run.
	setBrowserHeaders(c)
	status := fiber.StatusInternalServerError
	detail := "an internal error occurred; it has been logged"
	var fe *fiber.Error
	if errors.As(err, &fe) {
		status = fe.Code
		detail = fe.Message
		if status == fiber.StatusRequestEntityTooLarge {
			detail = fmt.Sprintf("the body is larger than %d bytes", BodyLimit)
		}
	} else if requestTimedOut(c) {
		status = fiber.StatusServiceUnavailable
		detail = fmt.Sprintf("the request took longer than %s and was stopped; retry later", s.deps.Limits.RequestTimeout)
		c.Set(fiber.HeaderRetryAfter, "5")
		s.log.Warn("request deadline passed", "request_id", requestIDOf(c), "method", c.Method(), "path", c.Path(), "err", err)
	} else if errors.Is(requestEndCause(c), errClientGone) {
		// Nobody reads this answer.
		status, detail = fiber.StatusServiceUnavailable, "the client closed the connection"
		s.log.Info("client left before the answer", "request_id", requestIDOf(c), "method", c.Method(), "path", c.Path())
	} else if db.IsUnavailable(err) {
		// The client may retry; with its Idempotency-Key when it submitted, since a connection
		// lost during COMMIT leaves the outcome unknown.
		status, detail = fiber.StatusServiceUnavailable, "the database is unavailable right now; retry shortly"
		c.Set(fiber.HeaderRetryAfter, "2")
		s.log.Warn("database unavailable", "request_id", requestIDOf(c), "method", c.Method(), "path", c.Path(), "err", err)
	} else {
		s.log.Error("request failed", "request_id", requestIDOf(c), "method", c.Method(), "path", c.Path(), "err", err)
	}
	// A chunked body over the limit makes the transport drop the request (path and headers
	// are gone, Host with them) before this runs: it answers a problem document, as an API
	// client sends such bodies, not a browser form.
	dropped := len(c.Request().Header.Host()) == 0
	if isOpenAIPath(c.Path()) && !dropped {
		return writeOpenAIError(c, openai.Status(status, detail))
	}
	if isAPIPath(c.Path()) || c.Get(fiber.HeaderAccept) == "application/json" || dropped {
		return problem(c, status, detail)
	}
	return s.errorPage(c, status, statusTitle(status), detail)
}

// errorPage renders the friendly error page with the caller's nav when known.
func (s *Server) errorPage(c *fiber.Ctx, status int, title, detail string) error {
	c.Status(status)
	return render(c, views.ErrorPage(pageFor(c, title, ""), status, title, detail))
}

// render writes a templ component as HTML.
func render(c *fiber.Ctx, comp templ.Component) error {
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	return comp.Render(c.UserContext(), c.Response().BodyWriter())
}

// pageFor builds the layout data of the signed-in user.
func pageFor(c *fiber.Ctx, title, nav string) views.Page {
	p := views.Page{Title: title, Nav: nav, CSRFToken: csrfOf(c)}
	if pr := principalOf(c); pr.UserID != 0 {
		p.User = &views.User{Name: pr.UserName, Role: string(pr.Role), OrgName: pr.OrgName}
	}
	return p
}

type requestIDKey struct{}

func requestIDOf(c *fiber.Ctx) string {
	s, _ := c.Locals(requestIDKey{}).(string)
	return s
}

// requestID gives every request an id (kept from X-Request-ID when sane) for logs and answers.
func (s *Server) requestID(c *fiber.Ctx) error {
	id := c.Get(fiber.HeaderXRequestID)
	if id == "" || len(id) > 64 || strings.ContainsAny(id, " \r\n\"") {
		id = uuid.NewString()
	} else {
		// Kept in the locals and logged, possibly after the handler (a stream's writer): a
		// copy, not a view of the request buffer the connection's next request rewrites.
		id = strings.Clone(id)
	}
	c.Locals(requestIDKey{}, id)
	c.Set(fiber.HeaderXRequestID, id)
	return c.Next()
}

func (s *Server) accessLog(c *fiber.Ctx) error {
	start := time.Now()
	err := c.Next()
	if c.Route().Path == "/healthz" || c.Route().Path == "/metrics" {
		return err
	}
	status := c.Response().StatusCode()
	var fe *fiber.Error
	if errors.As(err, &fe) {
		status = fe.Code
	} else if err != nil {
		status = fiber.StatusInternalServerError
	}
	s.log.Debug("http", "request_id", requestIDOf(c), "method", c.Method(), "path", c.Path(),
		"status", status, "duration", time.Since(start))
	return err
}

// recoverPanic turns a panic into a logged 500, never a dropped connection or a trace.
func (s *Server) recoverPanic(c *fiber.Ctx) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.Error("panic in handler", "request_id", requestIDOf(c), "path", c.Path(), "panic", fmt.Sprint(r))
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return c.Next()
}

// metricsHandler serves the Prometheus registry.
func (s *Server) metricsHandler() fiber.Handler {
	h := fasthttpadaptor.NewFastHTTPHandler(promhttp.HandlerFor(s.deps.Registry, promhttp.HandlerOpts{}))
	return func(c *fiber.Ctx) error {
		h(c.Context())
		return nil
	}
}

// enforceBodyLimit reads the body of every route but a streamed upload up to BodyLimit and
// answers 413 beyond it: at once for a Content-Length over the limit, at the limit for a
// chunked body, without reading the rest. The connection then closes (its unread bytes are no
// request), and the lingering close lets the client read the answer.
func enforceBodyLimit(c *fiber.Ctx) error {
	req := c.Request()
	if streamsItsBody(c) || !req.IsBodyStream() {
		return c.Next()
	}
	tooLarge := func() error {
		c.Context().SetConnectionClose()
		return fiber.NewError(fiber.StatusRequestEntityTooLarge, "request body too large")
	}
	if req.Header.ContentLength() > BodyLimit {
		return tooLarge()
	}
	body, err := io.ReadAll(io.LimitReader(req.BodyStream(), BodyLimit+1))
	if err != nil {
		c.Context().SetConnectionClose()
		return fiber.NewError(fiber.StatusBadRequest, "the request body could not be read")
	}
	if len(body) > BodyLimit {
		return tooLarge()
	}
	req.SetBody(body)
	return c.Next()
}
