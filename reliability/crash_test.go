package reliability

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// TestCrashedWorkersLoseNothing runs a stream of prompts through `asterion serve --no-worker`
// and three `asterion run-worker` processes that are SIGKILLed at random moments and restarted,
// with a provider latency long enough that most kills land in the middle of provider calls.
// At the end, by SQL: every accepted prompt has its one job, every job succeeded and entered a
// terminal state once, every succeeded job has exactly one response (parent_id = prompt), one
// edge, one ledger row and one job.succeeded audit row, and crashes were really reclaimed.
//
// Size: ASTERION_RELIABILITY_CRASH_PROMPTS (short 300, long 2000), submitted at 15 a second
// while the kills go on; ASTERION_RELIABILITY_CRASH_DRAIN bounds the wait after the last kill
// (short 3 min, long 5 min).
func TestCrashedWorkersLoseNothing(t *testing.T) {
	requireSuite(t)
	t.Parallel()
	n := pickInt(t, "ASTERION_RELIABILITY_CRASH_PROMPTS", 300, 2000)
	d := dbtest.New(t)
	m := newMember(t, d.Bun)
	dbURL := d.URL.String()
	// Reclaim must be fast for the test: a crashed execution's heartbeat is stale after 3 s and
	// the River leader looks every second. The job timeout (far above the sim's 1.5 s) only
	// shortens River's rescue of a vehicle that was fetched but not yet claimed when its worker
	// died, which comes after max(StaleAfter, JobTimeout) + 1 min = 68 s (jobs/runtime.go).
	env := map[string]string{
		"ASTERION_SIM_LATENCY":        "300ms-1500ms",
		"ASTERION_WORKERS":            "4",
		"ASTERION_HEARTBEAT_INTERVAL": "250ms",
		"ASTERION_STALE_AFTER":        "3s",
		"ASTERION_RECLAIM_EVERY":      "1s",
		"ASTERION_JOB_TIMEOUT":        "8s",
	}
	srv := startServe(t, "serve", dbURL, env, "--no-worker")
	client := newAPI(t, srv.base, m.Token)

	const slots = 3
	var (
		procsMu sync.Mutex
		workers [slots]*proc
		all     []*proc
		started int
	)
	startSlot := func(i int) {
		procsMu.Lock()
		defer procsMu.Unlock()
		started++
		p := startWorker(t, fmt.Sprintf("worker-%d-%d", i, started), dbURL, env)
		workers[i] = p
		all = append(all, p)
	}
	for i := range slots {
		startSlot(i)
	}

	// Submit at about the rate the crashing pool drains, from four clients.
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var accepted acceptedSet
	var submitErrs atomic.Int64
	var firstErr atomic.Value
	var next atomic.Int64
	var subWG sync.WaitGroup
	interval := time.Second / 15
	for range 4 {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				// Load pacing: each submit waits for its slot of the open loop.
				time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
				r := client.submit(ctx, fmt.Sprintf("crash run prompt %d", i), map[string]any{"max_attempts": 10})
				if r.Err != nil {
					submitErrs.Add(1)
					firstErr.CompareAndSwap(nil, r.Err.Error())
					continue
				}
				accepted.add(r)
			}
		}()
	}
	submitted := make(chan struct{})
	go func() { subWG.Wait(); close(submitted) }()

	// Kill a random worker every 0.7–2.5 s and restart it after up to half a second, for as long
	// as prompts are being submitted.
	kills := 0
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for killing := true; killing; {
		select {
		case <-submitted:
			killing = false
			continue
		case <-time.After(700*time.Millisecond + time.Duration(rng.Int64N(int64(1800*time.Millisecond)))):
		}
		i := rng.IntN(slots)
		procsMu.Lock()
		victim := workers[i]
		procsMu.Unlock()
		victim.kill()
		kills++
		// The fault's schedule: the slot stays empty this long.
		time.Sleep(time.Duration(rng.Int64N(int64(500 * time.Millisecond))))
		startSlot(i)
	}
	lastKill := time.Now()
	killPhase := time.Since(start)
	// A job whose worker died after River fetched its vehicle but before the job was claimed is
	// still queued behind a vehicle River believes is running; only River's rescuer frees it
	// (after StaleAfter + 1 min here). Count them for the log.
	var orphaned []string
	rows, err := d.Bun.QueryContext(ctx, `SELECT j.id::text FROM sa_job j JOIN river_job r ON r.id = j.river_job_id
 WHERE j.state = 'queued' AND r.state = 'running' AND r.attempted_at < now() - interval '5 seconds'`)
	if err != nil {
		t.Fatalf("find jobs behind dead vehicles: %v", err)
	}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("scan job id: %v", err)
		}
		orphaned = append(orphaned, id)
	}
	if err := rows.Close(); err != nil {
		t.Fatalf("find jobs behind dead vehicles: %v", err)
	}

	// Drain: the live workers and the leader's reclaim finish what the crashes left.
	drain := pickDuration(t, "ASTERION_RELIABILITY_CRASH_DRAIN", 3*time.Minute, 5*time.Minute)
	dbtest.WaitForDetail(t, drain, "every job to reach a terminal state after the last kill", func() (bool, string) {
		open, err := queryInt(ctx, d.Bun, "SELECT count(*) FROM sa_job WHERE state NOT IN "+terminalStates)
		if err != nil {
			return false, err.Error()
		}
		counts, _ := stateCounts(ctx, d.Bun)
		return open == 0, fmt.Sprintf("job states %v", counts)
	})
	total := time.Since(start)
	afterLastKill := time.Since(lastKill)

	acc := accepted.all()
	if e := submitErrs.Load(); e != 0 || len(acc) != n {
		t.Errorf("%d of %d submits were not accepted (worker crashes must not affect the API); first: %v", e, n, firstErr.Load())
	}
	checkAcceptedJobs(t, d.Bun, acc)
	if got := mustInt(t, d.Bun, "SELECT count(*) FROM sa_job"); got != len(acc) {
		t.Errorf("%d jobs in the database for %d accepted prompts", got, len(acc))
	}
	checkExactlyOnce(t, d.Bun)
	// With ten attempts per job, no job may fail: only ten crashes of one job in a row could
	// exhaust its budget.
	if failed := mustInt(t, d.Bun, "SELECT count(*) FROM sa_job WHERE state <> 'succeeded'"); failed != 0 {
		counts, _ := stateCounts(ctx, d.Bun)
		t.Errorf("%d jobs did not succeed: %v", failed, counts)
	}
	reclaimed := mustInt(t, d.Bun, "SELECT count(*) FROM sa_audit WHERE action = 'job.reclaimed'")
	crashedJobs := mustInt(t, d.Bun, "SELECT count(*) FROM sa_job WHERE attempt > 1")
	if kills > 0 && reclaimed == 0 {
		t.Errorf("%d kills but no job was reclaimed: the kills never landed mid-call, so the test proved nothing", kills)
	}
	procsMu.Lock()
	checkNoPanic(t, append([]*proc{srv.proc}, all...)...)
	procsMu.Unlock()
	t.Logf("%d prompts, %d SIGKILLs, %d reclaims over %d jobs that ran more than once; kill phase %s, all terminal %s after the last kill (%s in all)",
		n, kills, reclaimed, crashedJobs, killPhase.Round(time.Second), afterLastKill.Round(time.Second), total.Round(time.Second))
	for _, id := range orphaned {
		var waited float64
		if err := d.Bun.QueryRowContext(ctx, "SELECT extract(epoch FROM started_at)::float8 FROM sa_job WHERE id = ?", id).Scan(&waited); err == nil {
			t.Logf("job %s was queued behind a vehicle River still believed running (its worker died after River fetched it, before the claim committed); it started again %.0f s after the last kill",
				id, waited-float64(lastKill.UnixNano())/1e9)
		}
	}
}
