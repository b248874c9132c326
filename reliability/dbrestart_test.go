package reliability

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
)

// submitLog counts the answers of a continuous submitter.
type submitLog struct {
	mu       sync.Mutex
	accepted []submitResult
	byStatus map[int]int
	examples map[int]string
}

func (l *submitLog) record(r submitResult) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byStatus == nil {
		l.byStatus, l.examples = map[int]int{}, map[int]string{}
	}
	if r.Err == nil {
		l.accepted = append(l.accepted, r)
	}
	l.byStatus[r.Status]++
	if r.Err != nil && l.examples[r.Status] == "" {
		l.examples[r.Status] = r.Err.Error()
	}
}

func (l *submitLog) snapshot() ([]submitResult, map[int]int, map[int]string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	by, ex := map[int]int{}, map[int]string{}
	for k, v := range l.byStatus {
		by[k] = v
	}
	for k, v := range l.examples {
		ex[k] = v
	}
	return append([]submitResult(nil), l.accepted...), by, ex
}

var workerIDRE = regexp.MustCompile(`"worker_id":"(w-[0-9a-f]+)"`)

// workerID reads the River client id a serve or run-worker process logged at start.
func workerID(t *testing.T, p *proc) string {
	t.Helper()
	var id string
	dbtest.WaitForDetail(t, 30*time.Second, p.name+" to log its worker id", func() (bool, string) {
		if m := workerIDRE.FindStringSubmatch(p.logText()); m != nil {
			id = m[1]
			return true, ""
		}
		return false, "no worker_id in the log yet"
	})
	return id
}

