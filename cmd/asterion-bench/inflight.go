package main

// Phase inflight: thousands of long provider calls at once in one server. A server of its own
// with 2,000 workers and a 5 s heartbeat runs 2,000 prompts that each answer for a minute, word
// by word; once all run, the database's counters over three heartbeat intervals say how many
// transactions the server needs per interval, then an open loop of submits beside them times
// the API; after they finished, 200 prompts answering at the same pace give the same count with
// a tenth as many running. The server's resident set is sampled throughout.

import (
	"context"
	"fmt"
	"os"
	"time"
)

// The inflight phase's sizes.
const (
	benchInflightWorkers   = 2000
	benchInflightFew       = 200
	benchInflightHeartbeat = 5 * time.Second
	benchInflightLatency   = 60 * time.Second
	benchInflightTokens    = 120
	benchInflightRate      = 100
	benchInflightOpenFor   = 30 * time.Second
	// benchInflightIntervals is the heartbeat intervals each counting window spans.
	benchInflightIntervals = 3
)

// inflightResult is what the inflight phase measured.
type inflightResult struct {
	Workers          int     `json:"workers"`
	HeartbeatSeconds float64 `json:"heartbeat_seconds"`
	Prompts          int     `json:"prompts"`
	// Few and Many are the counting windows with Few and Prompts jobs running.
	Few       int            `json:"few"`
	FewWindow inflightWindow `json:"few_window"`
	Window    inflightWindow `json:"window"`
	Submit    result         `json:"submit"`
	Succeeded int            `json:"succeeded"`
	// RSSPeakKiB is the highest VmRSS sampled every 100 ms from the first submit to the last
	// job's end; RSSStartKiB before the first submit.
	RSSStartKiB int64 `json:"rss_start_kib"`
	RSSPeakKiB  int64 `json:"rss_peak_kib"`
	// ConnsPeak is the most sessions seen open on the database (sampled at each window).
	ConnsPeak int64 `json:"conns_peak"`
	// MaxConnections and PreloadLibraries are the PostgreSQL settings the figures were
	// measured under (max_connections, shared_preload_libraries).
	MaxConnections   int     `json:"max_connections"`
	PreloadLibraries string  `json:"shared_preload_libraries"`
	Seconds          float64 `json:"seconds"`
}

// inflightWindow is one counting window, per heartbeat interval.
type inflightWindow struct {
	Running          int     `json:"running"`
	Intervals        int     `json:"intervals"`
	XactsPerInterval float64 `json:"xacts_per_interval"`
	JobUpdatesPerInt float64 `json:"job_updates_per_interval"`
	OutputRowsPerInt float64 `json:"output_rows_per_interval"`
	Conns            int64   `json:"conns"`
}

