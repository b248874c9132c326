package reliability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// TestKilledWorkerMidStreamStartsANewOutput: a worker SIGKILLed while its job's answer streams
// leaves the chunks it stored; the reclaimed attempt, run by another worker, writes an output of
// its own, numbered 1..n without a gap, and the job's response is exactly that attempt's chunks.
func TestKilledWorkerMidStreamStartsANewOutput(t *testing.T) {
	requireSuite(t)
	t.Parallel()
	d := dbtest.New(t)
	m := newMember(t, d.Bun)
	dbURL := d.URL.String()
	env := map[string]string{
		"ASTERION_WORKERS":            "2",
		"ASTERION_HEARTBEAT_INTERVAL": "250ms",
		"ASTERION_STALE_AFTER":        "3s",
		"ASTERION_RECLAIM_EVERY":      "1s",
		"ASTERION_JOB_TIMEOUT":        "30s",
	}
	srv := startServe(t, "serve", dbURL, env, "--no-worker")
	first := startWorker(t, "worker-first", dbURL, env)
	r := newAPI(t, srv.base, m.Token).submit(context.Background(), "stream then die #sim:tokens=40 #sim:latency=6s", nil)
	if r.Status != 202 {
		t.Fatalf("submit: %d %v", r.Status, r.Err)
	}
	dbtest.WaitForDetail(t, 30*time.Second, "the first attempt's output to flow", func() (bool, string) {
		n := mustInt(t, d.Bun, "SELECT count(*) FROM sa_job_output WHERE job_id = ? AND attempt = 1", r.JobID)
		return n >= 3, fmt.Sprintf("%d chunks", n)
	})
	first.kill()
	kept := mustInt(t, d.Bun, "SELECT count(*) FROM sa_job_output WHERE job_id = ? AND attempt = 1", r.JobID)
	second := startWorker(t, "worker-second", dbURL, env)
	dbtest.WaitForDetail(t, 90*time.Second, "the reclaimed job to succeed", func() (bool, string) {
		var state string
		var attempt int
		if err := d.Bun.QueryRowContext(context.Background(), "SELECT state, attempt FROM sa_job WHERE id = ?", r.JobID).
			Scan(&state, &attempt); err != nil {
			return false, err.Error()
		}
		return state == "succeeded", fmt.Sprintf("%s, attempt %d", state, attempt)
	})
	var attempt int
	var body string
	if err := d.Bun.QueryRowContext(context.Background(), `SELECT j.attempt, e.body FROM sa_job j
		JOIN sa_entity e ON e.id = j.response_id WHERE j.id = ?`, r.JobID).Scan(&attempt, &body); err != nil {
		t.Fatal(err)
	}
	if attempt < 2 {
		t.Fatalf("the job succeeded on attempt %d: the kill was not reclaimed", attempt)
	}
	rows, err := d.Bun.QueryContext(context.Background(),
		"SELECT seq, text FROM sa_job_output WHERE job_id = ? AND attempt = ? ORDER BY seq", r.JobID, attempt)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var text strings.Builder
	want := 1
	for rows.Next() {
		var seq int
		var piece string
		if err := rows.Scan(&seq, &piece); err != nil {
			t.Fatal(err)
		}
		if seq != want {
			t.Fatalf("attempt %d's chunk %d is seq %d", attempt, want, seq)
		}
		want++
		text.WriteString(piece)
	}
	if want == 1 || text.String() != body {
		t.Errorf("attempt %d's %d chunks make %q, the response is %q", attempt, want-1, text.String(), body)
	}
	if after := mustInt(t, d.Bun, "SELECT count(*) FROM sa_job_output WHERE job_id = ? AND attempt = 1", r.JobID); after != kept {
		t.Errorf("the killed attempt's output went from %d to %d chunks", kept, after)
	}
	checkNoPanic(t, srv.proc, second)
}
