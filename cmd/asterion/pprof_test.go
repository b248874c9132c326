package main

import (
	"io"
	"net/http"
	"testing"
)

// TestProfilerListensOnlyWhenAsked: ASTERION_PPROF_ADDR starts Go's profiler on its own
// listener; the app's own address never serves it.
func TestProfilerListensOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	addr := freeAddr(t)
	s := startServer(t, map[string]string{"ASTERION_PPROF_ADDR": addr})
	resp, err := http.Get("http://" + addr + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatalf("profiler: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || len(body) == 0 {
		t.Fatalf("profiler answered %d %q", resp.StatusCode, body)
	}
	resp, err = http.Get(s.BaseURL + "/debug/pprof/cmdline")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("the app's address served the profiler: %d", resp.StatusCode)
	}
}
