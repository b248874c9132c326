package main

// Phase fairness: a small org's prompts beside a large org's backlog. A server of its own (10
// workers, sim latency 200 ms, ASTERION_ORG_MAX_RUNNING=5 so one org cannot hold every
// worker) holds a backlog of org A; org B submits one prompt every 200 ms through the API; each
// of B's jobs is timed from its created_at (the submit's transaction) to its started_at.

import (
	"context"
	"fmt"
	"os"
	"time"
)

// The fairness phase's load.
const (
	benchFairBacklog    = 10000
	benchFairWorkers    = 10
	benchFairOrgRunning = 5
	benchFairEvery      = 200 * time.Millisecond
	benchFairFor        = 30 * time.Second
	benchFairLatency    = 200 * time.Millisecond
)

// fairnessResult is what the fairness phase measured.
type fairnessResult struct {
	Backlog       int     `json:"backlog"`
	Workers       int     `json:"workers"`
	OrgMaxRunning int     `json:"org_max_running"`
	SeedSeconds   float64 `json:"seed_seconds"`
	// Submitted is B's prompts, Started how many of them started by 20 s after the last
	// submit; Wait is started_at − created_at over all of them, a job not started counting
	// the time it had waited when the phase looked (so a quantile among those is a lower bound).
	Submitted int     `json:"submitted"`
	Started   int     `json:"started"`
	Wait      latency `json:"wait"`
	// AFinished is how many of A's jobs finished while B submitted, BacklogAfter A's queued
	// jobs at the end.
	AFinished    int64   `json:"a_finished"`
	BacklogAfter int64   `json:"backlog_after"`
	Seconds      float64 `json:"seconds"`
	// SubmitSeconds is how long B submitted.
	SubmitSeconds float64 `json:"submit_seconds"`
}

func runFairness(ctx context.Context, cfg config) (fairnessResult, error) {
	during := cfg.scaledFor(benchFairFor)
	r := fairnessResult{Backlog: cfg.scaled(benchFairBacklog), Workers: benchFairWorkers, OrgMaxRunning: benchFairOrgRunning}
	lat := benchFairLatency.String()
	srv, err := startPhaseServer(ctx, cfg, "fairness", fmt.Sprintf("ASTERION_WORKERS=%d", benchFairWorkers),
		"ASTERION_SIM_LATENCY="+lat+"-"+lat, fmt.Sprintf("ASTERION_ORG_MAX_RUNNING=%d", benchFairOrgRunning))
	if err != nil {
		return r, err
	}
	defer srv.close()
	const orgA, orgB = "bench-fair-a", "bench-fair-b"
	if _, err := ensureOperator(cfg.bin, srv.dbURL, orgA, "bench-fair-a-op"); err != nil {
		return r, err
	}
	tokB, err := ensureOperator(cfg.bin, srv.dbURL, orgB, "bench-fair-b-op")
	if err != nil {
		return r, err
	}
	b := srv.api.withToken(tokB)
	sd, err := newSeeder(ctx, srv.pool)
	if err != nil {
		return r, err
	}
	a, err := sd.ownerOf(ctx, "bench-fair-a-op")
	if err != nil {
		return r, err
	}
	start := time.Now()
	if err := sd.addBacklog(ctx, a, r.Backlog); err != nil {
		return r, err
	}
	r.SeedSeconds = time.Since(start).Seconds()
	// A's backlog is being worked before B arrives.
	time.Sleep(2 * time.Second)
	finished := func() (int64, error) {
		var n int64
		err := srv.pool.QueryRow(ctx, `SELECT count(*) FROM sa_job WHERE org_id = $1 AND state IN ('succeeded', 'failed', 'cancelled')`, a.org).Scan(&n)
		return n, err
	}
	f0, err := finished()
	if err != nil {
		return r, fmt.Errorf("count org A's finished jobs: %w", err)
	}
	var ids []string
	begin := time.Now()
	for k := 0; time.Since(begin) < during; k++ {
		sub, err := b.submit(ctx, fmt.Sprintf("fairness bench prompt %d of org B", k))
		if err != nil {
			return r, err
		}
		ids = append(ids, sub.JobID)
		time.Sleep(time.Until(begin.Add(time.Duration(k+1) * benchFairEvery)))
	}
	f1, err := finished()
	if err != nil {
		return r, fmt.Errorf("count org A's finished jobs: %w", err)
	}
	r.AFinished = f1 - f0
	r.Submitted, r.SubmitSeconds = len(ids), during.Seconds()
	if _, err := srv.waitJobs(ctx, ids, len(ids), 20*time.Second, "running", "succeeded", "failed", "cancelled"); err != nil {
		return r, err
	}
	rows, err := srv.pool.Query(ctx, `SELECT (extract(epoch FROM coalesce(started_at, clock_timestamp()) - created_at) * 1000000)::bigint, started_at IS NOT NULL
		FROM sa_job WHERE id = ANY($1::uuid[])`, ids)
	if err != nil {
		return r, fmt.Errorf("read org B's waits: %w", err)
	}
	var waits []time.Duration
	for rows.Next() {
		var us int64
		var started bool
		if err := rows.Scan(&us, &started); err != nil {
			rows.Close()
			return r, fmt.Errorf("read org B's waits: %w", err)
		}
		waits = append(waits, time.Duration(us)*time.Microsecond)
		if started {
			r.Started++
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return r, fmt.Errorf("read org B's waits: %w", err)
	}
	r.Wait = quantiles(waits)
	if err := srv.pool.QueryRow(ctx, `SELECT count(*) FROM sa_job WHERE org_id = $1 AND state = 'queued'`, a.org).Scan(&r.BacklogAfter); err != nil {
		return r, fmt.Errorf("count org A's backlog: %w", err)
	}
	r.Seconds = time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "fairness: org B %d prompts, %d started: submit → start p50 %.1f ms p99 %.1f ms max %.1f ms; org A finished %d meanwhile, %d still queued\n",
		r.Submitted, r.Started, r.Wait.P50ms, r.Wait.P99ms, r.Wait.MaxMs, r.AFinished, r.BacklogAfter)
	return r, nil
}

// fairnessRows writes the fairness phase's report rows.
func fairnessRows(f *fairnessResult, only func(fig, av, target, how string)) {
	p99 := fmt.Sprintf("%.1f ms", f.Wait.P99ms)
	if f.Started < f.Submitted {
		// The slowest 1 % include jobs that never started: their wait so far bounds it.
		p99 = fmt.Sprintf("≥ %.1f s", f.Wait.P99ms/1000)
	}
	only(fmt.Sprintf("small org's submit → start p99 beside a %s backlog", sizeLabel(f.Backlog)), p99, "≤ 2 s",
		fmt.Sprintf("an `asterion serve` of its own, %d workers, sim latency %s, ASTERION_ORG_MAX_RUNNING=%d (capacity is left free for a second org); org A's backlog of %d prompt jobs seeded at once (River's InsertManyFast and the app's rows, as in the growth phase; %.1f s); org B (an operator's API token) submits one prompt every %.0f ms for %.0f s; `started_at − created_at` of B's jobs: %d submitted, %d started within 20 s of the last (a job not started counts its wait so far), p50 %.1f ms, max %.1f ms; org A finished %d jobs meanwhile, %d still queued after",
			f.Workers, benchFairLatency, f.OrgMaxRunning, f.Backlog, f.SeedSeconds, float64(benchFairEvery.Milliseconds()), f.SubmitSeconds,
			f.Submitted, f.Started, f.Wait.P50ms, f.Wait.MaxMs, f.AFinished, f.BacklogAfter))
}
