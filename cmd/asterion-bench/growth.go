package main

// Phase growth: submit latency and worker throughput with a standing backlog of
// queued jobs. A backlog only stands while no worker takes from it, so the phase runs its own
// `asterion serve --no-worker` on a database of its own (the main server's workers would drain
// it). At each size it tops the backlog up (seed.go: real River vehicles and the app's rows for
// them), runs a short closed loop of submits against that server, then starts one
// `asterion run-worker` process and times how fast it works the backlog off.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// growthResult is what the growth phase measured, one entry per backlog size.
type growthResult struct {
	Steps []growthStep `json:"steps"`
}

// growthStep is one backlog size.
type growthStep struct {
	// Size is the backlog asked for; the seeding tops the queue up to it.
	Size int `json:"size"`
	// Backlog is the number of queued jobs when the submit loop started, BacklogAfterSubmit
	// when it ended (its own submits join the backlog).
	Backlog     int64   `json:"backlog"`
	SeedSeconds float64 `json:"seed_seconds"`
	Submit      result  `json:"submit"`
	// SubmitCost is what the loop's statements cost the database, per accepted submit.
	SubmitCost         *dbCostResult `json:"submit_cost,omitempty"`
	BacklogAfterSubmit int64         `json:"backlog_after_submit"`
	// Finished jobs over DrainSeconds, counted from the worker's first finished job, and
	// the backlog left when the window closed.
	Finished          int64   `json:"finished"`
	DrainSeconds      float64 `json:"drain_seconds"`
	DrainPerSec       float64 `json:"drain_per_s"`
	BacklogAfterDrain int64   `json:"backlog_after_drain"`
	// DrainCost is what the finished jobs' statements cost the database over the same window,
	// per job: which statements grow with the backlog. Nil without pg_stat_statements.
	DrainCost *dbCostResult `json:"drain_cost,omitempty"`
}

// growthEnv is what the growth phase needs.
type growthEnv struct {
	bin      string
	adminURL string
	dbName   string
	sizes    []int
	submitOf time.Duration
	drainFor time.Duration
}

// asterionEnv is the environment of every asterion process the bench starts. The bench's
// clients all come from one address, with thousands of connections, and its streams belong to
// one user: the per-address and per-user caps are lifted.
func asterionEnv(dbURL string) []string {
	return append(os.Environ(), "DATABASE_URL="+dbURL, "ASTERION_ADMIN_PASSWORD="+benchPassword,
		"ASTERION_SIM_LATENCY=0-0", "ASTERION_LOG_LEVEL=error", "ASTERION_WORKERS=10", "ASTERION_MAX_CONNS_PER_IP=100000",
		"ASTERION_MAX_STREAMS_PER_USER=10000")
}

// jobCounts reads queued and finished jobs from the trigger-kept counters.
func jobCounts(ctx context.Context, pool *pgxpool.Pool) (queued, finished int64, err error) {
	err = pool.QueryRow(ctx, `SELECT coalesce(sum(n) FILTER (WHERE state = 'queued'), 0)::bigint,
		coalesce(sum(n) FILTER (WHERE state IN ('succeeded', 'failed', 'cancelled')), 0)::bigint FROM sa_job_count`).Scan(&queued, &finished)
	if err != nil {
		err = fmt.Errorf("read job counters: %w", err)
	}
	return queued, finished, err
}

