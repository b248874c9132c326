package main

// Phase governed: a provider limit kept busy. A server of its own with
// ASTERION_PROVIDER_RPM=6000 (the sim answering at once and limiting nothing itself) first
// idles, then gets a backlog larger than a minute at the limit; the jobs' started_at (set as
// the call starts, after the governor granted its slot) give the call-start rate over 60 s,
// and PostgreSQL's count of the governor's function calls what the governor costs.

import (
	"context"
	"fmt"
	"os"
	"time"
)

// The governed phase's load.
const (
	benchGovernedRPM     = 6000
	benchGovernedBacklog = 6500
	benchGovernedWorkers = 50
	benchGovernedWindow  = 60 * time.Second
	benchGovernedIdle    = 10 * time.Second
)

// governedResult is what the governed phase measured.
type governedResult struct {
	RPM     int `json:"rpm"`
	Backlog int `json:"backlog"`
	Workers int `json:"workers"`
	// Started is the calls started in the WindowSeconds from the first start after the
	// backlog was seeded; PerSecond that over the window, Share that over the limit.
	Started       int     `json:"started"`
	WindowSeconds float64 `json:"window_seconds"`
	PerSecond     float64 `json:"per_second"`
	Share         float64 `json:"share"`
	// MinSecond and MaxSecond are the fewest and most starts in one whole second of the window.
	MinSecond int `json:"min_second"`
	MaxSecond int `json:"max_second"`
	// Idle* are the counters' rates over IdleSeconds before the backlog, Load* over the window.
	IdleSeconds float64 `json:"idle_seconds"`
	IdleReserve float64 `json:"idle_reserve_per_s"`
	IdleObserve float64 `json:"idle_observe_per_s"`
	IdleXacts   float64 `json:"idle_xacts_per_s"`
	LoadReserve float64 `json:"load_reserve_per_s"`
	LoadObserve float64 `json:"load_observe_per_s"`
	LoadXacts   float64 `json:"load_xacts_per_s"`
	SeedSeconds float64 `json:"seed_seconds"`
	QueuedAfter int64   `json:"queued_after"`
	// FreePerSecond is the start rate of the same server without the limit, over
	// FreeWindowSeconds (a second server, on a database of its own, after the first stopped).
	FreePerSecond     float64 `json:"free_per_second"`
	FreeWindowSeconds float64 `json:"free_window_seconds"`
}

// backlogRun is one backlog's starts: in the window from the first start after seeding.
type backlogRun struct {
	seedSeconds          float64
	started              int
	minSecond, maxSecond int
	queuedAfter          int64
	// load is the database's counters from seeding to the window's end, seconds long.
	load    dbCounters
	seconds float64
}

