package handlers

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// liveServer is the whole application on a real loopback listener: its own database, the
// identity service, a jobs service on the fast simulated provider, a worker runtime and a
// running change-feed hub, served by handlers.New(...).Serve as the binary does. Unlike
// app.Test it streams, so SSE tests read events as they happen. It is the one server harness
// of the package: the dashboard and browser tests build on it.
type liveServer struct {
	Base string
	DB   *dbtest.DB
	IDs  *identity.Service
	Jobs *jobs.Service
	Hub  *feed.Hub
	// Server is the served application and Deps what it was built from.
	Server *Server
	Deps   Deps

	client      *http.Client
	serveCancel context.CancelFunc
	serveDone   chan error

	rt        *jobs.Runtime
	rtCtx     context.Context
	startOnce sync.Once
	started   chan struct{}

	stopOnce  sync.Once
	serveErr  error
	serveTook time.Duration
	serveLate bool
}

// liveServerConfig changes the defaults of startLiveServerWith, the one way the package's
// tests build a served application (newTestEnv builds the same service and server without a
// listener, for app.Test).
type liveServerConfig struct {
	// Provider defaults to the sim provider with a 20–50 ms latency.
	Provider provider.Provider
	// HoldWorkers leaves the worker runtime stopped until StartWorkers, so that jobs stay
	// queued for as long as the test needs.
	HoldWorkers bool
	// Deps changes the server's dependencies before it is built.
	Deps func(d *dbtest.DB, deps *Deps)
	// Jobs changes the jobs service's configuration before it is built.
	Jobs func(cfg *jobs.Config)
	// Service runs on the jobs service once it is built, before the workers start (to register
	// an owner of deferred operations, say).
	Service func(svc *jobs.Service)
	// Runtime changes the worker runtime's configuration before it is built.
	Runtime func(cfg *jobs.RuntimeConfig)
	// Streams are the server's stream limits.
	Streams StreamConfig
	// Logger is the logger of everything; default testLogger().
	Logger *slog.Logger
	// DB, when set, is served instead of a fresh database: a second server over the first
	// one's database is another process as far as the feeds are concerned. The database is
	// then not dropped with this server.
	DB *dbtest.DB
}

// newTestJobs builds the jobs service of a test server over d: prov (default the sim without
// latency), log, and what mods change.
func newTestJobs(t *testing.T, d *dbtest.DB, prov provider.Provider, log *slog.Logger, mods ...func(*jobs.Config)) *jobs.Service {
	t.Helper()
	if prov == nil {
		prov = provider.NewSim(provider.SimConfig{})
	}
	cfg := jobs.Config{DB: d.Bun, Provider: prov, Logger: log}
	for _, m := range mods {
		if m != nil {
			m(&cfg)
		}
	}
	svc, err := jobs.NewService(cfg)
	if err != nil {
		t.Fatalf("jobs service: %v", err)
	}
	return svc
}

// liveUser is a user with an API token.
type liveUser struct {
	Name  string
	ID    int64
	OrgID int64
	Org   string
	Role  identity.Role
	Tok   string
}

