package main

// Phase mission: the mission page of a member with a long history. The phase seeds,
// in one SQL statement with triggers off (see seed.go), a member of an org of its own holding
// 20,000 prompts of 30 KB each, every one answered (a 2 KB response), every twentieth retried
// once; then 20 clients reload /mission as that member in closed loops while the server's
// resident set is sampled.

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// missionResult is what the mission phase measured.
type missionResult struct {
	Prompts     int `json:"prompts"`
	PromptBytes int `json:"prompt_bytes"`
	// SeedSeconds is how long the seeding statement took, VacuumSeconds the VACUUM (ANALYZE).
	SeedSeconds   float64 `json:"seed_seconds"`
	VacuumSeconds float64 `json:"vacuum_seconds"`
	Clients       int     `json:"clients"`
	Seconds       float64 `json:"seconds"`
	Reload        latency `json:"reload"`
	Errors        int     `json:"errors"`
	// Bytes is the size of a page, Drops how many drops it holds.
	Bytes int `json:"bytes"`
	Drops int `json:"drops"`
	// RSSBeforeKiB is the server's VmRSS after two warm-up reloads, RSSPeakKiB the highest
	// sampled (every 50 ms) while the clients reloaded.
	RSSBeforeKiB int64 `json:"rss_before_kib"`
	RSSPeakKiB   int64 `json:"rss_peak_kib"`
}

// The mission phase's member and its history.
const (
	benchMissionOrg     = "bench-mission"
	benchMissionMember  = "bench-member"
	benchMissionPrompts = 20000
	benchMissionBytes   = 30000
	benchMissionClients = 20
	benchMissionFor     = 15 * time.Second
)

// seedMission writes the member's history: for i in 1..$1 a prompt of $2 characters (a window
// of a 64,000-character string of hex digests, so it neither repeats nor compresses much), a
// succeeded job with a 2,000-character response, and for every twentieth an earlier job that
// its retry superseded; created a second apart, the newest a second before $3; org $4, user $5.
const seedMission = `WITH base AS MATERIALIZED (
    SELECT string_agg(md5('mission-' || k), '') AS b FROM generate_series(1, 2000) AS k),
src AS MATERIALIZED (
    SELECT i, md5('mission-prompt-' || i)::uuid AS prompt_id, md5('mission-job-' || i)::uuid AS job_id,
        md5('mission-old-' || i)::uuid AS old_id, md5('mission-resp-' || i)::uuid AS resp_id,
        $3::timestamptz - ($1::int + 1 - i) * interval '1 s' AS t,
        substr(base.b, 1 + (i * 37) % 30000, $2::int) AS body
    FROM base, generate_series(1, $1::int) AS i),
p AS (
    INSERT INTO sa_entity (id, kind, body, correlation_id, truth_class, state_class, org_id, created_by, created_at, updated_at)
    SELECT prompt_id, 'prompt', body, prompt_id, 'authored', 'open', $4, $5, t, t FROM src),
r AS (
    INSERT INTO sa_entity (id, kind, body, correlation_id, causation_id, truth_class, state_class, org_id, created_by, created_at, updated_at)
    SELECT resp_id, 'response', right(body, 2000), prompt_id, job_id, 'generated', 'open', $4, $5, t + interval '900 ms', t + interval '900 ms' FROM src),
o AS (
    INSERT INTO sa_job (id, prompt_id, state, priority, attempt, max_attempts, execution_options, started_at, finished_at,
        error_kind, error_message, org_id, created_by, created_at, updated_at, scheduled_at)
    SELECT old_id, prompt_id, 'superseded', 50, 3, 3, '{}'::jsonb, t, t + interval '100 ms', 'provider_5xx', 'seeded failure',
        $4, $5, t, t + interval '200 ms', t FROM src WHERE i % 20 = 0
    RETURNING org_id, state),
j AS (
    INSERT INTO sa_job (id, prompt_id, state, priority, attempt, max_attempts, execution_options, started_at, finished_at,
        response_id, supersedes, org_id, created_by, created_at, updated_at, scheduled_at)
    SELECT job_id, prompt_id, 'succeeded', 50, 1, 3, '{}'::jsonb, t + interval '300 ms', t + interval '900 ms', resp_id,
        CASE WHEN i % 20 = 0 THEN old_id END, $4, $5, t + interval '250 ms', t + interval '900 ms', t + interval '250 ms' FROM src
    RETURNING org_id, state)
INSERT INTO sa_job_count (org_id, state, n)
SELECT org_id, state, count(*) FROM (SELECT * FROM o UNION ALL SELECT * FROM j) AS x GROUP BY org_id, state`

