package jobs_test

import (
	"context"
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/maintenance"
	"asterion/jobs/provider"
)

// TestReclaimRunsAfterADeadLeadersPass: a leader killed while its reclaim pass ran leaves that
// pass's River job running until River's rescuer frees it, minutes later. The next leader's
// passes must not wait for it: a stale job is reclaimed by the next period's pass.
func TestReclaimRunsAfterADeadLeadersPass(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	fake := newFake(func(ctx context.Context, c call) (provider.Response, error) {
		<-ctx.Done()
		return provider.Response{}, ctx.Err()
	})
	e := newEnv(t, fake, func(c *jobs.Config) { c.HeartbeatInterval = time.Hour; c.StaleAfter = time.Minute })
	const every = 300 * time.Millisecond
	// The dead leader's pass: inserted as the periodic job inserts it, then taken as a worker
	// takes it, by a process that is gone.
	ins, err := river.NewClient(riverpgxv5.New(e.D.Pool), &river.Config{})
	if err != nil {
		t.Fatal(err)
	}
	dead, err := ins.Insert(ctx, maintenance.ReclaimArgs{}, maintenance.ReclaimInsertOpts(every))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.D.Bun.ExecContext(ctx, `UPDATE river_job SET state = 'running', attempt = 1, attempted_at = now(),
		attempted_by = '{dead-leader}' WHERE id = ?`, dead.Job.ID); err != nil {
		t.Fatal(err)
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2, func(c *jobs.RuntimeConfig) { c.ReclaimEvery = every })
	s := e.Submit("its worker dies")
	fake.waitCall(t, 10*time.Second)
	e.WaitState(s.JobID, jobs.StateRunning, 10*time.Second)
	// Its worker died: the heartbeat stopped long ago.
	if _, err := e.D.Bun.ExecContext(ctx, `UPDATE sa_job SET running_heartbeat_at = now() - interval '10 minutes'
		WHERE id = ?`, s.JobID); err != nil {
		t.Fatal(err)
	}
	jobstest.WaitFor(t, 20*time.Second, "the stale job reclaimed by the new leader's pass", func() bool {
		return e.Job(s.JobID).Attempt == 2
	})
	if st := e.RiverState(dead.Job.ID); st != "running" {
		t.Fatalf("the dead leader's pass is %s; the test wants it still running, as River leaves it", st)
	}
}
