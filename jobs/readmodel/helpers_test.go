package readmodel_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
	"asterion/jobs/readmodel"
)

// tenv is one test's database, org, users, service and read models.
type tenv struct {
	t  testing.TB
	d  *dbtest.DB
	s  *jobs.Service
	r  *readmodel.Reads
	o  int64       // the org
	u  int64       // a member of the org
	v  jobs.Viewer // the member's view
	op jobs.Viewer // an operator's view of the org
}

// newEnv makes a fresh database with one org, a member and an operator, a service over prov
// and the read models over it.
func newEnv(t testing.TB, prov provider.Provider, mods ...func(*jobs.Config)) *tenv {
	t.Helper()
	d := jobstest.NewDB(t)
	org, user := createOrgUser(t, d.Bun, "member")
	opUser := createUser(t, d.Bun, org, "operator")
	e := &tenv{t: t, d: d, o: org, u: user,
		v:  jobs.Viewer{OrgID: org, UserID: user},
		op: jobs.Viewer{OrgID: org, UserID: opUser, OrgWide: true}}
	e.s = jobstest.NewService(t, d, prov, mods...)
	e.r = jobstest.NewReads(t, e.s)
	return e
}

func instantSim() provider.Provider { return jobstest.InstantSim() }

func createOrgUser(t testing.TB, b *bun.DB, role string) (org, user int64) {
	return jobstest.CreateOrgUser(t, b, role)
}

func createUser(t testing.TB, b *bun.DB, org int64, role string) (user int64) {
	return jobstest.CreateUser(t, b, org, role)
}

// startRuntime builds and starts a worker pool of the env's service; the test's cleanup stops it.
func startRuntime(t testing.TB, e *tenv, svc *jobs.Service, workers int) *jobs.Runtime {
	return jobstest.StartRuntime(t, e.d.Pool, svc, workers)
}

// submit submits text as the env's member and fails the test on error.
func (e *tenv) submit(text string, mods ...func(*jobs.SubmitRequest)) jobs.Submitted {
	e.t.Helper()
	return jobstest.Submit(e.t, e.s, e.v, text, mods...)
}

// job reads a job row.
func (e *tenv) job(id uuid.UUID) db.Job {
	e.t.Helper()
	return jobstest.Job(e.t, e.d, id)
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	jobstest.WaitFor(t, timeout, what, cond)
}
