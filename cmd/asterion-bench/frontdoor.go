package main

// The frontdoor phase: what the OpenAI-compatible front door costs over the core API. The same
// prompt is asked, with the same number of clients, through POST /v1/chat/completions (the
// caller waits while the job runs) and through POST /sa-core/v1/prompt with Prefer: wait (the
// submit holds its answer until the job ends), on a server of its own with the sim provider at
// 0 latency, so that the figures are the server's path alone.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Sizes of the frontdoor phase, before the load scale.
const (
	benchFrontDoorRequests = 400
	benchFrontDoorClients  = 8
	benchFrontDoorWarmup   = 20
)

// frontDoorResult is the frontdoor phase's figures: the latency of a call that waits for its
// job's answer, through each door.
type frontDoorResult struct {
	Clients  int     `json:"clients"`
	Chat     latency `json:"chat_completions"`
	Prompt   latency `json:"prompt_prefer_wait"`
	ChatRPS  float64 `json:"chat_per_second"`
	PromptRS float64 `json:"prompt_per_second"`
}

// frontDoorCall is one kind of call of the phase: its path, extra header and body, and the
// status that means it waited for its job's answer.
type frontDoorCall struct {
	path, header, value string
	body                []byte
	status              int
}

func runFrontDoor(ctx context.Context, cfg config) (frontDoorResult, error) {
	r := frontDoorResult{Clients: benchFrontDoorClients}
	srv, err := startPhaseServer(ctx, cfg, "frontdoor", "ASTERION_SIM_LATENCY=0-0")
	if err != nil {
		return r, err
	}
	defer srv.close()
	n := cfg.scaled(benchFrontDoorRequests)
	chat := frontDoorCall{path: "/v1/chat/completions", status: http.StatusOK,
		body: []byte(`{"messages":[{"role":"user","content":"the bench prompt"}]}`)}
	prompt := frontDoorCall{path: "/sa-core/v1/prompt", header: "Prefer", value: "wait=10", status: http.StatusOK,
		body: []byte(`{"prompt":"the bench prompt"}`)}
	for _, call := range []frontDoorCall{chat, prompt} {
		if _, _, err := frontDoorRun(ctx, srv.api, call, benchFrontDoorWarmup); err != nil {
			return r, fmt.Errorf("warm up %s: %w", call.path, err)
		}
	}
	var el time.Duration
	if r.Chat, el, err = frontDoorRun(ctx, srv.api, chat, n); err != nil {
		return r, err
	}
	r.ChatRPS = float64(n) / el.Seconds()
	if r.Prompt, el, err = frontDoorRun(ctx, srv.api, prompt, n); err != nil {
		return r, err
	}
	r.PromptRS = float64(n) / el.Seconds()
	fmt.Fprintf(os.Stderr, "frontdoor: %d clients, %d calls each door: chat completions p50 %.1f ms p99 %.1f ms (%.0f/s); prompt with Prefer: wait p50 %.1f ms p99 %.1f ms (%.0f/s)\n",
		r.Clients, n, r.Chat.P50ms, r.Chat.P99ms, r.ChatRPS, r.Prompt.P50ms, r.Prompt.P99ms, r.PromptRS)
	return r, nil
}

// frontDoorRun makes n calls from benchFrontDoorClients clients, each waiting for its answer
// before the next, and returns their latencies and the time they took in all. A call that
// does not answer with call.status fails the run.
func frontDoorRun(ctx context.Context, api *apiClient, call frontDoorCall, n int) (latency, time.Duration, error) {
	var next atomic.Int64
	ds := make([]time.Duration, n)
	errs := make(chan error, benchFrontDoorClients)
	var wg sync.WaitGroup
	start := time.Now()
	for range benchFrontDoorClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
				d, err := frontDoorOnce(ctx, api, call)
				if err != nil {
					errs <- err
					return
				}
				ds[i] = d
			}
		}()
	}
	wg.Wait()
	el := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		return latency{}, el, err
	}
	return quantiles(ds), el, nil
}

func frontDoorOnce(ctx context.Context, api *apiClient, call frontDoorCall) (time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api.base+call.path, bytes.NewReader(call.body))
	if err != nil {
		return 0, fmt.Errorf("build %s request: %w", call.path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if call.header != "" {
		req.Header.Set(call.header, call.value)
	}
	api.authorize(req, false)
	t0 := time.Now()
	resp, err := api.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", call.path, err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	d := time.Since(t0)
	if resp.StatusCode != call.status {
		return 0, fmt.Errorf("POST %s: status %d, want %d: %.200s", call.path, resp.StatusCode, call.status, raw)
	}
	return d, nil
}

// frontDoorRows writes the frontdoor phase's report rows.
func frontDoorRows(f *frontDoorResult, only func(fig, av, target, how string)) {
	only("chat completion vs prompt with Prefer: wait, p50 / p99",
		fmt.Sprintf("%.1f / %.1f ms vs %.1f / %.1f ms", f.Chat.P50ms, f.Chat.P99ms, f.Prompt.P50ms, f.Prompt.P99ms), "—",
		fmt.Sprintf("an `asterion serve` of its own, sim at 0 latency; %d clients each waiting for its answer before the next call, %d calls of the same prompt through POST /v1/chat/completions (%.0f/s), then as many through POST /sa-core/v1/prompt with Prefer: wait=10 (%.0f/s), each answered 200 once its job ended",
			f.Clients, f.Chat.N, f.ChatRPS, f.PromptRS))
}
