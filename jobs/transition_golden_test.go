package jobs_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/jobstest"
)

var update = flag.Bool("update", false, "rewrite testdata/transitions.golden from the statements the transitions run")

const transitionsGolden = "testdata/transitions.golden"

// TestTransitionStatements prints the job UPDATE of every transition (claim, success, retry,
// failure, cancel, supersede, reclaim, stuck, hand-back, synchronous run) into
// testdata/transitions.golden, so that a change to any of them shows in review as a change of
// that file. Each transition is made by the code that makes it in production.
func TestTransitionStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := newEnv(t, jobstest.InstantSim(), func(c *jobs.Config) {
		// No beat refreshes a running job while the test makes it look stale.
		c.HeartbeatInterval = time.Hour
		c.StaleAfter = time.Minute
	})
	var mu sync.Mutex
	seen := map[string]map[string]bool{}
	stop := jobs.WatchTransitions(e.S, func(label, query string) {
		mu.Lock()
		defer mu.Unlock()
		if seen[label] == nil {
			seen[label] = map[string]bool{}
		}
		seen[label][query] = true
	})
	defer stop()

	// A synchronous run, answered and failed.
	if _, err := e.S.RunSync(ctx, e.V, "sync"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.S.RunSync(ctx, e.V, "sync #sim:fail=provider_5xx"); err != nil {
		t.Fatal(err)
	}

	rt := jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	// A claim and a success; a retry, then a failure once out of attempts.
	e.WaitState(e.Submit("ok").JobID, jobs.StateSucceeded, 20*time.Second)
	failed := e.Submit("flaky #sim:fail=provider_5xx", func(r *jobs.SubmitRequest) { r.MaxAttempts = intp(2) })
	e.WaitState(failed.JobID, jobs.StateFailed, 30*time.Second)
	// A supersede of the failed job.
	if _, err := e.S.Retry(ctx, e.V, failed.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatalf("retry: %v", err)
	}
	// A cancel of a running job.
	long := e.Submit("long #sim:latency=30s")
	e.WaitState(long.JobID, jobs.StateRunning, 20*time.Second)
	if _, err := e.S.Cancel(ctx, e.V, long.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	// A reclaim of a running job without a heartbeat, to the queue on a new vehicle, and one
	// started too long ago, to failed.
	for _, startedAt := range []string{"started_at", "now() - interval '1 hour'"} {
		j := e.Submit("stale #sim:latency=30s")
		e.WaitState(j.JobID, jobs.StateRunning, 20*time.Second)
		// A pass skips a job whose row another transaction holds at that moment, as the
		// periodic reclaim does; the next pass takes it.
		jobstest.WaitFor(t, 20*time.Second, "reclaim of the stale job", func() bool {
			if _, err := e.D.Bun.ExecContext(ctx, `UPDATE sa_job SET running_heartbeat_at = now() - interval '10 minutes',
				started_at = `+startedAt+` WHERE id = ? AND state = 'running'`, j.JobID); err != nil {
				t.Fatal(err)
			}
			rep, err := e.S.ReclaimStuck(ctx)
			if err != nil {
				t.Fatalf("reclaim: %v", err)
			}
			return rep.Failed+rep.Requeued > 0
		})
	}
	// A hand-back of a running job when its pool stops.
	cut := e.Submit("cut #sim:latency=30s")
	e.WaitState(cut.JobID, jobs.StateRunning, 20*time.Second)
	if err := rt.Stop(ctx, 50*time.Millisecond); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if j := e.Job(cut.JobID); j.State != string(jobs.StateQueued) {
		t.Fatalf("job after the stop is %s, want queued", j.State)
	}
	stop()

	mu.Lock()
	got := renderTransitions(seen)
	mu.Unlock()
	if *update {
		if err := os.WriteFile(transitionsGolden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(transitionsGolden)
	if err != nil {
		t.Fatalf("read %s (go test ./jobs -run TestTransitionStatements -update writes it): %v", transitionsGolden, err)
	}
	if got != string(want) {
		t.Fatalf("the transition statements differ from %s: check the change, then rewrite it with\n"+
			"  go test ./jobs -run '^TestTransitionStatements$' -update\n%s", transitionsGolden, firstLineDiff(string(want), got))
	}
}

// renderTransitions prints every label with its statements, sorted, one clause a line.
func renderTransitions(seen map[string]map[string]bool) string {
	var b strings.Builder
	b.WriteString("# The job UPDATE of every transition, as jobs/transition.go composes it (the rows a\n" +
		"# transition inserts in the same statement go in a WITH before it). Rewrite with\n" +
		"# go test ./jobs -run '^TestTransitionStatements$' -update\n")
	labels := make([]string, 0, len(seen))
	for l := range seen {
		labels = append(labels, l)
	}
	slices.Sort(labels)
	for _, l := range labels {
		queries := make([]string, 0, len(seen[l]))
		for q := range seen[l] {
			queries = append(queries, q)
		}
		slices.Sort(queries)
		for _, q := range queries {
			fmt.Fprintf(&b, "\n## %s\n%s\n", l, layoutSQL(q))
		}
	}
	return b.String()
}

// layoutSQL breaks a statement before its main keywords and after each assignment of the
// job's SET, so that a change reads as a change of one line.
func layoutSQL(q string) string {
	set, rest, _ := strings.Cut(q, " WHERE ")
	set = strings.ReplaceAll(set, ", ", ",\n    ")
	q = set + " WHERE " + rest
	for _, kw := range []string{" SET ", " WHERE ", " RETURNING ", " FROM ", " LEFT JOIN ", " AND "} {
		q = strings.ReplaceAll(q, kw, "\n  "+strings.TrimSpace(kw)+" ")
	}
	return strings.ReplaceAll(q, ") SELECT ", ")\nSELECT ")
}

// firstLineDiff shows the first line where want and got part.
func firstLineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := range max(len(w), len(g)) {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  golden: %s\n  now:    %s", i+1, wl, gl)
		}
	}
	return ""
}
