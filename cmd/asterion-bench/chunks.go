package main

// Phase chunks: live output fanned out to many streams. A server of its own (60 workers,
// so every prompt runs at once) holds benchChunkStreams mission streams of its admin open
// while benchChunkPrompts prompts of that admin write their answers word by word at once; every
// job.output event on every stream is timed from the chunk's `at` (the start of the
// transaction that stored it) to its arrival.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The chunks phase's load: each prompt answers benchChunkTokens words over benchChunkLatency
// (a word every 50 ms), which the output writer stores as a chunk every 250 ms or so.
const (
	benchChunkPrompts = 50
	benchChunkStreams = 500
	benchChunkTokens  = 200
	benchChunkLatency = 10 * time.Second
)

// chunksResult is what the chunks phase measured.
type chunksResult struct {
	Prompts int `json:"prompts"`
	Streams int `json:"streams"`
	Tokens  int `json:"tokens"`
	// LatencySeconds is each answer's duration (#sim:latency).
	LatencySeconds float64 `json:"latency_seconds"`
	// Chunks is the distinct chunks the prompts stored (sa_job_output), Pairs the (stream,
	// chunk) arrivals, Missed how many of Chunks × Streams never arrived.
	Chunks int64 `json:"chunks"`
	Pairs  int64 `json:"pairs"`
	Missed int64 `json:"missed"`
	// Resyncs is how often the server said it skipped output of a stream that fell behind,
	// on ResyncStreams streams.
	Resyncs       int `json:"resyncs"`
	ResyncStreams int `json:"resync_streams"`
	// Delivery is arrival − the chunk's `at` over every pair.
	Delivery latency `json:"delivery"`
	Seconds  float64 `json:"seconds"`
	// ServerCPUms is the CPU time of the server process from the first submit until the last
	// arrival (the runs themselves included); per pair and per chunk below.
	ServerCPUms     float64 `json:"server_cpu_ms"`
	CPUPerPairUs    float64 `json:"cpu_per_pair_us"`
	CPUPerChunkUs   float64 `json:"cpu_per_chunk_us"`
	Succeeded       int     `json:"succeeded"`
	BenchCPUms      float64 `json:"bench_cpu_ms"`
	OutputPerSecond float64 `json:"output_events_per_s"`
}

// chunkStream is what one stream received; only the stream's own reader goroutine writes it
// until the streams are closed.
type chunkStream struct {
	last map[string]int
	// lat is the delay of every chunk received, in microseconds.
	lat []int32
	// dup counts chunks received twice or out of order, bad events that did not parse (none
	// expected); resyncs the server's notes that it skipped output of a stream that fell behind.
	dup, bad, resyncs int
}

// parseOutputEvent reads job_id, seq and at from a job.output event's data without decoding
// the whole document: half a million streams' worth of events a second must not make the load
// generator the bottleneck. The text field cannot hide a match: its quotes are escaped.
func parseOutputEvent(data string) (job string, seq int, at time.Time, ok bool) {
	field := func(name string) (string, bool) {
		i := strings.Index(data, `"`+name+`":`)
		if i < 0 {
			return "", false
		}
		rest := data[i+len(name)+3:]
		if strings.HasPrefix(rest, `"`) {
			end := strings.IndexByte(rest[1:], '"')
			if end < 0 {
				return "", false
			}
			return rest[1 : 1+end], true
		}
		end := strings.IndexAny(rest, ",}")
		if end < 0 {
			return "", false
		}
		return rest[:end], true
	}
	job, ok1 := field("job_id")
	seqText, ok2 := field("seq")
	atText, ok3 := field("at")
	if !ok1 || !ok2 || !ok3 {
		return "", 0, time.Time{}, false
	}
	seq, err := strconv.Atoi(seqText)
	if err != nil {
		return "", 0, time.Time{}, false
	}
	at, err = time.Parse(time.RFC3339Nano, atText)
	if err != nil {
		return "", 0, time.Time{}, false
	}
	return job, seq, at, true
}