// testLogger discards logs unless ASTERION_TEST_LOG is set (then they go to stderr; never to
// t.Log, which background goroutines may outlive).
func testLogger() *slog.Logger {
	if os.Getenv("ASTERION_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startLiveServer starts everything with the defaults; the test's cleanup stops it all
// (server, workers, hub) and then drops the database.
func startLiveServer(t *testing.T) *liveServer {
	t.Helper()
	return startLiveServerWith(t, liveServerConfig{})
}

// startLiveServerWith starts everything as cfg says.
func startLiveServerWith(t *testing.T, cfg liveServerConfig) *liveServer {
	t.Helper()
	d := cfg.DB
	if d == nil {
		d = dbtest.New(t)
	}
	log := cfg.Logger
	if log == nil {
		log = testLogger()
	}
	if cfg.Provider == nil {
		cfg.Provider = provider.NewSim(provider.SimConfig{MinLatency: 20 * time.Millisecond, MaxLatency: 50 * time.Millisecond})
	}
	ids := newTestIdentity(t, d)
	svc := newTestJobs(t, d, cfg.Provider, log, cfg.Jobs)
	if cfg.Service != nil {
		cfg.Service(svc)
	}
	rcfg := jobs.RuntimeConfig{Pool: d.Pool, Workers: 4, PriorityCeiling: -1}
	if cfg.Runtime != nil {
		cfg.Runtime(&rcfg)
	}
	// The owners are built before the runtime, as the command builds them, so that the
	// batches' worker runs on its pool.
	owners, err := NewOwners(svc)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := jobs.NewRuntime(svc, rcfg)
	if err != nil {
		t.Fatalf("jobs runtime: %v", err)
	}
	rtCtx, rtCancel := context.WithCancel(context.Background())
	hub := feed.NewHub(d.Pool, d.Bun, log)
	stopHub := hub.Start(context.Background())

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deps := Deps{Identity: ids, Jobs: svc, Hub: hub, Logger: log, Streams: cfg.Streams, Chains: owners.Chains, Batches: owners.Batches,
		Ready: func(ctx context.Context) error { return d.Bun.PingContext(ctx) }}
	if cfg.Deps != nil {
		cfg.Deps(d, &deps)
	}
	srv := New(deps)
	serveCtx, serveCancel := context.WithCancel(context.Background())
	f := &liveServer{
		Base: "http://" + ln.Addr().String(), DB: d, IDs: ids, Jobs: svc, Hub: hub, Server: srv, Deps: deps,
		client:      &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}},
		serveCancel: serveCancel, serveDone: make(chan error, 1),
		rt: rt, rtCtx: rtCtx, started: make(chan struct{}),
	}
	go func() { f.serveDone <- srv.Serve(serveCtx, ln) }()
	t.Cleanup(func() {
		// The test's client leaves first, as clients do before a server stops: its idle
		// keep-alive connections would otherwise be the server's to close, each lingering
		// until the client notices.
		f.client.CloseIdleConnections()
		if took, late, err := f.shutdown(); late {
			t.Errorf("Serve did not return within 15 s of shutdown")
		} else if err != nil {
			t.Errorf("Serve returned %v after %v", err, took)
		}
		select {
		case <-f.started:
			if err := rt.Stop(context.Background(), time.Second); err != nil {
				t.Errorf("stop runtime: %v", err)
			}
		default:
		}
		rtCancel()
		stopHub()
	})
	select {
	case <-hub.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the change-feed hub is not ready after 10 s")
	}
	if !cfg.HoldWorkers {
		f.StartWorkers(t)
	}
	return f
}

// StartWorkers starts the worker runtime (once).
func (f *liveServer) StartWorkers(t *testing.T) {
	t.Helper()
	f.startOnce.Do(func() {
		if err := f.rt.Start(f.rtCtx); err != nil {
			t.Fatalf("start runtime: %v", err)
		}
		close(f.started)
	})
}

// shutdown cancels the serve context once and reports how Serve ended and how long it took.
func (f *liveServer) shutdown() (took time.Duration, late bool, err error) {
	f.stopOnce.Do(func() {
		start := time.Now()
		f.serveCancel()
		select {
		case f.serveErr = <-f.serveDone:
		case <-time.After(15 * time.Second):
			f.serveLate = true
		}
		f.serveTook = time.Since(start)
	})
	return f.serveTook, f.serveLate, f.serveErr
}

// user creates name (and org when missing) with role, and an API token for it.
func (f *liveServer) user(t *testing.T, org, name string, role identity.Role) liveUser {
	t.Helper()
	ctx := context.Background()
	o, err := f.IDs.OrgByName(ctx, org)
	if err != nil {
		if o, err = f.IDs.CreateOrg(ctx, org); err != nil {
			t.Fatalf("create org %s: %v", org, err)
		}
	}
	u, err := f.IDs.CreateUser(ctx, org, name, role, "")
	if err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	tok, err := f.IDs.CreateToken(ctx, name)
	if err != nil {
		t.Fatalf("create token for %s: %v", name, err)
	}
	return liveUser{Name: name, ID: u.ID, OrgID: o.ID, Org: org, Role: role, Tok: tok}
}

// liveResp is a response with its whole body read.
type liveResp struct {
	*http.Response
	Body []byte
}

func (r liveResp) String() string { return fmt.Sprintf("%d %s", r.StatusCode, r.Body) }

