package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/provider"
)

// workerProc is a running `asterion run-worker` subprocess.
type workerProc struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
}

func startWorker(t *testing.T, dbURL string, env map[string]string, args ...string) *workerProc {
	t.Helper()
	cmd := exec.Command(asterionBin(t), append([]string{"run-worker"}, args...)...)
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "ASTERION_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "DATABASE_URL="+dbURL, "ASTERION_LOG_LEVEL=warn")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	w := &workerProc{cmd: cmd, stderr: &syncBuffer{}}
	cmd.Stderr = w.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start run-worker: %v", err)
	}
	t.Cleanup(func() { w.stop() })
	return w
}

func (w *workerProc) stop() {
	if w.cmd.ProcessState != nil {
		return
	}
	_ = w.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = w.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		_ = w.cmd.Process.Kill()
		<-done
	}
}

func (w *workerProc) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	_ = w.cmd.Wait()
}

// submitter builds a jobs.Service in the test process to enqueue prompts as a fresh user.
func submitter(t *testing.T, d *dbtest.DB) (*jobs.Service, jobs.Viewer) {
	t.Helper()
	ctx := context.Background()
	ids := identity.NewService(d.Bun)
	org, err := ids.CreateOrg(ctx, "workers")
	if err != nil {
		t.Fatal(err)
	}
	u, err := ids.CreateUser(ctx, "workers", "w-user", identity.RoleOperator, "")
	if err != nil {
		t.Fatal(err)
	}
	svc, err := jobs.NewService(jobs.Config{DB: d.Bun, Provider: provider.NewSim(provider.SimConfig{})})
	if err != nil {
		t.Fatal(err)
	}
	return svc, jobs.Viewer{OrgID: org.ID, UserID: u.ID, OrgWide: true}
}

func count(t *testing.T, db *bun.DB, query string, args ...any) int {
	t.Helper()
	var n int
	if err := db.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
	return n
}

// Two worker processes sharing one queue never run a job twice.
func TestTwoWorkerProcessesShareAQueue(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	svc, v := submitter(t, d)
	const n = 150
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			if _, err := svc.Submit(context.Background(), jobs.SubmitRequest{Viewer: v, Prompt: fmt.Sprintf("shared %d #sim:latency=15ms", i)}); err != nil {
				errs <- err
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	env := map[string]string{"ASTERION_WORKERS": "4"}
	a := startWorker(t, d.URL.String(), env)
	b := startWorker(t, d.URL.String(), env)
	dbtest.WaitFor(t, 90*time.Second, "every job to succeed", func() bool {
		return count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE state = 'succeeded'") == n
	})
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_entity WHERE kind = 'response'"); got != n {
		t.Fatalf("%d responses for %d prompts", got, n)
	}
	if got := count(t, d.Bun, "SELECT count(*) FROM (SELECT prompt_id FROM sa_job GROUP BY prompt_id HAVING count(*) > 1) x"); got != 0 {
		t.Fatalf("%d prompts have more than one job", got)
	}
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE attempt <> 1"); got != 0 {
		t.Fatalf("%d jobs ran more than once", got)
	}
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_ledger"); got != n {
		t.Fatalf("%d ledger rows for %d jobs", got, n)
	}
	if got := count(t, d.Bun, "SELECT count(DISTINCT split_part(worker_claim, '/', 1)) FROM sa_job"); got != 2 {
		t.Fatalf("work was spread over %d worker processes, want 2", got)
	}
	a.stop()
	b.stop()
}

