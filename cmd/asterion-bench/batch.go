package main

// The batch phase: one large batch of the front door from file to end. A server of its own
// (sim at 0 latency, so the figures are the server's path alone) gets a JSONL file of chat
// completion requests through POST /v1/files, streamed from a generator as the form is sent,
// then POST /v1/batches, and is polled until the batch completes. Meanwhile the server
// process's resident memory is sampled (a batch is expanded, answered and written out in
// chunks, so it should not grow with the file), and a second, small org submits a prompt now
// and then through the core API, timed from its job's creation to its start: a batch's backlog
// must not keep another org waiting.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The batch phase's settings.
const (
	// benchBatchProbeEvery is how often the small org submits while the batch runs.
	benchBatchProbeEvery = 500 * time.Millisecond
	// benchBatchProbeWait is how long one probe's job may take to start before the phase
	// gives up on it (and counts the wait so far).
	benchBatchProbeWait = 30 * time.Second
	// benchBatchPollEvery is how often the batch is read while it runs.
	benchBatchPollEvery = 250 * time.Millisecond
	benchBatchOrg       = "bench-batch-small"
	benchBatchOperator  = "bench-batch-small-op"
	benchBatchBoundary  = "asterion-bench-batch-form-boundary"
)

// batchResult is what the batch phase measured.
type batchResult struct {
	Lines     int   `json:"lines"`
	FileBytes int64 `json:"file_bytes"`
	// UploadSeconds is POST /v1/files from the first byte sent to its answer; ExpandedSeconds,
	// from the same start until every line of the batch had been read into a job (or an error
	// line); CompletedSeconds, until GET /v1/batches/{id} said completed.
	UploadSeconds    float64 `json:"upload_seconds"`
	ExpandedSeconds  float64 `json:"expanded_seconds"`
	CompletedSeconds float64 `json:"completed_seconds"`
	Status           string  `json:"status"`
	Total            int     `json:"total"`
	Completed        int     `json:"completed"`
	Failed           int     `json:"failed"`
	// RSSBeforeKiB is the server's VmRSS just before the upload, RSSPeakKiB the highest
	// sampled (every 100 ms) until the batch completed, RSSEndKiB the last.
	RSSBeforeKiB int64   `json:"rss_before_kib"`
	RSSPeakKiB   int64   `json:"rss_peak_kib"`
	RSSEndKiB    int64   `json:"rss_end_kib"`
	GrowthMiB    float64 `json:"rss_growth_mib"`
	// Probes is the small org's prompts submitted while the batch's jobs were queued, Started
	// how many of them started within benchBatchProbeWait; Wait is started_at − created_at of
	// their job documents (a job not started counts benchBatchProbeWait). MaxQueued is the
	// most jobs queued on the server when a probe was submitted.
	Probes    int     `json:"probes"`
	Started   int     `json:"probes_started"`
	Wait      latency `json:"probe_wait"`
	MaxQueued int64   `json:"max_queued_at_probe"`
}

// batchLine is request i of the bench's batch file, without its newline.
func batchLine(i int) string {
	b, _ := json.Marshal(map[string]any{"custom_id": "bench-" + strconv.Itoa(i), "method": "POST", "url": "/v1/chat/completions",
		"body": map[string]any{"messages": []map[string]string{{"role": "user", "content": "batch bench prompt " + strconv.Itoa(i)}}}})
	return string(b)
}