// request builds a request to path. body is nil (none), a string or []byte (sent as is, with
// Content-Type application/json) or any other value (JSON-encoded). hdr are name/value pairs;
// an empty value removes the header.
func (f *liveServer) request(t *testing.T, method, path, tok string, body any, hdr ...string) *http.Request {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, f.Base+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	if len(hdr)%2 != 0 {
		t.Fatalf("odd header list %q", hdr)
	}
	for i := 0; i < len(hdr); i += 2 {
		if hdr[i+1] == "" {
			req.Header.Del(hdr[i])
		} else {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	return req
}

// do sends a request (see request) and reads the whole answer.
func (f *liveServer) do(t *testing.T, method, path, tok string, body any, hdr ...string) liveResp {
	t.Helper()
	return f.send(t, f.request(t, method, path, tok, body, hdr...))
}

func (f *liveServer) send(t *testing.T, req *http.Request) liveResp {
	t.Helper()
	resp, err := f.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read body: %v", req.Method, req.URL.Path, err)
	}
	checkAnswer(t, req, resp, b)
	return liveResp{Response: resp, Body: b}
}

// liveSubmitted is the part of a 202 answer to POST /prompt the tests use.
type liveSubmitted struct {
	PromptID  string          `json:"prompt_id"`
	JobID     string          `json:"job_id"`
	State     string          `json:"state"`
	Operation json.RawMessage `json:"operation"`
}

// submit posts a prompt as u and requires 202.
func (f *liveServer) submit(t *testing.T, u liveUser, prompt string) liveSubmitted {
	t.Helper()
	r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": prompt})
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("submit %q as %s: %s", prompt, u.Name, r)
	}
	return mustDecode[liveSubmitted](t, r.Body)
}

