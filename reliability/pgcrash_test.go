package reliability

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
)

// TestDatabaseCrashStrandsNothing runs `asterion serve` (with its pool) and one `asterion
// run-worker` against a private PostgreSQL and, in each of several cycles, submits a batch of
// prompts (half of them due together a few seconds later) and, as the first of those is
// claimed, crashes PostgreSQL (`pg_ctl stop -m immediate`, no checkpoint: a claim whose commit
// did not wait for the disk may be lost) while they run, and starts it again 5 s later. After
// each cycle, within the reclaim period: every accepted job has reached a terminal state, no
// prompt has more than one response, and no job is queued on a vehicle River has finished. At
// the end the exactly-once rules hold over every job, and the test logs how often a lost claim
// was met: claims seen committed just before a crash and gone after it, the worker's "lost
// claim" line, and the jobs the reclaim pass moved off a finished vehicle. A lost claim is
// rare (any later commit that waits for the disk, such as a heartbeat or an output flush, writes
// the claims before it), so the test does not require one; jobs/stranded_test.go makes one by
// hand.
//
// Size: ASTERION_RELIABILITY_PGCRASH_CYCLES crashes (short 3, long 10) of
// ASTERION_RELIABILITY_PGCRASH_PROMPTS prompts each (short 40, long 300).
func TestDatabaseCrashStrandsNothing(t *testing.T) {
	requireSuite(t)
	t.Parallel()
	cycles := pickInt(t, "ASTERION_RELIABILITY_PGCRASH_CYCLES", 3, 10)
	perCycle := pickInt(t, "ASTERION_RELIABILITY_PGCRASH_PROMPTS", 40, 300)
	down := pickDuration(t, "ASTERION_RELIABILITY_PGCRASH_DOWN", 5*time.Second, 5*time.Second)

	// The WAL writer writes a commit that did not wait for the disk within wal_writer_delay
	// (200 ms by default), unless a later commit that waits writes it first. Ten seconds leaves
	// the claims of a burst in the WAL buffers long enough for the crash to meet them.
	pg := startPrivateClusterWith(t, "wal_writer_delay=10s", "wal_writer_flush_after=0")
	dbURL := pg.URL("asterion_crash")
	env := map[string]string{
		"ASTERION_LOG_LEVEL":          "info",
		"ASTERION_DB_WAIT":            "60s",
		"ASTERION_SIM_LATENCY":        "2s-4s",
		"ASTERION_WORKERS":            "20",
		"ASTERION_HEARTBEAT_INTERVAL": "2s",
		"ASTERION_STALE_AFTER":        "5s",
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
	refused, lostClaims := 0, 0
	// The reclaim period: a stale heartbeat (3 s) seen by the leader's pass (every 1 s), after
	// the processes have reconnected; generous for a loaded machine.
	settle := pickDuration(t, "ASTERION_RELIABILITY_PGCRASH_SETTLE", 2*time.Minute, 3*time.Minute)
	for cycle := range cycles {
		// Most of each batch is due a few seconds ahead, so that its vehicles become available
		// together, with no submit committing meanwhile: the claims then come in a burst, and a
		// crash in the middle of it finds some whose commit has not reached the disk. The rest is
		// due at once, so that submits, claims and finishes also meet the crash.
		dueAt := time.Now().Add(4 * time.Second)
		due := dueAt.UTC().Format(time.RFC3339Nano)
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
					fields := map[string]any{"max_attempts": 10}
					if i%4 != 0 {
						fields["scheduled_for"] = due
					}
					r := client.submit(ctx, fmt.Sprintf("crash cycle %d prompt %d", cycle, i), fields)
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
		wg.Wait()
		// Crash as soon as the first scheduled job is claimed, remembering the claims seen. The
		// sleep only spares the database the polls of the seconds before the batch is due.
		time.Sleep(time.Until(dueAt.Add(-200 * time.Millisecond)))
		var seen map[string]string
		dbtest.WaitForDetail(t, 60*time.Second, fmt.Sprintf("a scheduled job to start in crash cycle %d", cycle+1), func() (bool, string) {
			claims, scheduled, err := runningClaims(ctx, check)
			seen = claims
			return err == nil && scheduled > 0, fmt.Sprintf("last error %v", err)
		})
		pg.crash(t)
		// The fault itself: the database stays down this long.
		time.Sleep(down)
		pg.start(t)
		// A claim seen committed just before the crash that is gone after it was lost with the
		// crash (nothing else could move the job while the database was down).
		lostHere := 0
		for id, claim := range seen {
			var now string
			if err := check.QueryRowContext(ctx, "SELECT coalesce(worker_claim, '') FROM sa_job WHERE id = ?", id).Scan(&now); err == nil && now != claim {
				lostHere++
			}
		}
		lostClaims += lostHere
		t.Logf("crash %d: %d claims seen just before it, %d of them lost", cycle+1, len(seen), lostHere)
		dbtest.WaitForDetail(t, settle, fmt.Sprintf("every accepted job to end after crash %d", cycle+1), func() (bool, string) {
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
	rerun := strings.Count(srv.logText(), "lost claim:") + strings.Count(worker.logText(), "lost claim:")
	stranded := mustInt(t, check, "SELECT count(*) FROM sa_audit WHERE action = 'job.revehicled' AND detail->>'reason' LIKE 'its vehicle ended%'")
	counts, _ := stateCounts(ctx, check)
	checkNoPanic(t, srv.proc, worker)
	t.Logf("%d crashes of PostgreSQL, %d prompts accepted (%d submits refused or unanswered during a crash), job states %v; %d claims seen just before a crash were lost with it, %d jobs were run again on their own vehicle after their worker found its claim gone, and the reclaim moved %d jobs off a finished vehicle",
		cycles, len(accepted), refused, counts, lostClaims, rerun, stranded)
}

// runningClaims returns the claim of every running job by job id, and how many of them were
// scheduled.
func runningClaims(ctx context.Context, check *bun.DB) (map[string]string, int, error) {
	rows, err := check.QueryContext(ctx, `SELECT id::text, worker_claim, scheduled_for IS NOT NULL FROM sa_job
WHERE state = 'running' AND worker_claim IS NOT NULL`)
	if err != nil {
		return nil, 0, err
	}
	defer rows.Close()
	out, scheduled := map[string]string{}, 0
	for rows.Next() {
		var id, claim string
		var sched bool
		if err := rows.Scan(&id, &claim, &sched); err != nil {
			return nil, 0, err
		}
		out[id] = claim
		if sched {
			scheduled++
		}
	}
	return out, scheduled, rows.Err()
}