// writeBatchForm writes the multipart form of POST /v1/files with the given boundary: the
// purpose `batch` and a file of n request lines, each made as it is written, so that no
// more than a buffer of the file is ever in memory.
func writeBatchForm(w io.Writer, boundary string, n int) error {
	mw := multipart.NewWriter(w)
	if err := mw.SetBoundary(boundary); err != nil {
		return fmt.Errorf("set the form boundary: %w", err)
	}
	if err := mw.WriteField("purpose", "batch"); err != nil {
		return fmt.Errorf("write the purpose: %w", err)
	}
	part, err := mw.CreateFormFile("file", "bench-batch.jsonl")
	if err != nil {
		return fmt.Errorf("start the file part: %w", err)
	}
	bw := bufio.NewWriterSize(part, 64<<10)
	for i := range n {
		if _, err := bw.WriteString(batchLine(i) + "\n"); err != nil {
			return fmt.Errorf("write line %d: %w", i, err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write the file: %w", err)
	}
	if err := mw.Close(); err != nil {
		return fmt.Errorf("close the form: %w", err)
	}
	return nil
}

// byteCounter is a writer that only counts.
type byteCounter int64

func (c *byteCounter) Write(p []byte) (int, error) {
	*c += byteCounter(len(p))
	return len(p), nil
}

// batchFormSize is the length of the form writeBatchForm writes: the generator is run once
// to count, so the upload can say its Content-Length up front.
func batchFormSize(boundary string, n int) (int64, error) {
	var c byteCounter
	err := writeBatchForm(&c, boundary, n)
	return int64(c), err
}

// openAIObject is the part of a file or batch object the phase reads.
type openAIObject struct {
	ID            string `json:"id"`
	Bytes         int64  `json:"bytes"`
	Status        string `json:"status"`
	RequestCounts struct {
		Total     int `json:"total"`
		Completed int `json:"completed"`
		Failed    int `json:"failed"`
	} `json:"request_counts"`
}

// batchCall sends req with the client's token and decodes a 200 answer into an object.
func batchCall(api *apiClient, hc *http.Client, req *http.Request) (openAIObject, error) {
	var out openAIObject
	api.authorize(req, false)
	resp, err := hc.Do(req)
	if err != nil {
		return out, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return out, fmt.Errorf("%s %s: status %d: %.300s", req.Method, req.URL.Path, resp.StatusCode, raw)
	}
	if err := json.Unmarshal(raw, &out); err != nil {
		return out, fmt.Errorf("decode the answer of %s %s: %w", req.Method, req.URL.Path, err)
	}
	return out, nil
}

// uploadBatchFile sends the form of n lines to POST /v1/files through a pipe from the
// generator and returns the file object.
func uploadBatchFile(ctx context.Context, api *apiClient, n int) (openAIObject, error) {
	size, err := batchFormSize(benchBatchBoundary, n)
	if err != nil {
		return openAIObject{}, err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeBatchForm(pw, benchBatchBoundary, n)) }()
	defer pr.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, api.base+"/v1/files", pr)
	if err != nil {
		return openAIObject{}, fmt.Errorf("build the upload request: %w", err)
	}
	req.ContentLength = size
	req.Header.Set("Content-Type", "multipart/form-data; boundary="+benchBatchBoundary)
	// The largest file is written to the database in one transaction: more than the
	// client's usual minute on a loaded machine.
	hc := &http.Client{Transport: api.http.Transport, Timeout: 10 * time.Minute}
	return batchCall(api, hc, req)
}