// backlogStarts seeds n queued prompt jobs of the admin at once and counts the jobs started
// in the window from the first start.
func backlogStarts(ctx context.Context, srv *phaseServer, n int, window time.Duration) (backlogRun, error) {
	var run backlogRun
	sd, err := newSeeder(ctx, srv.pool)
	if err != nil {
		return run, err
	}
	admin, err := sd.ownerOf(ctx, "admin")
	if err != nil {
		return run, err
	}
	var seeded time.Time
	if err := srv.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&seeded); err != nil {
		return run, err
	}
	start := time.Now()
	if err := sd.addBacklog(ctx, admin, n); err != nil {
		return run, err
	}
	run.seedSeconds = time.Since(start).Seconds()
	c0, err := srv.counters(ctx)
	if err != nil {
		return run, err
	}
	t0 := time.Now()
	var first time.Time
	deadline := time.Now().Add(30 * time.Second)
	for {
		var t *time.Time
		if err := srv.pool.QueryRow(ctx, `SELECT min(started_at) FROM sa_job WHERE started_at >= $1`, seeded).Scan(&t); err != nil {
			return run, fmt.Errorf("read the first start: %w", err)
		}
		if t != nil {
			first = *t
			break
		}
		if time.Now().After(deadline) {
			return run, fmt.Errorf("no job of the backlog started in 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(time.Until(first.Add(window + time.Second)))
	c1, err := srv.counters(ctx)
	if err != nil {
		return run, err
	}
	run.load, run.seconds = c1.minus(c0), time.Since(t0).Seconds()
	err = srv.pool.QueryRow(ctx, `SELECT coalesce(min(n), 0), coalesce(max(n), 0) FROM (
		SELECT (SELECT count(*) FROM sa_job WHERE started_at >= $1::timestamptz + s * interval '1 s'
			AND started_at < $1::timestamptz + (s + 1) * interval '1 s') AS n
		FROM generate_series(0, $2::int - 1) AS s) AS per`, first, int(window.Seconds())).Scan(&run.minSecond, &run.maxSecond)
	if err != nil {
		return run, fmt.Errorf("count starts per second: %w", err)
	}
	if err := srv.pool.QueryRow(ctx, `SELECT count(*) FROM sa_job WHERE started_at >= $1::timestamptz
		AND started_at < $1::timestamptz + $2::float8 * interval '1 s'`, first, window.Seconds()).Scan(&run.started); err != nil {
		return run, fmt.Errorf("count starts in the window: %w", err)
	}
	if run.queuedAfter, _, err = jobCounts(ctx, srv.pool); err != nil {
		return run, err
	}
	return run, nil
}

func runGoverned(ctx context.Context, cfg config) (governedResult, error) {
	window := cfg.scaledFor(benchGovernedWindow)
	r := governedResult{RPM: benchGovernedRPM, Backlog: cfg.scaled(benchGovernedBacklog), Workers: benchGovernedWorkers,
		WindowSeconds: window.Seconds(), IdleSeconds: benchGovernedIdle.Seconds()}
	srv, err := startPhaseServer(ctx, cfg, "governed", fmt.Sprintf("ASTERION_PROVIDER_RPM=%d", benchGovernedRPM),
		fmt.Sprintf("ASTERION_WORKERS=%d", benchGovernedWorkers), "ASTERION_SIM_RPM=")
	if err != nil {
		return r, err
	}
	defer srv.close()
	// Startup's own statements (migrations, River's leader election) settle first.
	time.Sleep(3 * time.Second)
	idle, err := srv.window(ctx, benchGovernedIdle)
	if err != nil {
		return r, err
	}
	r.IdleReserve, r.IdleObserve, r.IdleXacts = float64(idle.Reserve)/r.IdleSeconds, float64(idle.Observe)/r.IdleSeconds, float64(idle.Xacts)/r.IdleSeconds
	run, err := backlogStarts(ctx, srv, r.Backlog, window)
	if err != nil {
		return r, err
	}
	r.SeedSeconds, r.Started, r.MinSecond, r.MaxSecond, r.QueuedAfter = run.seedSeconds, run.started, run.minSecond, run.maxSecond, run.queuedAfter
	el := run.seconds
	r.LoadReserve, r.LoadObserve, r.LoadXacts = float64(run.load.Reserve)/el, float64(run.load.Observe)/el, float64(run.load.Xacts)/el
	srv.close()
	// The same server without the limit, on a database of its own, says what this machine
	// could start meanwhile: the limit is the ceiling only where that is above it.
	ctl, err := startPhaseServer(ctx, cfg, "ungoverned", fmt.Sprintf("ASTERION_WORKERS=%d", benchGovernedWorkers), "ASTERION_SIM_RPM=")
	if err != nil {
		return r, err
	}
	defer ctl.close()
	time.Sleep(3 * time.Second)
	ctlWindow := window / 4
	free, err := backlogStarts(ctx, ctl, cfg.scaled(benchGovernedBacklog/2), ctlWindow)
	if err != nil {
		return r, fmt.Errorf("without the limit: %w", err)
	}
	r.FreeWindowSeconds, r.FreePerSecond = ctlWindow.Seconds(), float64(free.started)/ctlWindow.Seconds()
	r.PerSecond = float64(r.Started) / r.WindowSeconds
	r.Share = r.PerSecond / (float64(r.RPM) / 60)
	fmt.Fprintf(os.Stderr, "governed: %d starts in %.0f s = %.1f/s (%.1f %% of %d/min), per second %d..%d, %d still queued; governor calls/s idle %.1f+%.1f, under load reserve %.1f observe %.1f; transactions/s idle %.1f load %.1f; without the limit %.1f/s\n",
		r.Started, r.WindowSeconds, r.PerSecond, 100*r.Share, r.RPM, r.MinSecond, r.MaxSecond, r.QueuedAfter,
		r.IdleReserve, r.IdleObserve, r.LoadReserve, r.LoadObserve, r.IdleXacts, r.LoadXacts, r.FreePerSecond)
	return r, nil
}

// governedRows writes the governed phase's report rows.
func governedRows(g *governedResult, only func(fig, av, target, how string)) {
	only(fmt.Sprintf("governed call starts, limit %d/min", g.RPM), fmt.Sprintf("%.1f/s (%.1f %%)", g.PerSecond, 100*g.Share), "≥ 95 % of the limit",
		fmt.Sprintf("an `asterion serve` of its own, ASTERION_PROVIDER_RPM=%d, %d workers, sim at 0 latency with no limit of its own; a backlog of %d prompt jobs seeded at once (River's InsertManyFast and the app's rows, as in the growth phase; %.1f s); jobs whose `started_at` (written as the call starts, after the governor's slot) falls in the %.0f s from the first start: %d, %d to %d in any one second; %d still queued after; the same server without the limit then started %.1f/s over %.0f s (a second server, database of its own), the machine's ceiling at that moment",
			g.RPM, g.Workers, g.Backlog, g.SeedSeconds, g.WindowSeconds, g.Started, g.MinSecond, g.MaxSecond, g.QueuedAfter, g.FreePerSecond, g.FreeWindowSeconds))
	only("governor calls per second, idle / under load", fmt.Sprintf("%.1f / %.1f", g.IdleReserve+g.IdleObserve, g.LoadReserve+g.LoadObserve), "0 idle",
		fmt.Sprintf("calls of asterion_governor_reserve and asterion_governor_observe counted by PostgreSQL (track_functions = 'pl' on the phase's database, pg_stat_user_functions; pg_stat_statements is not loaded here) over %.0f s idle before the backlog and over the window: reserve %.1f/s, observe %.1f/s under load, i.e. %.2f statements per call started; all transactions of the database: %.1f/s idle, %.1f/s under load",
			g.IdleSeconds, g.LoadReserve, g.LoadObserve, (g.LoadReserve+g.LoadObserve)/max(g.PerSecond, 1e-9), g.IdleXacts, g.LoadXacts))
}
