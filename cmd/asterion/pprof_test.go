package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestProfilerListensOnlyWhenAsked: ASTERION_PPROF_ADDR starts Go's profiler on its own
// listener, without cmdline (the command line may hold secrets); the app's own address never
// serves it.
func TestProfilerListensOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	s := startServer(t, map[string]string{"ASTERION_PPROF_ADDR": addr})
	get := func(url string) (int, string) {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp.StatusCode, string(body)
	}
	if code, body := get("http://" + addr + "/debug/pprof/heap?debug=1"); code != http.StatusOK || !strings.Contains(body, "heap profile") {
		t.Fatalf("profiler heap: %d %.200q", code, body)
	}
	if code, body := get("http://" + addr + "/debug/pprof/cmdline"); code != http.StatusNotFound {
		t.Errorf("profiler served cmdline: %d %.200q", code, body)
	}
	if code, _ := get(s.BaseURL + "/debug/pprof/heap"); code != http.StatusNotFound {
		t.Errorf("the app's address served the profiler: %d", code)
	}
}

// TestProfilerRefusesNonLoopback: a profiler address that is not loopback (or is every
// interface) is a configuration error; loopback forms are accepted.
func TestProfilerRefusesNonLoopback(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{":6060", "0.0.0.0:6060", "[::]:6060", "192.168.1.5:6060", "example.com:6060", "nonsense"} {
		if err := validatePprofAddr(bad); err == nil || !strings.Contains(err.Error(), "ASTERION_PPROF_ADDR") {
			t.Errorf("ASTERION_PPROF_ADDR=%s: %v, want an error naming it", bad, err)
		}
	}
	for _, ok := range []string{"", "127.0.0.1:6060", "[::1]:6060", "localhost:6060", "127.0.0.2:0"} {
		if err := validatePprofAddr(ok); err != nil {
			t.Errorf("ASTERION_PPROF_ADDR=%s refused: %v", ok, err)
		}
	}
	r := runBinary(t, map[string]string{"DATABASE_URL": "postgres://postgres@127.0.0.1:1/x", "ASTERION_PPROF_ADDR": "0.0.0.0:6060"}, "", "serve", "--addr", "127.0.0.1:0")
	if line := wantFailure(t, r, 1); !strings.Contains(line, "loopback") {
		t.Errorf("serve with a public profiler address: %q", line)
	}
}