// runMission seeds the member's history and times /mission reloads.
func runMission(ctx context.Context, api *apiClient, bin, dbURL string, serverPID int) (missionResult, error) {
	r := missionResult{Prompts: benchMissionPrompts, PromptBytes: benchMissionBytes, Clients: benchMissionClients}
	if _, err := runCLI(bin, dbURL, "", "org", "create", benchMissionOrg); err != nil && !strings.Contains(err.Error(), "exists") {
		return r, err
	}
	if _, err := runCLI(bin, dbURL, "", "user", "create", "--org", benchMissionOrg, "--name", benchMissionMember, "--role", "member"); err != nil &&
		!strings.Contains(err.Error(), "exists") {
		return r, err
	}
	tok, err := runCLI(bin, dbURL, "", "token", "create", "--user", benchMissionMember)
	if err != nil {
		return r, err
	}
	member := api.withToken(tok)
	pool, err := pgxpool.New(ctx, dbURL)
	if err != nil {
		return r, fmt.Errorf("connect for seeding: %w", err)
	}
	defer pool.Close()
	sd, err := newSeeder(ctx, pool)
	if err != nil {
		return r, err
	}
	who, err := sd.ownerOf(ctx, benchMissionMember)
	if err != nil {
		return r, err
	}
	start := time.Now()
	if err := sd.inSeedTx(ctx, "the mission history", seedMission, benchMissionPrompts, benchMissionBytes, sd.now, who.org, who.user); err != nil {
		return r, err
	}
	if err := sd.compactCounts(ctx); err != nil {
		return r, err
	}
	r.SeedSeconds = time.Since(start).Seconds()
	start = time.Now()
	if _, err := pool.Exec(ctx, `VACUUM (ANALYZE) sa_entity, sa_job, sa_job_count`); err != nil {
		return r, fmt.Errorf("vacuum and analyze after seeding the mission history: %w", err)
	}
	r.VacuumSeconds = time.Since(start).Seconds()
	fmt.Fprintf(os.Stderr, "mission: seeded %d prompts of %d bytes in %.1f s, VACUUM (ANALYZE) %.1f s\n",
		benchMissionPrompts, benchMissionBytes, r.SeedSeconds, r.VacuumSeconds)

	// Two warm-up reloads, which also check that the page is the member's newest 200 drops.
	for range 2 {
		body, err := member.fetch(ctx, "/mission")
		if err != nil {
			return r, err
		}
		r.Bytes, r.Drops = len(body), strings.Count(body, `<article id="drop-`)
	}
	if r.Drops != 200 {
		return r, fmt.Errorf("the mission page holds %d drops, want 200", r.Drops)
	}
	if r.RSSBeforeKiB, err = vmRSSKiB(serverPID); err != nil {
		return r, err
	}
	r.RSSPeakKiB = r.RSSBeforeKiB
	stopSampling := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
				if kib, err := vmRSSKiB(serverPID); err == nil && kib > r.RSSPeakKiB {
					r.RSSPeakKiB = kib
				}
			}
		}
	}()
	var (
		mu   sync.Mutex
		ds   []time.Duration
		errs int
		wg   sync.WaitGroup
		ferr error
	)
	until := time.Now().Add(benchMissionFor)
	start = time.Now()
	for range benchMissionClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(until) {
				status, _, d, err := member.get(ctx, "/mission")
				mu.Lock()
				if err != nil && ferr == nil {
					ferr = err
				}
				if status != 200 {
					errs++
				}
				ds = append(ds, d)
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	r.Seconds = time.Since(start).Seconds()
	close(stopSampling)
	<-sampled
	if ferr != nil {
		return r, ferr
	}
	r.Errors = errs
	r.Reload = quantiles(ds)
	fmt.Fprintf(os.Stderr, "mission: %d reloads by %d clients in %.1f s: p50 %.1f ms, p95 %.1f ms, p99 %.1f ms; %d errors; RSS %.0f → %.0f MiB; %d bytes, %d drops\n",
		r.Reload.N, r.Clients, r.Seconds, r.Reload.P50ms, r.Reload.P95ms, r.Reload.P99ms, r.Errors,
		float64(r.RSSBeforeKiB)/1024, float64(r.RSSPeakKiB)/1024, r.Bytes, r.Drops)
	return r, nil
}

// missionRows writes the mission phase's report rows.
func missionRows(m *missionResult, only func(fig, av, target, how string)) {
	how := fmt.Sprintf("a member (API token) holding %d prompts of %d bytes, each answered (2,000-byte response), every twentieth retried once, seeded in one INSERT … SELECT (%.0f s, VACUUM (ANALYZE) %.0f s); %d clients reloading `/mission` in closed loops for %.0f s on keep-alive loopback connections, time from request to last byte; %d reloads, p50 %.1f ms, p99 %.1f ms, %d answers not 200; each page %d drops, %d KiB",
		m.Prompts, m.PromptBytes, m.SeedSeconds, m.VacuumSeconds, m.Clients, m.Seconds, m.Reload.N, m.Reload.P50ms, m.Reload.P99ms,
		m.Errors, m.Drops, m.Bytes/1024)
	only(fmt.Sprintf("mission page p95, %s prompts of 30 KB, %d clients", sizeLabel(m.Prompts), m.Clients),
		fmt.Sprintf("%.1f ms", m.Reload.P95ms), "< 100 ms", how)
	only(fmt.Sprintf("server RSS growth, %d clients reloading the mission page", m.Clients),
		fmt.Sprintf("%.0f MiB", float64(m.RSSPeakKiB-m.RSSBeforeKiB)/1024), "< 50 MiB",
		fmt.Sprintf("highest VmRSS of the `asterion serve` process sampled every 50 ms during the reloads (%.0f MiB) − VmRSS after two warm-up reloads (%.0f MiB)",
			float64(m.RSSPeakKiB)/1024, float64(m.RSSBeforeKiB)/1024))
}