// batchJSON posts body to path as JSON, or gets path when body is empty.
func batchJSON(ctx context.Context, api *apiClient, path, body string) (openAIObject, error) {
	method, rd := http.MethodGet, io.Reader(nil)
	if body != "" {
		method, rd = http.MethodPost, strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, api.base+path, rd)
	if err != nil {
		return openAIObject{}, fmt.Errorf("build %s %s: %w", method, path, err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return batchCall(api, api.http, req)
}

func runBatch(ctx context.Context, cfg config) (batchResult, error) {
	r := batchResult{Lines: cfg.batchLines}
	srv, err := startPhaseServer(ctx, cfg, "batch", "ASTERION_SIM_LATENCY=0-0")
	if err != nil {
		return r, err
	}
	defer srv.close()
	tok, err := ensureOperator(cfg.bin, srv.dbURL, benchBatchOrg, benchBatchOperator)
	if err != nil {
		return r, err
	}
	small := srv.api.withToken(tok)
	// One prompt of the small org before anything is measured: the server's pools and plans
	// are warm, and the probe's path is known to work.
	if _, err := probeStart(ctx, small); err != nil {
		return r, fmt.Errorf("warm-up prompt of the small org: %w", err)
	}
	if r.RSSBeforeKiB, err = vmRSSKiB(srv.pid()); err != nil {
		return r, err
	}
	rss := sampleRSS(srv.pid())
	defer func() {
		if rss != nil {
			rss.end()
		}
	}()
	start := time.Now()
	file, err := uploadBatchFile(ctx, srv.api, r.Lines)
	if err != nil {
		return r, err
	}
	r.UploadSeconds, r.FileBytes = time.Since(start).Seconds(), file.Bytes
	bt, err := batchJSON(ctx, srv.api, "/v1/batches",
		fmt.Sprintf(`{"input_file_id":%q,"endpoint":"/v1/chat/completions","completion_window":"24h"}`, file.ID))
	if err != nil {
		return r, err
	}
	probes := &batchProbes{api: small, srv: srv}
	defer probes.stop()
	deadline := start.Add(5*time.Minute + time.Duration(r.Lines)*20*time.Millisecond)
	for bt.Status != "completed" {
		if terminalBatch(bt.Status) {
			return r, fmt.Errorf("batch %s ended %s: %+v", bt.ID, bt.Status, bt.RequestCounts)
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("batch %s still %s after %s: %+v", bt.ID, bt.Status, time.Since(start).Round(time.Second), bt.RequestCounts)
		}
		if err := r.watchExpansion(ctx, srv, bt.ID, start, probes); err != nil {
			return r, err
		}
		time.Sleep(benchBatchPollEvery)
		if bt, err = batchJSON(ctx, srv.api, "/v1/batches/"+bt.ID, ""); err != nil {
			return r, err
		}
	}
	r.CompletedSeconds = time.Since(start).Seconds()
	r.RSSPeakKiB, rss = rss.end(), nil
	if r.RSSEndKiB, err = vmRSSKiB(srv.pid()); err != nil {
		return r, err
	}
	r.GrowthMiB = float64(max(r.RSSPeakKiB-r.RSSBeforeKiB, 0)) / 1024
	r.Status, r.Total, r.Completed, r.Failed = bt.Status, bt.RequestCounts.Total, bt.RequestCounts.Completed, bt.RequestCounts.Failed
	if err := probes.stop(); err != nil {
		return r, err
	}
	r.Probes, r.Started, r.Wait, r.MaxQueued = probes.summary()
	fmt.Fprintf(os.Stderr, "batch: %d lines (%.1f MB) uploaded in %.1f s, expanded after %.1f s, completed after %.1f s (%d/%d/%d total/completed/failed); server RSS %.0f → peak %.0f MiB (+%.0f MiB); small org's %d prompts: start p50 %.1f ms max %.1f ms (%d started, up to %d jobs queued)\n",
		r.Lines, float64(r.FileBytes)/1e6, r.UploadSeconds, r.ExpandedSeconds, r.CompletedSeconds, r.Total, r.Completed, r.Failed,
		float64(r.RSSBeforeKiB)/1024, float64(r.RSSPeakKiB)/1024, r.GrowthMiB, r.Probes, r.Wait.P50ms, r.Wait.MaxMs, r.Started, r.MaxQueued)
	return r, nil
}

// watchExpansion reads how far the batch's expansion got: once its first jobs are queued the
// small org starts probing, and once every line is read the time is noted.
func (r *batchResult) watchExpansion(ctx context.Context, srv *phaseServer, id string, start time.Time, probes *batchProbes) error {
	if r.ExpandedSeconds > 0 {
		return nil
	}
	var expanded, total int
	if err := srv.pool.QueryRow(ctx, `SELECT expanded_lines, total_lines FROM sa_batch WHERE id = $1`, id).Scan(&expanded, &total); err != nil {
		return fmt.Errorf("read the expansion of batch %s: %w", id, err)
	}
	if expanded > 0 {
		probes.begin(ctx)
	}
	if total > 0 && expanded >= total {
		r.ExpandedSeconds = time.Since(start).Seconds()
	}
	return nil
}

// terminalBatch reports whether a batch in status s has ended.
func terminalBatch(s string) bool {
	switch s {
	case "completed", "failed", "expired", "cancelled":
		return true
	}
	return false
}

// batchProbes submits a prompt of the small org every benchBatchProbeEvery, from begin to
// stop, each timed until its job starts.
type batchProbes struct {
	api  *apiClient
	srv  *phaseServer
	once sync.Once
	quit chan struct{}
	done chan struct{}
	err  error
	// Written by the probing goroutine, read after done is closed.
	waits     []time.Duration
	started   int
	maxQueued int64
}

// begin starts probing (once).
func (p *batchProbes) begin(ctx context.Context) {
	p.once.Do(func() {
		p.quit, p.done = make(chan struct{}), make(chan struct{})
		go p.run(ctx)
	})
}

func (p *batchProbes) run(ctx context.Context) {
	defer close(p.done)
	tick := time.NewTicker(benchBatchProbeEvery)
	defer tick.Stop()
	for {
		queued, _, err := jobCounts(ctx, p.srv.pool)
		if err != nil {
			p.err = err
			return
		}
		p.maxQueued = max(p.maxQueued, queued)
		w, err := probeStart(ctx, p.api)
		if err != nil {
			p.err = err
			return
		}
		if w < benchBatchProbeWait {
			p.started++
		}
		p.waits = append(p.waits, w)
		select {
		case <-p.quit:
			return
		case <-tick.C:
		}
	}
}

// stop ends probing and returns the first error a probe met; a second call does nothing.
func (p *batchProbes) stop() error {
	p.once.Do(func() {}) // a phase that never began probing has nothing to stop
	if p.quit == nil {
		return nil
	}
	select {
	case <-p.quit:
	default:
		close(p.quit)
	}
	<-p.done
	return p.err
}

// summary is the probes' figures; call after stop.
func (p *batchProbes) summary() (probes, started int, wait latency, maxQueued int64) {
	ds := append([]time.Duration(nil), p.waits...)
	return len(ds), p.started, quantiles(ds), p.maxQueued
}

// probeJob is the part of the job document a probe reads.
type probeJob struct {
	State     string  `json:"state"`
	CreatedAt string  `json:"created_at"`
	StartedAt *string `json:"started_at"`
}

// probeStart submits one prompt and polls its job document until it has started; it returns
// started_at − created_at, or benchBatchProbeWait if the job has not started by then.
func probeStart(ctx context.Context, api *apiClient) (time.Duration, error) {
	sub, err := api.submit(ctx, "batch bench prompt of the small org")
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(benchBatchProbeWait)
	for time.Now().Before(deadline) {
		raw, err := api.fetch(ctx, "/sa-core/v1/jobs/"+sub.JobID)
		if err != nil {
			return 0, err
		}
		var j probeJob
		if err := json.Unmarshal([]byte(raw), &j); err != nil {
			return 0, fmt.Errorf("decode job %s: %w", sub.JobID, err)
		}
		if j.StartedAt != nil {
			created, err1 := time.Parse(time.RFC3339Nano, j.CreatedAt)
			started, err2 := time.Parse(time.RFC3339Nano, *j.StartedAt)
			if err1 != nil || err2 != nil {
				return 0, fmt.Errorf("job %s: times %q and %q are not RFC 3339", sub.JobID, j.CreatedAt, *j.StartedAt)
			}
			return started.Sub(created), nil
		}
		if terminalJob(j.State) {
			return 0, fmt.Errorf("job %s ended %s without starting", sub.JobID, j.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return benchBatchProbeWait, nil
}

// terminalJob reports whether a job in state s has ended.
func terminalJob(s string) bool { return s == "succeeded" || s == "failed" || s == "cancelled" }

// batchRows writes the batch phase's report rows.
func batchRows(b *batchResult, only func(fig, av, target, how string)) {
	n := sizeLabel(b.Lines)
	only(fmt.Sprintf("batch of %s chat completions: upload / upload start → completed", n),
		fmt.Sprintf("%.1f s / %.1f s", b.UploadSeconds, b.CompletedSeconds), "—",
		fmt.Sprintf("an `asterion serve` of its own, sim at 0 latency, 10 workers; a JSONL file of %d `/v1/chat/completions` lines (%.1f MB, one short user message each) streamed from a generator through POST /v1/files (multipart), then POST /v1/batches, then GET /v1/batches/{id} every %.0f ms until `completed`; every line read into a job %.1f s after the upload began; request_counts total %d, completed %d, failed %d",
			b.Lines, float64(b.FileBytes)/1e6, float64(benchBatchPollEvery.Milliseconds()), b.ExpandedSeconds, b.Total, b.Completed, b.Failed))
	only(fmt.Sprintf("server RSS growth during a %s batch", n), fmt.Sprintf("%.0f MiB", b.GrowthMiB), "< 200 MiB",
		fmt.Sprintf("VmRSS of the `asterion serve` process (/proc/<pid>/status) sampled every 100 ms from just before the upload until the batch completed: %.0f MiB before, %.0f MiB at the peak, %.0f MiB at the end",
			float64(b.RSSBeforeKiB)/1024, float64(b.RSSPeakKiB)/1024, float64(b.RSSEndKiB)/1024))
	wait := fmt.Sprintf("%.1f ms", b.Wait.MaxMs)
	switch {
	case b.Probes == 0:
		wait = "n/a (no probe)"
	case b.Started < b.Probes:
		wait = fmt.Sprintf("≥ %.0f s", benchBatchProbeWait.Seconds())
	}
	only(fmt.Sprintf("small org's submit → start during a %s batch, max", n), wait, "< 2 s",
		fmt.Sprintf("a second org's operator submits one prompt through POST /sa-core/v1/prompt every %.0f ms (after the previous one started) from the batch's first queued job until it completed; `started_at − created_at` of the job document: %d prompts, %d started within %.0f s, p50 %.1f ms, p99 %.1f ms; up to %d jobs queued when one was submitted",
			float64(benchBatchProbeEvery.Milliseconds()), b.Probes, b.Started, benchBatchProbeWait.Seconds(), b.Wait.P50ms, b.Wait.P99ms, b.MaxQueued))
}
