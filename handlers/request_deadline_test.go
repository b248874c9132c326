package handlers

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/jobs/jobstest"
)

// slowQueryServer serves, with the real middleware, listener and error handler, one route
// /slow whose handler runs a 60 s statement (far longer than any test runs, so only a
// cancellation ends it) on the request's context and reports how it ended.
func slowQueryServer(t *testing.T, limits Limits) (base string, d *dbtest.DB, ended <-chan error) {
	t.Helper()
	d = dbtest.New(t)
	s := &Server{deps: Deps{Limits: limits.withDefaults()}, log: testLogger()}
	s.app = fiber.New(fiber.Config{ErrorHandler: s.handleError, DisableStartupMessage: true})
	s.app.Use(s.requestDeadline)
	done := make(chan error, 1)
	s.app.Get("/slow", func(c *fiber.Ctx) error {
		_, err := d.Bun.ExecContext(c.UserContext(), "SELECT pg_sleep(60) /* slow-request-test */")
		done <- err
		return err
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		<-served
	})
	return "http://" + ln.Addr().String(), d, done
}

// slowRunning counts the sessions running the /slow statement.
func slowRunning(t *testing.T, d *dbtest.DB) int {
	t.Helper()
	var n int
	if err := d.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM pg_stat_activity "+
		"WHERE datname = current_database() AND state = 'active' AND query LIKE '%slow-request-test%' AND pid <> pg_backend_pid()").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRequestDeadlineEndsItsQuery: a request still running at its deadline is answered 503
// (a problem document saying so) and its statement is stopped in PostgreSQL, not left running.
func TestRequestDeadlineEndsItsQuery(t *testing.T) {
	t.Parallel()
	base, d, ended := slowQueryServer(t, Limits{RequestTimeout: 300 * time.Millisecond})
	req, _ := http.NewRequest(http.MethodGet, base+"/slow", nil)
	req.Header.Set("Accept", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	p := wantProblem(t, resp, string(body), http.StatusServiceUnavailable)
	if !strings.Contains(p.Detail, "longer than 300ms") {
		t.Errorf("503 detail %q does not say the deadline", p.Detail)
	}
	if err := <-ended; err == nil {
		t.Error("the 60 s statement succeeded past the deadline")
	}
	jobstest.WaitFor(t, 20*time.Second, "PostgreSQL to stop the statement", func() bool { return slowRunning(t, d) == 0 })
}

// TestClientGoneCancelsQuery: a client that closes its connection while its request runs ends
// the request's context, and with it the statement in PostgreSQL, long before the statement or
// the request deadline would have ended.
func TestClientGoneCancelsQuery(t *testing.T) {
	t.Parallel()
	base, d, ended := slowQueryServer(t, Limits{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	jobstest.WaitFor(t, 20*time.Second, "the statement to run", func() bool { return slowRunning(t, d) == 1 })
	conn.Close()
	// Nothing but the client's leaving can end the 60 s statement within the test's timeout,
	// nor make it fail.
	if err := <-ended; err == nil {
		t.Fatal("the statement succeeded after its client left")
	}
	jobstest.WaitFor(t, 20*time.Second, "PostgreSQL to stop the statement", func() bool { return slowRunning(t, d) == 0 })
}

// TestQueueMetricsConcurrencyBounded: while the queue-metrics computations allowed at once are
// all running, another call is answered 429 with Retry-After at once (it takes no connection);
// once one ends, calls are served again.
func TestQueueMetricsConcurrencyBounded(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	tok := e.token(t, "metrics-org", "metrics-op", identity.RoleOperator)
	call := func() (*http.Response, string) {
		req := httptest.NewRequest(http.MethodGet, "/sa-core/v1/metrics/queue?window=744h", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		return e.do(t, req)
	}
	var releases []func()
	for i := 0; i < metricsConcurrency; i++ {
		release, ok := e.srv.metricsSlot()
		if !ok {
			t.Fatalf("slot %d of %d not free", i+1, metricsConcurrency)
		}
		releases = append(releases, release)
	}
	resp, body := call()
	wantProblem(t, resp, body, http.StatusTooManyRequests)
	if resp.Header.Get("Retry-After") == "" {
		t.Error("429 without Retry-After")
	}
	releases[0]()
	if resp, body := call(); resp.StatusCode != http.StatusOK {
		t.Fatalf("with a slot free: %d %s", resp.StatusCode, body)
	}
	if _, ok := e.srv.metricsSlot(); !ok {
		t.Error("a served call kept its slot")
	}
}