func runGrowth(ctx context.Context, e growthEnv) (growthResult, error) {
	var r growthResult
	dbURL, err := freshDatabase(ctx, e.adminURL, e.dbName)
	if err != nil {
		return r, err
	}
	addr := freePort()
	srv := exec.Command(e.bin, "serve", "--no-worker", "--addr", addr)
	srv.Env = asterionEnv(dbURL)
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		return r, fmt.Errorf("start asterion serve --no-worker: %w", err)
	}
	defer stopProcess(srv)
	if err := waitReady("http://" + addr + "/readyz"); err != nil {
		return r, err
	}
	tok, err := runCLI(e.bin, dbURL, "", "token", "create", "--user", "admin")
	if err != nil {
		return r, err
	}
	t := newTarget("asterion --no-worker", "http://"+addr+"/sa-core/v1/prompt", tok)
	probeURL, err := prepareCostCounters(ctx, dbURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warning: no statement costs in the growth phase:", err)
	}
	if probeURL == "" {
		probeURL = dbURL
	}
	pool, err := pgxpool.New(ctx, probeURL)
	if err != nil {
		return r, fmt.Errorf("connect to %s: %w", e.dbName, err)
	}
	defer pool.Close()
	sd, err := newSeeder(ctx, pool)
	if err != nil {
		return r, err
	}
	admin, err := sd.ownerOf(ctx, "admin")
	if err != nil {
		return r, err
	}
	// Warm-up: the server's connection pool, plan caches and River's insert path.
	closedLoop(t, 50, 2*time.Second)
	for _, size := range e.sizes {
		st := growthStep{Size: size}
		queued, _, err := jobCounts(ctx, pool)
		if err != nil {
			return r, err
		}
		start := time.Now()
		if add := int64(size) - queued; add > 0 {
			if err := sd.addBacklog(ctx, admin, int(add)); err != nil {
				return r, err
			}
		}
		st.SeedSeconds = time.Since(start).Seconds()
		if st.Backlog, _, err = jobCounts(ctx, pool); err != nil {
			return r, err
		}
		before, costErr := snapshotCost(ctx, pool)
		st.Submit = closedLoop(t, 50, e.submitOf)
		if after, err := snapshotCost(ctx, pool); costErr == nil && err == nil && st.Submit.Requests > st.Submit.Errors {
			st.SubmitCost = statementsOnly(diffCost("submit", st.Submit.Requests-st.Submit.Errors, before, after, asterionStep))
		}
		if st.BacklogAfterSubmit, _, err = jobCounts(ctx, pool); err != nil {
			return r, err
		}
		if err := drain(ctx, e, dbURL, pool, &st); err != nil {
			return r, err
		}
		fmt.Fprintf(os.Stderr, "growth: backlog %d (seeded in %.1f s): submit %.0f/s p50 %.1f ms p99 %.1f ms; worker %.0f jobs/s over %.1f s, %d left\n",
			st.Backlog, st.SeedSeconds, st.Submit.Throughput, st.Submit.P50ms, st.Submit.P99ms, st.DrainPerSec, st.DrainSeconds, st.BacklogAfterDrain)
		printCost("a submit", st.SubmitCost)
		printCost("a drained job", st.DrainCost)
		r.Steps = append(r.Steps, st)
	}
	return r, nil
}

// drain starts one run-worker process and counts the jobs it finishes over e.drainFor (or until
// the backlog is gone), from one second after its first finished job (its connection pool
// has grown by then), then stops it.
func drain(ctx context.Context, e growthEnv, dbURL string, pool *pgxpool.Pool, st *growthStep) error {
	_, before, err := jobCounts(ctx, pool)
	if err != nil {
		return err
	}
	w := exec.Command(e.bin, "run-worker")
	w.Env = asterionEnv(dbURL)
	var stderr strings.Builder
	w.Stderr = &stderr
	if err := w.Start(); err != nil {
		return fmt.Errorf("start asterion run-worker: %w", err)
	}
	defer stopProcess(w)
	var first, t0 time.Time
	var c0 int64
	var at0 costSnapshot
	counted := false
	deadline := time.Now().Add(30 * time.Second)
	for {
		queued, finished, err := jobCounts(ctx, pool)
		if err != nil {
			return err
		}
		now := time.Now()
		switch {
		case first.IsZero() && finished > before:
			first = now
		case t0.IsZero() && !first.IsZero() && now.Sub(first) >= time.Second:
			t0, c0 = now, finished
			// pg_stat_statements counts a statement when it ends, so the window needs no
			// wait for statistics to be flushed, unlike the tables' counters.
			at0, err = snapshotCost(ctx, pool)
			counted = err == nil
		case first.IsZero() && now.After(deadline):
			stopProcess(w)
			return fmt.Errorf("run-worker finished no job in 30 s: %s", stderr.String())
		case !t0.IsZero() && (now.Sub(t0) >= e.drainFor || queued == 0):
			st.Finished, st.DrainSeconds = finished-c0, now.Sub(t0).Seconds()
			st.DrainPerSec = float64(st.Finished) / st.DrainSeconds
			st.BacklogAfterDrain = queued
			if after, err := snapshotCost(ctx, pool); counted && err == nil && st.Finished > 0 {
				st.DrainCost = statementsOnly(diffCost("drain", int(st.Finished), at0, after, asterionStep))
			}
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// statementsOnly drops a window's table counters: PostgreSQL reports them up to ten seconds
// late, so over a window read without waiting for them they are not the window's.
func statementsOnly(c *dbCostResult) *dbCostResult {
	c.Tables, c.IndexEntries, c.PartialEntries = nil, 0, 0
	return c
}

// printCost prints the statements' cost per what (a submit, a drained job): by step, then the
// costliest statements, so that a run shows which of them grow with the backlog.
func printCost(what string, c *dbCostResult) {
	if c == nil {
		return
	}
	fmt.Fprintf(os.Stderr, "  %s: statement time %.2f ms in %.2f statements (submit %.2f ms, claim %.2f, finish %.2f, other %.2f)\n",
		what, c.Life.Ms, c.Life.Statements, c.Steps["submit"].Ms, c.Steps["claim"].Ms, c.Steps["finish"].Ms, c.Steps["other"].Ms)
	for i, st := range c.Statements {
		if i == 8 {
			break
		}
		fmt.Fprintf(os.Stderr, "  %-7s %6.3f %7.4f %7.4f %s\n", st.Step, st.Calls, st.Ms, st.MeanMs, st.Query)
	}
}
