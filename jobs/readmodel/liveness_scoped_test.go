package readmodel_test

import (
	"context"
	"testing"

	"asterion/jobs"
	"asterion/jobs/jobstest"
)

// TestWorkerLivenessScopedToOrg: an operator sees worker liveness from their own org's jobs (and
// the leader lease) only: another org's running or finished jobs are no sign of life to them,
// while an admin sees every org's.
func TestWorkerLivenessScopedToOrg(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	otherOrg, otherUser := jobstest.CreateOrgUser(t, e.D.Bun, "operator")
	other := jobs.Viewer{OrgID: otherOrg, UserID: otherUser, OrgWide: true}
	admin := jobs.Viewer{OrgID: otherOrg, UserID: otherUser, OrgWide: true, AllOrgs: true}
	// No worker ever ran: nobody sees a sign of life.
	for _, v := range []jobs.Viewer{e.Op, other, admin} {
		if l, err := e.R.WorkerLivenessFor(ctx, v); err != nil || l.Alive || l.LastSeen != nil {
			t.Fatalf("liveness of %+v without workers: %+v %v", v, l, err)
		}
	}
	// A job of e's org runs, with a fresh heartbeat, as a worker would leave it.
	sub := e.Submit("alive?")
	if _, err := e.D.Bun.ExecContext(ctx, "UPDATE sa_job SET state = 'running', worker_claim = 'w', running_heartbeat_at = now() WHERE id = ?", sub.JobID); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		v     jobs.Viewer
		alive bool
	}{{"the job's org", e.Op, true}, {"another org", other, false}, {"an admin", admin, true}} {
		l, err := e.R.WorkerLivenessFor(ctx, tc.v)
		if err != nil || l.Alive != tc.alive {
			t.Errorf("%s: liveness %+v %v, want alive=%v", tc.name, l, err, tc.alive)
		}
		if !tc.v.AllOrgs && l.LeaderID != "" {
			t.Errorf("%s sees the leader id %q", tc.name, l.LeaderID)
		}
	}
}