// A worker killed with SIGKILL in the middle of a job: another worker finishes it after the
// heartbeat goes stale, and exactly one response exists.
func TestKilledWorkerJobFinishesElsewhere(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	svc, v := submitter(t, d)
	env := map[string]string{"ASTERION_WORKERS": "2", "ASTERION_HEARTBEAT_INTERVAL": "200ms",
		"ASTERION_STALE_AFTER": "2s", "ASTERION_RECLAIM_EVERY": "1s"}
	a := startWorker(t, d.URL.String(), env)
	sub, err := svc.Submit(context.Background(), jobs.SubmitRequest{Viewer: v, Prompt: "long one #sim:latency=3s"})
	if err != nil {
		t.Fatal(err)
	}
	dbtest.WaitFor(t, 30*time.Second, "the first worker to claim the job", func() bool {
		return count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE id = ? AND state = 'running'", sub.JobID) == 1
	})
	// A heartbeat after the claim shows the execution under way: the kill lands mid-call.
	dbtest.WaitFor(t, 30*time.Second, "the first worker to beat for the job", func() bool {
		return count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE id = ? AND state = 'running' AND running_heartbeat_at > started_at", sub.JobID) == 1
	})
	a.kill()
	b := startWorker(t, d.URL.String(), env)
	// The leader's periodic reclaim may act, or an operator runs it once; either is safe.
	dbtest.WaitFor(t, 20*time.Second, "the heartbeat to go stale", func() bool {
		return count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE id = ? AND (state <> 'running' OR running_heartbeat_at < now() - interval '2 seconds')", sub.JobID) == 1
	})
	r := runBinary(t, map[string]string{"DATABASE_URL": d.URL.String(), "ASTERION_STALE_AFTER": "2s"}, "", "reclaim-stuck-jobs", "--json")
	if r.code != 0 {
		t.Fatalf("reclaim-stuck-jobs exit %d: %s", r.code, r.stderr)
	}
	dbtest.WaitFor(t, 60*time.Second, "the job to succeed on the second worker", func() bool {
		return count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE id = ? AND state = 'succeeded'", sub.JobID) == 1
	})
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_entity WHERE kind = 'response'"); got != 1 {
		t.Fatalf("%d responses, want exactly 1", got)
	}
	if got := count(t, d.Bun, "SELECT attempt FROM sa_job WHERE id = ?", sub.JobID); got != 2 {
		t.Fatalf("attempt %d, want 2 (one crash, one success)", got)
	}
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_audit WHERE action = 'job.reclaimed' AND subject_id = ?", sub.JobID.String()); got != 1 {
		t.Fatalf("%d reclaim audit rows, want 1", got)
	}
	b.stop()
}

// run-worker --once works what is due, up to the batch size, then exits; --priority-ceiling
// leaves jobs above it alone.
func TestRunWorkerOnceWithCeiling(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	svc, v := submitter(t, d)
	for i, p := range []int{5, 20, 40, 90, 95} {
		prio := p
		if _, err := svc.Submit(context.Background(), jobs.SubmitRequest{Viewer: v, Prompt: fmt.Sprintf("once %d #sim:latency=10ms", i), Priority: &prio}); err != nil {
			t.Fatal(err)
		}
	}
	r := runBinary(t, map[string]string{"DATABASE_URL": d.URL.String()}, "", "run-worker", "--once", "--batch-size=10", "--priority-ceiling=50", "--json")
	if r.code != 0 {
		t.Fatalf("run-worker --once exit %d: %s", r.code, r.stderr)
	}
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE state = 'succeeded' AND priority <= 50"); got != 3 {
		t.Fatalf("%d jobs at or under the ceiling succeeded, want 3", got)
	}
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE state = 'queued' AND priority > 50"); got != 2 {
		t.Fatalf("%d jobs above the ceiling still queued, want 2", got)
	}
	r = runBinary(t, map[string]string{"DATABASE_URL": d.URL.String()}, "", "run-worker", "--once", "--batch-size=1")
	if r.code != 0 {
		t.Fatalf("run-worker --once exit %d: %s", r.code, r.stderr)
	}
	if got := count(t, d.Bun, "SELECT count(*) FROM sa_job WHERE state = 'succeeded'"); got != 4 {
		t.Fatalf("after a batch of 1, %d jobs succeeded, want 4", got)
	}
}
