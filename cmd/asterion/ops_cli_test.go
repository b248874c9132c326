package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db/dbtest"
	"asterion/jobs"
	"asterion/jobs/readmodel"
)

// The operator command line against a seeded database: every command, its JSON and its
// mistakes (unknown ids, bad flags).
func TestOperatorCommands(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	svc, v := submitter(t, d)
	env := map[string]string{"DATABASE_URL": d.URL.String()}
	ctx := context.Background()

	ok, err := svc.Submit(ctx, jobs.SubmitRequest{Viewer: v, Prompt: "fine #sim:latency=1ms"})
	if err != nil {
		t.Fatal(err)
	}
	bad, err := svc.Submit(ctx, jobs.SubmitRequest{Viewer: v, Prompt: "broken #sim:fail=provider_4xx"})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := svc.Submit(ctx, jobs.SubmitRequest{Viewer: v, Prompt: "waiting"})
	if err != nil {
		t.Fatal(err)
	}
	// Run the first two only: cancel the third first so the worker leaves it.
	r := runBinary(t, env, "", "cancel-job", queued.JobID.String())
	if r.code != 0 || !strings.Contains(r.stdout, "cancelled job "+queued.JobID.String()) {
		t.Fatalf("cancel-job: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	wantFailure(t, runBinary(t, env, "", "cancel-job", queued.JobID.String()), 1)
	if r := runBinary(t, env, "", "run-worker", "--once", "--batch-size=5"); r.code != 0 {
		t.Fatalf("run-worker --once: %d %s", r.code, r.stderr)
	}

	r = runBinary(t, env, "", "list-jobs", "--json")
	var list []map[string]any
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list) != 3 {
		t.Fatalf("list-jobs --json: exit %d, %d jobs, stdout %q", r.code, len(list), r.stdout)
	}
	r = runBinary(t, env, "", "list-jobs", "--state=failed", "--json")
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &list) != nil || len(list) != 1 || list[0]["job_id"] != bad.JobID.String() || list[0]["error_kind"] != "provider_4xx" {
		t.Fatalf("list-jobs --state=failed: exit %d, stdout %q", r.code, r.stdout)
	}
	r = runBinary(t, env, "", "list-jobs", "--org=workers", "--since=1h")
	if r.code != 0 || len(lines(r.stdout)) != 4 || !strings.HasPrefix(r.stdout, "JOB") {
		t.Fatalf("list-jobs table: exit %d, stdout %q", r.code, r.stdout)
	}
	wantFailure(t, runBinary(t, env, "", "list-jobs", "--state=nope"), 2)
	wantFailure(t, runBinary(t, env, "", "list-jobs", "--since=yesterday-ish"), 2)
	wantFailure(t, runBinary(t, env, "", "list-jobs", "--org=no-such-org"), 1)

	r = runBinary(t, env, "", "job-details", ok.JobID.String())
	if r.code != 0 || !strings.Contains(r.stdout, "succeeded") || !strings.Contains(r.stdout, "HISTORY") {
		t.Fatalf("job-details: exit %d, stdout %q", r.code, r.stdout)
	}
	missing := uuid.NewString()
	if line := wantFailure(t, runBinary(t, env, "", "job-details", missing), 1); !strings.Contains(line, "no job "+missing) {
		t.Fatalf("job-details of an unknown id said %q", line)
	}
	wantFailure(t, runBinary(t, env, "", "job-details", "not-a-uuid"), 2)
	wantFailure(t, runBinary(t, env, "", "job-details"), 2)

	r = runBinary(t, env, "", "retry-job", "--json", bad.JobID.String())
	var retried struct {
		Job map[string]any `json:"job"`
	}
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &retried) != nil || retried.Job["supersedes"] != bad.JobID.String() {
		t.Fatalf("retry-job: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	wantFailure(t, runBinary(t, env, "", "retry-job", bad.JobID.String()), 1) // now superseded
	wantFailure(t, runBinary(t, env, "", "retry-job", missing), 1)

	r = runBinary(t, env, "", "queue-metrics", "--json")
	var m readmodel.QueueMetrics
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &m) != nil {
		t.Fatalf("queue-metrics: exit %d, stdout %q", r.code, r.stdout)
	}
	if m.Counts["succeeded"] != 1 || m.Counts["cancelled"] != 1 || m.Counts["superseded"] != 1 || m.Counts["queued"] != 1 {
		t.Fatalf("queue-metrics counts %v", m.Counts)
	}
	if r := runBinary(t, env, "", "queue-metrics"); r.code != 0 || !strings.Contains(r.stdout, "STATE") {
		t.Fatalf("queue-metrics table: %d %q", r.code, r.stdout)
	}
	wantFailure(t, runBinary(t, env, "", "queue-metrics", "--window=-1h"), 2)

	if r := runBinary(t, env, "", "reclaim-stuck-jobs", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"requeued": 0`) {
		t.Fatalf("reclaim-stuck-jobs: %d %q %q", r.code, r.stdout, r.stderr)
	}

	wantFailure(t, runBinary(t, env, "", "archive-old-jobs"), 2)
	wantFailure(t, runBinary(t, env, "", "archive-old-jobs", "--before=soon"), 2)
	tomorrow := time.Now().Add(48 * time.Hour).Format("2006-01-02")
	r = runBinary(t, env, "", "archive-old-jobs", "--before="+tomorrow, "--json")
	var arch map[string]int
	// Terminal jobs: succeeded, cancelled and the superseded failure (its successor is still
	// queued, so the superseded one stays until the successor is archived).
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &arch) != nil || arch["archived"] != 2 {
		t.Fatalf("archive-old-jobs: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_job_archive"); got != 2 {
		t.Fatalf("%d rows in the archive, want 2", got)
	}
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_job"); got != 2 {
		t.Fatalf("%d jobs left, want the queued retry and the job it supersedes", got)
	}
}

// Cancelling a running job from another process than the worker's: the CLI cancels, the
// worker subprocess abandons the adapter call, and no response is ever written.
func TestCancelRunningJobFromAnotherProcess(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	svc, v := submitter(t, d)
	w := startWorker(t, d.URL.String(), map[string]string{"ASTERION_WORKERS": "2"})
	sub, err := svc.Submit(context.Background(), jobs.SubmitRequest{Viewer: v, Prompt: "forever #sim:hang"})
	if err != nil {
		t.Fatal(err)
	}
	dbtest.WaitFor(t, 30*time.Second, "the worker to start the job", func() bool {
		return count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE id = ? AND state = 'running'", sub.JobID) == 1
	})
	if r := runBinary(t, map[string]string{"DATABASE_URL": d.URL.String()}, "", "cancel-job", sub.JobID.String()); r.code != 0 {
		t.Fatalf("cancel-job: %d %s", r.code, r.stderr)
	}
	dbtest.WaitFor(t, 20*time.Second, "River to finish the cancelled vehicle", func() bool {
		return count(t, d.Bun, "SELECT count(*) FROM river_job j JOIN sa_job s ON s.river_job_id = j.id WHERE s.id = ? AND j.state = 'cancelled' AND j.finalized_at IS NOT NULL", sub.JobID) == 1
	})
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE id = ? AND state = 'cancelled'", sub.JobID); got != 1 {
		t.Fatalf("job not cancelled")
	}
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_entity WHERE kind = 'response'"); got != 0 {
		t.Fatalf("%d responses written for a cancelled job", got)
	}
	w.stop()
	if w.cmd.ProcessState == nil || !w.cmd.ProcessState.Success() {
		t.Fatalf("worker did not stop cleanly: %v\n%s", w.cmd.ProcessState, w.stderr.String())
	}
}
