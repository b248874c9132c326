package reliability

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db"
)

// TestDatabaseCrashStrandsNothing runs `asterion serve` (with its pool) and one `asterion
// run-worker` against a private PostgreSQL and, in each of several cycles, submits a batch of
// prompts and, while they are submitted and run, crashes PostgreSQL (`pg_ctl stop -m immediate`, no checkpoint: a claim whose commit
// did not wait for the disk may be lost) while they run, and starts it again 5 s later. After
// each cycle, within the reclaim period: every accepted job has reached a terminal state, no
// prompt has more than one response, and no job is queued on a vehicle River has finished. At
// the end the exactly-once rules hold over every job, and the test logs how often a lost claim
// was met (the worker's "lost claim" line) and how many jobs the reclaim pass moved off a
// finished vehicle.
//
// Size: ASTERION_RELIABILITY_PGCRASH_CYCLES crashes (short 3, long 10) of
// ASTERION_RELIABILITY_PGCRASH_PROMPTS prompts each (short 40, long 300).
func TestDatabaseCrashStrandsNothing(t *testing.T) {
	requireSuite(t)
	t.Parallel()
	cycles := pickInt(t, "ASTERION_RELIABILITY_PGCRASH_CYCLES", 3, 10)
	perCycle := pickInt(t, "ASTERION_RELIABILITY_PGCRASH_PROMPTS", 40, 300)
	down := pickDuration(t, "ASTERION_RELIABILITY_PGCRASH_DOWN", 5*time.Second, 5*time.Second)

	pg := startPrivateCluster(t)
	dbURL := pg.URL("asterion_crash")
	env := map[string]string{
		"ASTERION_LOG_LEVEL":          "info",
		"ASTERION_DB_WAIT":            "60s",
		"ASTERION_SIM_LATENCY":        "300ms-2s",
		"ASTERION_WORKERS":            "20",
		"ASTERION_HEARTBEAT_INTERVAL": "250ms",
		"ASTERION_STALE_AFTER":        "3s",
		"ASTERION_RECLAIM_EVERY":      "1s",
		"ASTERION_JOB_TIMEOUT":        "15s",
	}
	srv := startServe(t, "serve", dbURL, env)
	worker := startWorker(t, "run-worker", dbURL, env)
	ctx := context.Background()
	u, err := db.ParseURL(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	check, err := db.Open(ctx, db.OpenConfig{URL: u, WaitFor: 10 * time.Second, MaxOpenConns: 4})
	if err != nil {
		t.Fatalf("open the private database: %v", err)
	}
	t.Cleanup(func() { _ = check.Close() })
	m := newMember(t, check)
	client := newAPI(t, srv.base, m.Token)

	var accepted []submitResult
	refused := 0
	// The reclaim period: a stale heartbeat (3 s) seen by the leader's pass (every 1 s), after
	// the processes have reconnected; generous for a loaded machine.
	settle := pickDuration(t, "ASTERION_RELIABILITY_PGCRASH_SETTLE", 2*time.Minute, 3*time.Minute)
	for cycle := range cycles {
		var mu sync.Mutex
		var wg sync.WaitGroup
		next := 0
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					mu.Lock()
					i := next
					next++
					mu.Unlock()
					if i >= perCycle {
						return
					}
					r := client.submit(ctx, fmt.Sprintf("crash cycle %d prompt %d", cycle, i), map[string]any{"max_attempts": 10})
					mu.Lock()
					if r.Err == nil {
						accepted = append(accepted, r)
					} else {
						refused++
					}
					mu.Unlock()
				}
			}()
		}
		// Crash while submits, claims and calls go on.
		waitUntil(t, 60*time.Second, "jobs to run before the crash", func() (bool, string) {
			k, err := queryInt(ctx, check, "SELECT count(*) FROM sa_job WHERE state = 'running'")
			if err != nil {
				return false, err.Error()
			}
			mu.Lock()
			sent := next
			mu.Unlock()
			return k >= 5 && sent >= perCycle/3, fmt.Sprintf("%d running, %d submitted", k, sent)
		})
		pg.crash(t)
		time.Sleep(down)
		pg.start(t)
		wg.Wait()
		waitUntil(t, settle, fmt.Sprintf("every accepted job to end after crash %d", cycle+1), func() (bool, string) {
			open, err := queryInt(ctx, check, "SELECT count(*) FROM sa_job WHERE state NOT IN "+terminalStates)
			if err != nil {
				return false, err.Error()
			}
			counts, _ := stateCounts(ctx, check)
			return open == 0, fmt.Sprintf("job states %v", counts)
		})
		if k := mustInt(t, check, `SELECT count(*) FROM sa_job j JOIN river_job r ON r.id = j.river_job_id
 WHERE j.state IN ('queued', 'running') AND r.state IN ('completed', 'cancelled', 'discarded')`); k != 0 {
			t.Errorf("after crash %d: %d jobs left queued or running on a finished vehicle", cycle+1, k)
		}
		if k := mustInt(t, check, `SELECT count(*) FROM (SELECT parent_id FROM sa_entity WHERE kind = 'response'
 GROUP BY parent_id HAVING count(*) > 1) x`); k != 0 {
			t.Errorf("after crash %d: %d prompts with more than one response", cycle+1, k)
		}
	}
	checkAcceptedJobs(t, check, accepted)
	checkExactlyOnce(t, check)
	lost := strings.Count(srv.logText(), "lost claim:") + strings.Count(worker.logText(), "lost claim:")
	stranded := mustInt(t, check, "SELECT count(*) FROM sa_audit WHERE action = 'job.revehicled' AND detail->>'reason' LIKE 'its vehicle ended%'")
	counts, _ := stateCounts(ctx, check)
	checkNoPanic(t, srv.proc, worker)
	t.Logf("%d crashes of PostgreSQL, %d prompts accepted (%d submits refused or unanswered during a crash), job states %v; a lost claim was met %d times and the reclaim moved %d jobs off a finished vehicle",
		cycles, len(accepted), refused, counts, lost, stranded)
}