func runInflight(ctx context.Context, cfg config) (inflightResult, error) {
	r := inflightResult{Workers: cfg.scaled(benchInflightWorkers), HeartbeatSeconds: benchInflightHeartbeat.Seconds(),
		Prompts: cfg.scaled(benchInflightWorkers), Few: cfg.scaled(benchInflightFew)}
	srv, err := startPhaseServer(ctx, cfg, "inflight", fmt.Sprintf("ASTERION_WORKERS=%d", r.Workers),
		"ASTERION_HEARTBEAT_INTERVAL="+benchInflightHeartbeat.String())
	if err != nil {
		return r, err
	}
	defer srv.close()
	closedLoop(srv.submit, 10, 2*time.Second) // warm-up, as the load phases do
	if err := srv.idle(ctx, 30*time.Second); err != nil {
		return r, err
	}
	if err := srv.admin.QueryRow(ctx, `SELECT current_setting('max_connections')::int, current_setting('shared_preload_libraries')`).
		Scan(&r.MaxConnections, &r.PreloadLibraries); err != nil {
		return r, fmt.Errorf("read the PostgreSQL settings: %w", err)
	}
	if r.RSSStartKiB, err = vmRSSKiB(srv.pid()); err != nil {
		return r, err
	}
	rss := sampleRSS(srv.pid())
	start := time.Now()
	texts := make([]string, r.Prompts)
	for i := range texts {
		texts[i] = fmt.Sprintf("inflight bench prompt %d #sim:latency=%s #sim:tokens=%d", i, benchInflightLatency, benchInflightTokens)
	}
	ids, err := srv.submitMany(ctx, texts)
	if err != nil {
		rss.end()
		return r, err
	}
	if r.Window, err = inflightCount(ctx, srv, ids); err != nil {
		rss.end()
		return r, err
	}
	r.ConnsPeak = r.Window.Conns
	r.Submit = openLoop(srv.submit, benchInflightRate, benchInflightOpenFor)
	if c, err := srv.counters(ctx); err == nil {
		r.ConnsPeak = max(r.ConnsPeak, c.Conns)
	}
	r.Succeeded, err = srv.waitJobs(ctx, ids, len(ids), benchInflightLatency+30*time.Second, "succeeded")
	if err != nil {
		rss.end()
		return r, err
	}
	if r.Succeeded < len(ids) {
		fmt.Fprintf(os.Stderr, "inflight: only %d of %d long jobs succeeded in time\n", r.Succeeded, len(ids))
	}
	// The open loop's jobs queued behind the long ones; they run now, and must be done before
	// the comparison counts.
	if err := srv.idle(ctx, 90*time.Second); err != nil {
		// Jobs left running (their executions lost) must not hide the figures: the comparison
		// then counts beside them, and the report says how many long jobs did not succeed.
		fmt.Fprintf(os.Stderr, "inflight: %v; counting the comparison anyway\n", err)
	}
	// The comparison: a tenth as many running, answering at the same pace for less long.
	fewLatency := benchInflightLatency * 5 / 12
	fewTexts := make([]string, r.Few)
	for i := range fewTexts {
		fewTexts[i] = fmt.Sprintf("inflight bench few %d #sim:latency=%s #sim:tokens=%d", i, fewLatency, benchInflightTokens*5/12)
	}
	few, err := srv.submitMany(ctx, fewTexts)
	if err != nil {
		rss.end()
		return r, err
	}
	r.FewWindow, err = inflightCount(ctx, srv, few)
	r.Seconds = time.Since(start).Seconds()
	r.RSSPeakKiB = rss.end()
	if err != nil {
		return r, err
	}
	r.ConnsPeak = max(r.ConnsPeak, r.FewWindow.Conns)
	fmt.Fprintf(os.Stderr, "inflight: %d running: %.0f transactions per %.0f s interval (%d running: %.0f); submit p99 %.1f ms at %d/s; %d of %d succeeded; RSS peak %.0f MiB; %d sessions\n",
		r.Window.Running, r.Window.XactsPerInterval, r.HeartbeatSeconds, r.FewWindow.Running, r.FewWindow.XactsPerInterval,
		r.Submit.P99ms, benchInflightRate, r.Succeeded, r.Prompts, float64(r.RSSPeakKiB)/1024, r.ConnsPeak)
	return r, nil
}

// inflightCount waits until every one of ids runs (at most 90 s; the window then counts
// with those running, which it reports), then counts over benchInflightIntervals heartbeat
// intervals.
func inflightCount(ctx context.Context, srv *phaseServer, ids []string) (inflightWindow, error) {
	w := inflightWindow{Intervals: benchInflightIntervals}
	n, err := srv.waitJobs(ctx, ids, len(ids), 90*time.Second, "running")
	if err != nil {
		return w, err
	}
	if n < len(ids) {
		fmt.Fprintf(os.Stderr, "inflight: only %d of %d jobs running after 90 s; counting anyway\n", n, len(ids))
	}
	// Let the claims' own writes and their statistics settle before counting.
	time.Sleep(2 * time.Second)
	d, err := srv.window(ctx, time.Duration(benchInflightIntervals)*benchInflightHeartbeat)
	if err != nil {
		return w, err
	}
	if w.Running, err = srv.countJobs(ctx, ids, "running"); err != nil {
		return w, err
	}
	k := float64(benchInflightIntervals)
	w.XactsPerInterval, w.JobUpdatesPerInt, w.OutputRowsPerInt = float64(d.Xacts)/k, float64(d.JobUpdates)/k, float64(d.OutputInserts)/k
	w.Conns = d.Conns
	return w, nil
}