// liveJob is the wire form of a job as the tests read it.
type liveJob struct {
	JobID       string    `json:"job_id"`
	PromptID    string    `json:"prompt_id"`
	State       string    `json:"state"`
	Priority    int       `json:"priority"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	ErrorKind   *string   `json:"error_kind"`
	Supersedes  *string   `json:"supersedes"`
	ResponseID  *string   `json:"response_id"`
	OrgID       int64     `json:"org_id"`
	CreatedBy   int64     `json:"created_by"`
	CreatedAt   string    `json:"created_at"`
	History     []liveJob `json:"history"`
}

// job reads GET /jobs/{id} as u and requires 200.
func (f *liveServer) job(t *testing.T, u liveUser, id string) liveJob {
	t.Helper()
	r := f.do(t, "GET", "/sa-core/v1/jobs/"+id, u.Tok, nil)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET job %s as %s: %s", id, u.Name, r)
	}
	return mustDecode[liveJob](t, r.Body)
}

// waitJob polls the job until its state is one of states.
func (f *liveServer) waitJob(t *testing.T, u liveUser, id string, states ...string) liveJob {
	t.Helper()
	var j liveJob
	jobstest.WaitFor(t, 20*time.Second, fmt.Sprintf("job %s to be one of %v", id, states), func() bool {
		j = f.job(t, u, id)
		return slices.Contains(states, j.State)
	})
	return j
}

// rowCounts counts the rows a submission writes. Entities are counted as prompts only: the
// server's workers write a response entity whenever an earlier accepted job finishes, which may
// fall between two counts.
func (f *liveServer) rowCounts(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	for table, where := range map[string]string{
		"sa_entity": " WHERE kind = 'prompt'", "sa_job": "", "sa_operation": "", "sa_idempotency": "",
		"river_job": " WHERE kind = '" + jobs.KindPromptExecute + "'",
	} {
		var n int
		if err := f.DB.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM "+table+where).Scan(&n); err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
		out[table] = n
	}
	return out
}

// waitSequenced waits until every change-feed event written so far has its number.
func (f *liveServer) waitSequenced(t *testing.T) {
	t.Helper()
	jobstest.WaitFor(t, 10*time.Second, "every change-feed event to be numbered", func() bool {
		var n int
		if err := f.DB.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM sa_event WHERE seq IS NULL").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 0
	})
}

func mustDecode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode %T from %s: %v", v, b, err)
	}
	return v
}

// leakRE finds what an error body must never carry: SQL, driver errors, stack traces, paths.
var leakRE = regexp.MustCompile(`(?i)sql|pq:|ERROR #|goroutine|\.go:\d+|(^|[\s"'(])/(usr|home|work|tmp|root|go|src|var|etc)/`)

// checkProblem requires an application/problem+json answer with status and the contract's
// fields, free of internals.
func checkProblem(t *testing.T, r liveResp, status int) Problem {
	t.Helper()
	if r.StatusCode != status {
		t.Fatalf("status %d, want %d: %s", r.StatusCode, status, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/problem+json") {
		t.Fatalf("Content-Type %q, want application/problem+json: %s", ct, r.Body)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(r.Body, &raw); err != nil {
		t.Fatalf("problem body %s: %v", r.Body, err)
	}
	for _, k := range []string{"type", "title", "status", "detail"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("problem %s has no %q", r.Body, k)
		}
	}
	p := mustDecode[Problem](t, r.Body)
	if p.Status != status || p.Type == "" || p.Title == "" || p.Detail == "" {
		t.Errorf("problem %+v: want status %d with type, title and detail", p, status)
	}
	if m := leakRE.FindString(string(r.Body)); m != "" {
		t.Errorf("problem body leaks internals (%q): %s", m, r.Body)
	}
	return p
}

// sseEvent is one dispatched server-sent event, or a comment line.
type sseEvent struct {
	Comment string
	ID      int64
	HasID   bool
	Name    string
	Data    string
}

// sseStream reads a text/event-stream in the background.
type sseStream struct {
	Resp   *http.Response
	C      <-chan sseEvent
	cancel context.CancelFunc
	done   chan struct{}
}

// openEvents opens GET path as an event stream; the stream is closed when the test ends.
func (f *liveServer) openEvents(t *testing.T, path, tok string, hdr ...string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req := f.request(t, "GET", path, tok, nil, hdr...).WithContext(ctx)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := f.client.Do(req)
	if err != nil {
		cancel()
		t.Fatalf("open %s: %v", path, err)
	}
	checkStreamHead(t, req, resp)
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		t.Fatalf("open %s: %d %s", path, resp.StatusCode, b)
	}
	s := readSSE(resp, cancel)
	t.Cleanup(s.Close)
	return s
}

// readSSE reads resp's text/event-stream in the background: the one SSE reader of the
// package's tests. cancel ends the request that resp answers.
func readSSE(resp *http.Response, cancel context.CancelFunc) *sseStream {
	c := make(chan sseEvent, 1024)
	s := &sseStream{Resp: resp, C: c, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer close(c)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64*1024), 8<<20)
		var ev sseEvent
		var data []string
		has := false
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if has {
					ev.Data = strings.Join(data, "\n")
					c <- ev
				}
				ev, data, has = sseEvent{}, nil, false
			case strings.HasPrefix(line, ":"):
				c <- sseEvent{Comment: strings.TrimSpace(strings.TrimPrefix(line, ":"))}
			default:
				name, value, _ := strings.Cut(line, ":")
				value = strings.TrimPrefix(value, " ")
				switch name {
				case "id":
					n, err := strconv.ParseInt(value, 10, 64)
					ev.ID, ev.HasID, has = n, err == nil, true
				case "event":
					ev.Name, has = value, true
				case "data":
					data, has = append(data, value), true
				}
			}
		}
	}()
	return s
}

// Close disconnects and waits for the reader to end.
func (s *sseStream) Close() {
	s.cancel()
	<-s.done
}

// next returns the next event or comment, or false when the stream ended or timeout passed.
func (s *sseStream) next(timeout time.Duration) (sseEvent, bool) {
	select {
	case e, ok := <-s.C:
		return e, ok
	case <-time.After(timeout):
		return sseEvent{}, false
	}
}

// nextEvent skips comments and returns the next event before the deadline.
func (s *sseStream) nextEvent(deadline time.Time) (sseEvent, bool) {
	for {
		e, ok := s.next(time.Until(deadline))
		if !ok {
			return e, false
		}
		if e.Comment == "" {
			return e, true
		}
	}
}

// jobEventData is the data of a job.state_changed event.
type jobEventData struct {
	PromptID   string  `json:"prompt_id"`
	JobID      string  `json:"job_id"`
	State      string  `json:"state"`
	Attempt    int     `json:"attempt"`
	ErrorKind  *string `json:"error_kind"`
	ResponseID *string `json:"response_id"`
	UpdatedAt  string  `json:"updated_at"`
}
