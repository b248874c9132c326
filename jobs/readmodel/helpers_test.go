package readmodel_test

import (
	"testing"
	"time"

	"github.com/uptrace/bun"

	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// tenv is one test's database, org, users, service and read models.
type tenv struct{ *jobstest.Env }

// newEnv makes a fresh database with one org, a member and an operator, a service over prov
// and the read models over it.
func newEnv(t testing.TB, prov provider.Provider, mods ...func(*jobs.Config)) *tenv {
	t.Helper()
	return &tenv{jobstest.NewEnv(t, prov, mods...)}
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
	return jobstest.StartRuntime(t, e.D.Pool, svc, workers)
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	jobstest.WaitFor(t, timeout, what, cond)
}
