package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

func TestUnknownAPIPathIs404Problem(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	for _, method := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		resp, body := e.do(t, httptest.NewRequest(method, "/sa-core/v1/no-such-thing/123", nil))
		wantProblem(t, resp, body, http.StatusNotFound)
	}
	resp, body := e.do(t, get("/no-such-page"))
	wantHTML(t, resp, body, http.StatusNotFound)
}

// serveHTTP serves e's app on a real loopback listener (Serve, as the binary does) and returns
// its base URL; the server is shut down, and must stop cleanly, when the test ends.
func serveHTTP(t *testing.T, e *testEnv) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve returned %v after shutdown", err)
			}
		case <-time.After(15 * time.Second):
			t.Error("Serve did not return within 15 s of shutdown")
		}
	})
	return "http://" + ln.Addr().String()
}

// The body limit is enforced by fasthttp before routing, which app.Test reports as an error, so
// this test goes over a real connection.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	base := serveHTTP(t, e)
	post := func(n int) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+"/sa-core/v1/prompt", bytes.NewReader(bytes.Repeat([]byte("a"), n)))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST %d bytes: %v", n, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := post(BodyLimit + 1)
	p := wantProblem(t, resp, body, http.StatusRequestEntityTooLarge)
	if !strings.Contains(p.Detail, "262144") {
		t.Errorf("413 detail %q does not say the limit", p.Detail)
	}
	resp, body = post(2 << 20)
	wantProblem(t, resp, body, http.StatusRequestEntityTooLarge)
	if resp, body := post(BodyLimit); resp.StatusCode == http.StatusRequestEntityTooLarge {
		t.Fatalf("a body of exactly 256 KiB is refused: %s", body)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	var readyErr error
	e := newTestEnv(t, Deps{Version: "v1.2.3", Ready: func(context.Context) error { return readyErr }})
	resp, body := e.do(t, get("/healthz"))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "v1.2.3") {
		t.Fatalf("healthz: %d %s", resp.StatusCode, body)
	}
	if resp, body := e.do(t, get("/readyz")); resp.StatusCode != http.StatusOK {
		t.Fatalf("readyz when ready: %d %s", resp.StatusCode, body)
	}
	readyErr = errors.New("dial tcp 10.0.0.7:5432: connection refused")
	clock := time.Now().Add(readyCacheFor) // the cached answer is stale now
	e.srv.ready.now = func() time.Time { return clock }
	resp, body = e.do(t, get("/readyz"))
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("readyz when not ready: %d %s", resp.StatusCode, body)
	}
	if strings.Contains(body, "10.0.0.7") {
		t.Fatalf("readyz leaks the internal error: %s", body)
	}
	// Liveness does not depend on the database.
	if resp, _ := e.do(t, get("/healthz")); resp.StatusCode != http.StatusOK {
		t.Fatalf("healthz while not ready: %d", resp.StatusCode)
	}
}

func TestRequestID(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	req := get("/healthz")
	req.Header.Set("X-Request-ID", "abc-123")
	if resp, _ := e.do(t, req); resp.Header.Get("X-Request-ID") != "abc-123" {
		t.Errorf("sane request id not kept: %q", resp.Header.Get("X-Request-ID"))
	}
	req = get("/healthz")
	req.Header.Set("X-Request-ID", `bad "id" with spaces`)
	resp, _ := e.do(t, req)
	if got := resp.Header.Get("X-Request-ID"); got == "" || strings.Contains(got, " ") {
		t.Errorf("unsafe request id answered as %q", got)
	}
	a, _ := e.do(t, get("/healthz"))
	b, _ := e.do(t, get("/healthz"))
	if a.Header.Get("X-Request-ID") == "" || a.Header.Get("X-Request-ID") == b.Header.Get("X-Request-ID") {
		t.Error("requests without an id do not get distinct ones")
	}
}

func TestMetricsUseRoutePatterns(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	e := newTestEnv(t, Deps{Registry: reg})
	e.do(t, get("/healthz"))
	e.do(t, get("/sa-core/v1/jobs/0d8e9c52-7d7e-4a55-9a63-3d5a8e5f3c11"))
	e.do(t, get("/sa-core/v1/no-such-thing/7f1c2d3e-0000-4000-8000-000000000001"))
	e.do(t, get("/admin/deferred-operations"))
	resp, body := e.do(t, get("/metrics"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("metrics: %d", resp.StatusCode)
	}
	for _, want := range []string{
		`asterion_http_requests_total{method="GET",route="/healthz",status="200"} 1`,
		`asterion_http_requests_total{method="GET",route="/admin/deferred-operations",status="303"} 1`,
		`asterion_http_requests_total{method="GET",route="/sa-core/v1/jobs/:id",status="401"} 1`,
		`asterion_http_requests_total{method="GET",route="unmatched",status="404"} 1`,
		`asterion_http_request_duration_seconds_bucket{method="GET",route="/healthz"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	if strings.Contains(body, "0d8e9c52") || strings.Contains(body, "7f1c2d3e") {
		t.Error("a raw path (with an id) became a label value")
	}
}

// Errors are problem documents with the four fields and nothing internal.
func TestProblemShape(t *testing.T) {
	t.Parallel()
	e := newTestEnv(t, Deps{})
	resp, body := e.do(t, get("/sa-core/v1/nothing"))
	var m map[string]any
	if err := json.NewDecoder(io.LimitReader(strings.NewReader(body), 1<<16)).Decode(&m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"type", "title", "status", "detail"} {
		if _, ok := m[k]; !ok {
			t.Errorf("problem lacks %q: %s", k, body)
		}
	}
	if m["status"] != float64(resp.StatusCode) {
		t.Errorf("problem status %v, response %d", m["status"], resp.StatusCode)
	}
}
