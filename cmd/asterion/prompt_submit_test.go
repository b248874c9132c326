package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestPromptSubmitAt: `asterion prompt submit --at +10m` queues the prompt scheduled ten
// minutes ahead and prints its job with the estimate of its start; an --at that is not a time
// is a usage mistake (exit 2) and one that breaks the scheduling rule a refused prompt (exit
// 1), each one line on stderr, and neither writes a prompt.
func TestPromptSubmitAt(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	env := map[string]string{"DATABASE_URL": s.DatabaseURL}
	for _, at := range []string{"tomorrow", "+soon", "+-5m", "2026-13-01T00:00:00Z"} {
		r := runBinary(t, env, "", "prompt", "submit", "--at", at, "later")
		if line := wantFailure(t, r, 2); !strings.Contains(line, "--at") {
			t.Errorf("--at %q: %q does not name the flag", at, line)
		}
	}
	r := runBinary(t, env, "", "prompt", "submit", "--at", time.Now().Add(40*24*time.Hour).UTC().Format(time.RFC3339), "much later")
	if line := wantFailure(t, r, 1); !strings.Contains(line, "scheduled_for") {
		t.Errorf("40 days ahead: %q does not name the rule", line)
	}
	var n int
	if err := s.DB.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM sa_entity").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d entities written by refused submits", n)
	}

	before := time.Now()
	r = runBinary(t, env, "", "prompt", "submit", "--json", "--at", "+10m", "in ten minutes")
	if r.code != 0 {
		t.Fatalf("prompt submit --at +10m: exit %d, stderr %q", r.code, r.stderr)
	}
	var out struct {
		JobID        string  `json:"job_id"`
		State        string  `json:"state"`
		ScheduledFor *string `json:"scheduled_for"`
		ETA          *int    `json:"eta_seconds"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, r.stdout)
	}
	if out.State != "queued" || out.ScheduledFor == nil || out.ETA == nil || *out.ETA < 590 || *out.ETA > 601 {
		t.Fatalf("scheduled submit: %s", r.stdout)
	}
	var scheduledFor time.Time
	if err := s.DB.Bun.QueryRowContext(context.Background(), "SELECT scheduled_for FROM sa_job WHERE id = ?", out.JobID).
		Scan(&scheduledFor); err != nil {
		t.Fatal(err)
	}
	if want := before.Add(10 * time.Minute); scheduledFor.Before(want.Add(-time.Second)) || scheduledFor.After(want.Add(5*time.Second)) {
		t.Errorf("scheduled_for %v, want about %v", scheduledFor, want)
	}
	r = runBinary(t, env, "", "prompt", "submit", "now, please")
	if r.code != 0 || !strings.Contains(r.stdout, "starts in about") || !strings.Contains(r.stdout, "job:") {
		t.Errorf("plain submit: exit %d stdout %q stderr %q", r.code, r.stdout, r.stderr)
	}
}
