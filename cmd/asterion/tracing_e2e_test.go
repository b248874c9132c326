package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"asterion/db/dbtest"
)

// collector is an OTLP/HTTP trace receiver keeping the spans it is sent, by trace id.
type collector struct {
	*httptest.Server
	mu    sync.Mutex
	spans map[string]map[string]string // trace id -> span name -> parent span id
}

func newCollector(t *testing.T) *collector {
	t.Helper()
	c := &collector{spans: map[string]map[string]string{}}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var msg coltrace.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &msg) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range msg.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					id := hex.EncodeToString(s.TraceId)
					if c.spans[id] == nil {
						c.spans[id] = map[string]string{}
					}
					c.spans[id][s.Name] = hex.EncodeToString(s.ParentSpanId)
				}
			}
		}
		c.mu.Unlock()
		out, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(c.Close)
	return c
}

func (c *collector) trace(id string) map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, v := range c.spans[id] {
		out[k] = v
	}
	return out
}

// TestTraceServeExportsOTLP: `asterion serve` with OTEL_EXPORTER_OTLP_ENDPOINT exports the
// spans of a prompt, submitted with a traceparent, as one trace under the caller's span.
func TestTraceServeExportsOTLP(t *testing.T) {
	t.Parallel()
	col := newCollector(t)
	s := startServer(t, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": col.URL, "ASTERION_SIM_LATENCY": "10ms-20ms"})
	tok := strings.TrimSpace(okRun(t, map[string]string{"DATABASE_URL": s.DatabaseURL}, "", "token", "create", "--user", "admin"))
	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	req, err := http.NewRequest("POST", s.BaseURL+"/sa-core/v1/prompt", strings.NewReader(`{"prompt":"trace me"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+traceID+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	want := []string{"POST /sa-core/v1/prompt", "jobs.submit", "river.work/prompt.execute", "provider.complete"}
	// The batcher exports every 5 s.
	var got map[string]string
	dbtest.WaitForDetail(t, 30*time.Second, fmt.Sprintf("the collector to have spans %v of trace %s", want, traceID), func() (bool, string) {
		got = col.trace(traceID)
		for _, n := range want {
			if _, ok := got[n]; !ok {
				return false, fmt.Sprintf("has %v; logs:\n%s", got, s.Logs)
			}
		}
		return true, ""
	})
	if got[want[0]] != callerSpan {
		t.Errorf("HTTP span's parent %s, want the caller's %s", got[want[0]], callerSpan)
	}
}

// TestTraceBadEndpointRefused: a malformed OTLP endpoint stops serve before it starts.
func TestTraceBadEndpointRefused(t *testing.T) {
	t.Parallel()
	r := runBinary(t, map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:1/x", "OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318"},
		"", "serve", "--addr", "127.0.0.1:0")
	if line := wantFailure(t, r, 1); !strings.Contains(line, "OTEL_EXPORTER_OTLP_ENDPOINT") {
		t.Errorf("%q does not name the bad setting", line)
	}
}