// inflightRows writes the inflight phase's report rows.
func inflightRows(f *inflightResult, only func(fig, av, target, how string)) {
	setup := fmt.Sprintf("an `asterion serve` of its own, ASTERION_WORKERS=%d, ASTERION_HEARTBEAT_INTERVAL=%.0fs; %d prompts `#sim:latency=%.0fs #sim:tokens=%d` (a word every %.1f s) submitted by 50 clients",
		f.Workers, f.HeartbeatSeconds, f.Prompts, benchInflightLatency.Seconds(), benchInflightTokens, benchInflightLatency.Seconds()/benchInflightTokens)
	only(fmt.Sprintf("submit p99 beside %s running jobs", sizeLabel(f.Window.Running)), fmt.Sprintf("%.1f ms", f.Submit.P99ms), "≤ 50 ms",
		fmt.Sprintf("%s; with all running, an open loop of %.0f/s offered for %.0f s, latency from the scheduled send time; p50 %.1f ms, %d requests, %d not 202",
			setup, float64(f.Submit.Requests)/f.Submit.Seconds, f.Submit.Seconds, f.Submit.P50ms, f.Submit.Requests, f.Submit.Errors))
	only(fmt.Sprintf("long jobs succeeded of %s at once", sizeLabel(f.Prompts)), fmt.Sprint(f.Succeeded), fmt.Sprint(f.Prompts),
		fmt.Sprintf("jobs of those prompts `succeeded` when the phase ended (it waits up to %.0f s after the open loop; phase %.0f s)", (benchInflightLatency+30*time.Second).Seconds(), f.Seconds))
	only(fmt.Sprintf("transactions per heartbeat interval, %d / %d running", f.FewWindow.Running, f.Window.Running),
		fmt.Sprintf("%.0f / %.0f", f.FewWindow.XactsPerInterval, f.Window.XactsPerInterval), "constant in running jobs",
		fmt.Sprintf("statements are counted as transactions (pg_stat_statements is not assumed; shared_preload_libraries here: %q): xact_commit + xact_rollback of the phase's database (pg_stat_database, read from another database) over %d intervals once every job ran (the %d long prompts; after they and the open loop's jobs finished, %d answering at the same pace for %.0f s), ÷ %d; everything the server does in that time, output writes included; rows written per interval meanwhile: sa_job updated %.0f / %.0f, sa_job_output inserted %.0f / %.0f",
			f.PreloadLibraries, f.Window.Intervals, f.Window.Running, f.FewWindow.Running, (benchInflightLatency*5/12).Seconds(), f.Window.Intervals, f.FewWindow.JobUpdatesPerInt, f.Window.JobUpdatesPerInt,
			f.FewWindow.OutputRowsPerInt, f.Window.OutputRowsPerInt))
	only(fmt.Sprintf("server RSS peak, %s running", sizeLabel(f.Window.Running)), fmt.Sprintf("%.0f MiB", float64(f.RSSPeakKiB)/1024), "≤ 600 MiB",
		fmt.Sprintf("highest VmRSS of the `asterion serve` process sampled every 100 ms from the first submit until every job finished (%.0f MiB before); database sessions open at most %d (PostgreSQL's max_connections here: %d)",
			float64(f.RSSStartKiB)/1024, f.ConnsPeak, f.MaxConnections))
}
