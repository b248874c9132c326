package main

// Phase streams: many open mission streams (GET /sa-core/v1/mission/events), the
// delay from a job's state change to its job.state_changed event arriving at every stream,
// and the server's resident memory per open stream.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// streamsResult is what the streams phase measured.
type streamsResult struct {
	// Open is the round with Streams streams open, Big the round with StreamsBig open.
	Streams    int         `json:"streams"`
	Open       streamRound `json:"open"`
	StreamsBig int         `json:"streams_big"`
	Big        streamRound `json:"big"`

	// RSSBeforeKiB is the server's VmRSS before any stream was opened, RSSBigKiB with
	// StreamsBig streams open (after events went through them).
	RSSBeforeKiB int64   `json:"rss_before_kib"`
	RSSBigKiB    int64   `json:"rss_big_kib"`
	PerStreamKiB float64 `json:"per_stream_kib"`
}

// streamRound is one round: Prompts prompts submitted one every 100 ms by the user the open
// streams belong to, each changing state three times (queued, running, succeeded).
type streamRound struct {
	Prompts int `json:"prompts"`
	// Changes is how many distinct (job, state) changes of those prompts were seen.
	Changes int `json:"changes"`
	// Delivery is receive time minus the event's updated_at over every (stream, change) pair.
	Delivery latency `json:"delivery"`
	// First is, per change, the earliest arrival at any stream (the pipeline without the
	// fan-out); Spread is, per change, the last arrival minus the first.
	First  latency `json:"first"`
	Spread latency `json:"spread"`
	// Missed counts (stream, change) pairs a stream never received within 15 s.
	Missed int `json:"missed"`
	// ServerCPUms and BenchCPUms are the CPU time the server process and this load generator
	// used during the round (its submits included).
	ServerCPUms float64 `json:"server_cpu_ms"`
	BenchCPUms  float64 `json:"bench_cpu_ms"`
	Seconds     float64 `json:"seconds"`
}

// missionCollector records, per stream, the first arrival of every (job, state) change.
type missionCollector struct {
	streams []missionStream
	// succeeded counts arrivals of succeeded events, to know when a round is complete.
	succeeded atomic.Int64
}

type missionStream struct {
	mu  sync.Mutex
	got map[string]time.Duration
}

func newMissionCollector(n int) *missionCollector {
	c := &missionCollector{streams: make([]missionStream, n)}
	for i := range c.streams {
		c.streams[i].got = map[string]time.Duration{}
	}
	return c
}

// handle is the event handler of stream i.
func (c *missionCollector) handle(i int, ev sseEvent) {
	if ev.Name != "job.state_changed" {
		return
	}
	var p struct {
		JobID     string    `json:"job_id"`
		State     string    `json:"state"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	if err := json.Unmarshal([]byte(ev.Data), &p); err != nil || p.UpdatedAt.IsZero() {
		return
	}
	key := p.JobID + "|" + p.State
	s := &c.streams[i]
	s.mu.Lock()
	_, seen := s.got[key]
	if !seen {
		s.got[key] = ev.At.Sub(p.UpdatedAt)
	}
	s.mu.Unlock()
	if !seen && p.State == "succeeded" {
		c.succeeded.Add(1)
	}
}

func (c *missionCollector) reset() {
	for i := range c.streams {
		s := &c.streams[i]
		s.mu.Lock()
		s.got = map[string]time.Duration{}
		s.mu.Unlock()
	}
	c.succeeded.Store(0)
}

// round submits prompts one every 100 ms, waits until the first open streams have seen every
// one succeed (at most 15 s after the last submit), and measures delivery over every (stream,
// change) pair of those prompts.
func (c *missionCollector) round(ctx context.Context, api *apiClient, serverPID, open, prompts int) (streamRound, error) {
	r := streamRound{Prompts: prompts}
	c.reset()
	srv0, err := cpuTime(serverPID)
	if err != nil {
		return r, err
	}
	self0, err := cpuTime(os.Getpid())
	if err != nil {
		return r, err
	}
	start := time.Now()
	jobs := map[string]bool{}
	for k := 0; k < prompts; k++ {
		s, err := api.submit(ctx, fmt.Sprintf("stream bench prompt %d", k))
		if err != nil {
			return r, err
		}
		jobs[s.JobID] = true
		time.Sleep(100 * time.Millisecond)
	}
	want := int64(prompts * open)
	deadline := time.Now().Add(15 * time.Second)
	for c.succeeded.Load() < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	r.Seconds = time.Since(start).Seconds()
	srv1, err := cpuTime(serverPID)
	if err != nil {
		return r, err
	}
	self1, err := cpuTime(os.Getpid())
	if err != nil {
		return r, err
	}
	r.ServerCPUms, r.BenchCPUms = float64((srv1 - srv0).Milliseconds()), float64((self1 - self0).Milliseconds())
	time.Sleep(200 * time.Millisecond)
	// Every change any stream saw is one every stream should have seen.
	first, last := map[string]time.Duration{}, map[string]time.Duration{}
	var lat []time.Duration
	for i := 0; i < open; i++ {
		s := &c.streams[i]
		s.mu.Lock()
		for k, d := range s.got {
			if !jobs[k[:36]] {
				continue
			}
			lat = append(lat, d)
			if f, ok := first[k]; !ok || d < f {
				first[k] = d
			}
			if l, ok := last[k]; !ok || d > l {
				last[k] = d
			}
		}
		s.mu.Unlock()
	}
	var firsts, spreads []time.Duration
	for k, f := range first {
		firsts = append(firsts, f)
		spreads = append(spreads, last[k]-f)
	}
	r.Changes = len(first)
	r.Missed = r.Changes*open - len(lat)
	r.Delivery, r.First, r.Spread = quantiles(lat), quantiles(firsts), quantiles(spreads)
	return r, nil
}

// runStreams opens n mission streams, measures delivery, opens more up to big, measures
// delivery and the server's memory, and closes them all.
func runStreams(ctx context.Context, api *apiClient, serverPID, n, big, prompts int) (streamsResult, error) {
	r := streamsResult{Streams: n, StreamsBig: big}
	var err error
	if r.RSSBeforeKiB, err = vmRSSKiB(serverPID); err != nil {
		return r, err
	}
	coll := newMissionCollector(big)
	const path = "/sa-core/v1/mission/events"
	first, err := api.openStreams(ctx, n, path, coll.handle)
	if err != nil {
		return r, fmt.Errorf("open %d mission streams: %w", n, err)
	}
	defer closeStreams(first)
	fmt.Fprintf(os.Stderr, "streams: %d open\n", n)
	time.Sleep(500 * time.Millisecond)
	if r.Open, err = coll.round(ctx, api, serverPID, n, prompts); err != nil {
		return r, err
	}
	more, err := api.openStreams(ctx, big-n, path, func(i int, ev sseEvent) { coll.handle(n+i, ev) })
	if err != nil {
		return r, fmt.Errorf("open %d more mission streams: %w", big-n, err)
	}
	defer closeStreams(more)
	fmt.Fprintf(os.Stderr, "streams: %d open\n", big)
	time.Sleep(500 * time.Millisecond)
	if r.Big, err = coll.round(ctx, api, serverPID, big, prompts); err != nil {
		return r, err
	}
	time.Sleep(time.Second)
	if r.RSSBigKiB, err = vmRSSKiB(serverPID); err != nil {
		return r, err
	}
	r.PerStreamKiB = float64(r.RSSBigKiB-r.RSSBeforeKiB) / float64(big)
	return r, nil
}