// TestDatabaseRestart runs `asterion serve` (with its worker pool) and one `asterion run-worker`
// against a private PostgreSQL, submits prompts continuously while an SSE client follows
// /sa-core/v1/mission/events, and restarts PostgreSQL in the middle: once with
// `pg_ctl restart -m fast`, then with a stop, some seconds down (during which the SSE client
// loses its connection) and a start. Submits may fail while the database is down, but only
// with 503 or a transport error. Afterwards: both processes are still up and pick up new work
// by themselves (new submits get 202 and are run by both), every accepted prompt has its one
// job and it is terminal, the exactly-once rules hold, and the SSE client, reconnecting with
// Last-Event-ID, received every change-feed event of its user exactly once and in order.
//
// Size: ASTERION_RELIABILITY_DB_CYCLES restart cycles (short 1, long 4) and
// ASTERION_RELIABILITY_DB_DOWN seconds down per stop (short 3s, long 10s).
func TestDatabaseRestart(t *testing.T) {
	requireSuite(t)
	t.Parallel()
	cycles := pickInt(t, "ASTERION_RELIABILITY_DB_CYCLES", 1, 4)
	down := pickDuration(t, "ASTERION_RELIABILITY_DB_DOWN", 3*time.Second, 10*time.Second)
	phase := pickDuration(t, "ASTERION_RELIABILITY_DB_PHASE", 3*time.Second, 8*time.Second)

	pg := startPrivateCluster(t)
	dbURL := pg.URL("asterion_restart")
	env := map[string]string{
		"ASTERION_LOG_LEVEL":          "info",
		"ASTERION_DB_WAIT":            "60s",
		"ASTERION_SIM_LATENCY":        "100ms-500ms",
		"ASTERION_WORKERS":            "4",
		"ASTERION_HEARTBEAT_INTERVAL": "500ms",
		"ASTERION_STALE_AFTER":        "3s",
		"ASTERION_RECLAIM_EVERY":      "1s",
		"ASTERION_JOB_TIMEOUT":        "10s",
	}
	srv := startServe(t, "serve", dbURL, env)
	worker := startWorker(t, "run-worker", dbURL, env)
	ids := []string{workerID(t, srv.proc), workerID(t, worker)}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
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

	sse := newSSEClient(srv.base, m.Token)
	sseCtx, stopSSE := context.WithCancel(ctx)
	sseDone := make(chan struct{})
	go func() { defer close(sseDone); sse.run(sseCtx) }()
	defer func() { stopSSE(); <-sseDone }()
	select {
	case <-sse.connected:
	case <-time.After(30 * time.Second):
		t.Fatal("the SSE client did not connect within 30 s")
	}

	// Two clients submit continuously, about 20 prompts a second in all.
	var submits submitLog
	subCtx, stopSubmitting := context.WithCancel(ctx)
	var subWG sync.WaitGroup
	for g := range 2 {
		subWG.Add(1)
		go func() {
			defer subWG.Done()
			for i := 0; subCtx.Err() == nil; i++ {
				r := client.submit(subCtx, fmt.Sprintf("restart run client %d prompt %d", g, i), map[string]any{"max_attempts": 5})
				if subCtx.Err() != nil && r.Err != nil {
					return
				}
				submits.record(r)
				// Load pacing, not a wait for anything.
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}

	// The phases and the downtime are the fault's schedule (traffic runs through each); what
	// is checked afterwards waits on the jobs' states and the SSE client's events.
	time.Sleep(phase)
	dbtest.WaitForDetail(t, 30*time.Second, "the SSE client to receive a first event", func() (bool, string) {
		_, last, _, _ := sse.snapshot()
		return last > 0, "no event yet"
	})
	var outages []string
	for c := range cycles {
		took := pg.restart(t)
		outages = append(outages, fmt.Sprintf("restart %d took %s", c+1, took.Round(time.Millisecond)))
		time.Sleep(phase)
		pg.stop(t)
		// While the database is down the client loses its stream, as over a flaky network; it
		// must come back with Last-Event-ID and miss nothing.
		sse.drop()
		time.Sleep(down)
		pg.start(t)
		outages = append(outages, fmt.Sprintf("stop %d: down %s", c+1, down))
		time.Sleep(phase)
	}
	backAt := time.Now()
	stopSubmitting()
	subWG.Wait()

	// New submits get 202 once the server has reconnected by itself.
	var first submitResult
	dbtest.WaitForDetail(t, 30*time.Second, "a submit to be accepted after the last restart", func() (bool, string) {
		first = client.submit(ctx, "restart run after the last start #sim:latency=10ms", map[string]any{"max_attempts": 5})
		if first.Err != nil {
			return false, first.Err.Error()
		}
		return true, ""
	})
	submits.record(first)
	reconnected := time.Since(backAt)
	// Then every submit is accepted, and both processes run the new work: 16 prompts of 1.5 s
	// each are more than one process's 4 slots can hold.
	var after []submitResult
	for i := range 16 {
		r := client.submit(ctx, fmt.Sprintf("restart run after prompt %d #sim:latency=1500ms", i), map[string]any{"max_attempts": 5})
		if r.Err != nil {
			t.Errorf("submit %d after the server reconnected: %v", i, r.Err)
			continue
		}
		submits.record(r)
		after = append(after, r)
	}

	accepted, byStatus, examples := submits.snapshot()
	dbtest.WaitForDetail(t, 2*time.Minute, "every accepted job to reach a terminal state", func() (bool, string) {
		open, err := queryInt(ctx, check, "SELECT count(*) FROM sa_job WHERE state NOT IN "+terminalStates)
		if err != nil {
			return false, err.Error()
		}
		counts, _ := stateCounts(ctx, check)
		return open == 0, fmt.Sprintf("job states %v", counts)
	})

	for status, n := range byStatus {
		if status == 202 || status == 0 || status == 503 {
			continue
		}
		t.Errorf("%d submits answered %d while the database restarted (only 503 or no answer is acceptable): %s", n, status, examples[status])
	}
	// No SQL, stack trace or internal detail in any error body.
	for status, ex := range examples {
		for _, leak := range []string{"dial tcp", "connection refused", "SQLSTATE", "pgdriver", "pgx", ".go:", "goroutine"} {
			if status != 0 && strings.Contains(ex, leak) {
				t.Errorf("a %d answer during the outage shows %q: %s", status, leak, ex)
			}
		}
	}
	checkAcceptedJobs(t, check, accepted)
	checkExactlyOnce(t, check)
	if n := mustInt(t, check, "SELECT count(*) FROM sa_job WHERE state <> 'succeeded'"); n != 0 {
		t.Errorf("%d jobs did not succeed; a restart of the database must not fail work that has attempts left: %s", n,
			strings.Join(failedJobs(t, check), "; "))
	}
	claimers := map[string]int{}
	for _, r := range after {
		var claim string
		if err := check.QueryRowContext(ctx, "SELECT coalesce(worker_claim, '') FROM sa_job WHERE id = ?", r.JobID).Scan(&claim); err != nil {
			t.Fatalf("read claim: %v", err)
		}
		claimers[strings.SplitN(claim, "/", 2)[0]]++
	}
	for _, id := range ids {
		if claimers[id] == 0 {
			t.Errorf("worker %s ran none of the %d prompts submitted after the restart (claims by process: %v): it did not reconnect", id, len(after), claimers)
		}
	}
	for _, p := range []*proc{srv.proc, worker} {
		if p.exited() {
			t.Errorf("%s exited during the test: %v", p.name, p.waitErr)
		}
	}

	checkSSE(t, check, sse, m)
	checkNoPanic(t, srv.proc, worker)
	_, _, conns, _ := sse.snapshot()
	t.Logf("%d submits accepted, answers by status %v; %s; new submits accepted %s after the last start; SSE connections %d",
		len(accepted), byStatus, strings.Join(outages, ", "), reconnected.Round(time.Millisecond), conns)
}

// failedJobs describes up to ten jobs that did not succeed.
func failedJobs(t *testing.T, bunDB *bun.DB) []string {
	t.Helper()
	rows, err := bunDB.QueryContext(context.Background(), `SELECT id, state, attempt, coalesce(error_kind, '-'), coalesce(error_message, '')
 FROM sa_job WHERE state <> 'succeeded' ORDER BY created_at LIMIT 10`)
	if err != nil {
		t.Fatalf("list failed jobs: %v", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, state, kind, msg string
		var attempt int
		if err := rows.Scan(&id, &state, &attempt, &kind, &msg); err != nil {
			t.Fatalf("scan failed jobs: %v", err)
		}
		out = append(out, fmt.Sprintf("%s %s attempt %d %s: %s", id, state, attempt, kind, truncate(msg, 200)))
	}
	return out
}

// checkSSE waits until the client has caught up with the change feed of its user, then
// compares: the client must have received exactly the table's numbered job events of that user,
// in order, each once, with the same job and state.
func checkSSE(t *testing.T, bunDB *bun.DB, sse *sseClient, m member) {
	t.Helper()
	ctx := context.Background()
	type row struct {
		Seq   int64
		JobID string
		State string
	}
	var table []row
	dbtest.WaitForDetail(t, 30*time.Second, "the SSE client to receive the whole change feed", func() (bool, string) {
		pending, err := queryInt(ctx, bunDB, "SELECT count(*) FROM sa_event WHERE topic = 'job' AND user_id = ? AND seq IS NULL", m.UserID)
		if err != nil {
			return false, err.Error()
		}
		table = table[:0]
		rows, err := bunDB.QueryContext(ctx, `SELECT seq, job_id::text, payload->>'state' FROM sa_event
 WHERE topic = 'job' AND user_id = ? AND seq IS NOT NULL ORDER BY seq`, m.UserID)
		if err != nil {
			return false, err.Error()
		}
		defer rows.Close()
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.Seq, &r.JobID, &r.State); err != nil {
				return false, err.Error()
			}
			table = append(table, r)
		}
		if err := rows.Err(); err != nil {
			return false, err.Error()
		}
		_, last, _, _ := sse.snapshot()
		if pending > 0 || len(table) == 0 {
			return false, fmt.Sprintf("%d events not numbered yet", pending)
		}
		return last >= table[len(table)-1].Seq, fmt.Sprintf("client at %d, feed at %d", last, table[len(table)-1].Seq)
	})
	got, _, conns, failures := sse.snapshot()
	seen := map[int64]int{}
	for _, e := range got {
		seen[e.ID]++
	}
	var dup []int64
	for id, n := range seen {
		if n > 1 {
			dup = append(dup, id)
		}
	}
	sort.Slice(dup, func(i, j int) bool { return dup[i] < dup[j] })
	if len(dup) > 0 {
		t.Errorf("the SSE client received %d events more than once, e.g. %v", len(dup), dup[:min(len(dup), 10)])
	}
	var missing []int64
	want := map[int64]row{}
	for _, r := range table {
		want[r.Seq] = r
		if seen[r.Seq] == 0 {
			missing = append(missing, r.Seq)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the SSE client missed %d of %d events, e.g. %v", len(missing), len(table), missing[:min(len(missing), 10)])
	}
	var prev int64
	for i, e := range got {
		if e.ID <= prev {
			t.Errorf("event %d (#%d received) came after event %d", e.ID, i, prev)
			break
		}
		prev = e.ID
		r, ok := want[e.ID]
		if !ok {
			t.Errorf("the SSE client received event %d, which is not one of its user's job events", e.ID)
			continue
		}
		if r.JobID != e.JobID || r.State != e.State {
			t.Errorf("event %d: received job %s %s, the feed has job %s %s", e.ID, e.JobID, e.State, r.JobID, r.State)
		}
	}
	if conns < 2 {
		t.Errorf("the SSE client connected %d times; the test meant to make it reconnect", conns)
	}
	if t.Failed() {
		t.Logf("SSE connection failures: %v", failures[:min(len(failures), 20)])
	}
}