func runChunks(ctx context.Context, cfg config) (chunksResult, error) {
	r := chunksResult{Prompts: cfg.scaled(benchChunkPrompts), Streams: cfg.scaled(benchChunkStreams), Tokens: benchChunkTokens,
		LatencySeconds: benchChunkLatency.Seconds()}
	srv, err := startPhaseServer(ctx, cfg, "chunks", "ASTERION_WORKERS=60")
	if err != nil {
		return r, err
	}
	defer srv.close()
	streams := make([]chunkStream, r.Streams)
	for i := range streams {
		streams[i].last = map[string]int{}
		streams[i].lat = make([]int32, 0, 2500)
	}
	var got atomic.Int64
	handle := func(i int, ev sseEvent) {
		s := &streams[i]
		if ev.Name == "comment" && strings.HasPrefix(ev.Data, "output fell behind") {
			s.resyncs++
			return
		}
		if ev.Name != "job.output" {
			return
		}
		job, seq, at, ok := parseOutputEvent(ev.Data)
		if !ok {
			s.bad++
			return
		}
		if seq <= s.last[job] {
			s.dup++
			return
		}
		s.last[job] = seq
		s.lat = append(s.lat, int32(min(ev.At.Sub(at).Microseconds(), 1<<31-1)))
		got.Add(1)
	}
	open, err := srv.api.openStreams(ctx, r.Streams, "/sa-core/v1/mission/events", handle)
	if err != nil {
		return r, fmt.Errorf("open %d mission streams: %w", r.Streams, err)
	}
	defer closeStreams(open)
	time.Sleep(500 * time.Millisecond)
	texts := make([]string, r.Prompts)
	for i := range texts {
		texts[i] = fmt.Sprintf("chunk bench prompt %d #sim:tokens=%d #sim:latency=%s", i, benchChunkTokens, benchChunkLatency)
	}
	srv0, err := cpuTime(srv.pid())
	if err != nil {
		return r, err
	}
	self0, err := cpuTime(os.Getpid())
	if err != nil {
		return r, err
	}
	start := time.Now()
	ids, err := srv.submitMany(ctx, texts)
	if err != nil {
		return r, err
	}
	if r.Succeeded, err = srv.waitJobs(ctx, ids, len(ids), benchChunkLatency+60*time.Second, "succeeded", "failed", "cancelled"); err != nil {
		return r, err
	}
	if err := srv.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM sa_job_output WHERE job_id = ANY($1::uuid[]))
		+ (SELECT count(*) FROM sa_job_output_archive WHERE job_id = ANY($1::uuid[]))`, ids).Scan(&r.Chunks); err != nil {
		return r, fmt.Errorf("count the stored chunks: %w", err)
	}
	want := r.Chunks * int64(r.Streams)
	deadline := time.Now().Add(15 * time.Second)
	for got.Load() < want && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	r.Seconds = time.Since(start).Seconds()
	srv1, err := cpuTime(srv.pid())
	if err != nil {
		return r, err
	}
	self1, err := cpuTime(os.Getpid())
	if err != nil {
		return r, err
	}
	closeStreams(open)
	if r.Succeeded, err = srv.countJobs(ctx, ids, "succeeded"); err != nil {
		return r, err
	}
	var lat []time.Duration
	dups, bad := 0, 0
	for i := range streams {
		bad += streams[i].bad
		r.Resyncs += streams[i].resyncs
		if streams[i].resyncs > 0 {
			r.ResyncStreams++
		}
		for _, us := range streams[i].lat {
			lat = append(lat, time.Duration(us)*time.Microsecond)
		}
		dups += streams[i].dup
	}
	if dups > 0 || bad > 0 {
		fmt.Fprintf(os.Stderr, "chunks: %d chunks arrived twice or out of order, %d events did not parse\n", dups, bad)
	}
	r.Pairs = int64(len(lat))
	r.Missed = want - r.Pairs
	r.Delivery = quantiles(lat)
	r.ServerCPUms, r.BenchCPUms = float64((srv1-srv0).Microseconds())/1000, float64((self1-self0).Microseconds())/1000
	if r.Pairs > 0 {
		r.CPUPerPairUs = r.ServerCPUms * 1000 / float64(r.Pairs)
	}
	if r.Chunks > 0 {
		r.CPUPerChunkUs = r.ServerCPUms * 1000 / float64(r.Chunks)
	}
	r.OutputPerSecond = float64(r.Pairs) / r.Seconds
	fmt.Fprintf(os.Stderr, "chunks: %d prompts, %d chunks, %d streams: %d pairs, %d missed (%d resyncs on %d streams); p50 %.1f ms p99 %.1f ms; server CPU %.1f s (%.1f µs/pair, %.0f µs/chunk)\n",
		r.Prompts, r.Chunks, r.Streams, r.Pairs, r.Missed, r.Resyncs, r.ResyncStreams, r.Delivery.P50ms, r.Delivery.P99ms, r.ServerCPUms/1000, r.CPUPerPairUs, r.CPUPerChunkUs)
	return r, nil
}

// chunksRows writes the chunks phase's report rows.
func chunksRows(c *chunksResult, only func(fig, av, target, how string)) {
	how := fmt.Sprintf("an `asterion serve` of its own (60 workers); %d `/sa-core/v1/mission/events` streams of its admin (API token) open while %d prompts of that admin run at once, each `#sim:tokens=%d #sim:latency=%.0fs` (a word every %.0f ms, stored as a chunk about every 250 ms); every job.output event on every stream: receive time − the chunk's `at` (the start of the transaction that stored it; server and load generator share one clock); %d chunks stored, %d (stream, chunk) pairs received in %.1f s (%.0f/s), p50 %.1f ms, %d of %d jobs succeeded",
		c.Streams, c.Prompts, c.Tokens, c.LatencySeconds, c.LatencySeconds*1000/float64(c.Tokens), c.Chunks, c.Pairs, c.Seconds, c.OutputPerSecond,
		c.Delivery.P50ms, c.Succeeded, c.Prompts)
	only(fmt.Sprintf("chunk delivery p99, %d prompts streaming, %d mission streams", c.Prompts, c.Streams), fmt.Sprintf("%.1f ms", c.Delivery.P99ms), "≤ 100 ms", how)
	only("chunks missed", fmt.Sprint(c.Missed), "0",
		fmt.Sprintf("stored chunks × streams (%d × %d) − pairs received within 15 s of the last job finishing; the server said it skipped output of a stream that fell behind %d times, on %d streams",
			c.Chunks, c.Streams, c.Resyncs, c.ResyncStreams))
	only("server CPU per delivered chunk", fmt.Sprintf("%.1f µs", c.CPUPerPairUs), "",
		fmt.Sprintf("utime + stime of the `asterion serve` process (/proc/<pid>/stat) from the first submit to the last arrival (%.1f s, the runs themselves included) ÷ %d pairs; ÷ %d distinct chunks: %.0f µs; load generator %.1f s",
			c.ServerCPUms/1000, c.Pairs, c.Chunks, c.CPUPerChunkUs, c.BenchCPUms/1000))
}
