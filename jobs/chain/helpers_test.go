package chain_test

import (
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/chain"
	"asterion/jobs/deferred"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// instantSim is the real sim provider without its random latency.
func instantSim() provider.Provider { return jobstest.InstantSim() }

// tenv is one test's database, org, users, service and read models (jobstest.Env), with the
// chain owner registered on the service.
type tenv struct {
	*jobstest.Env
	c *chain.Chains
}

// newEnv makes a fresh database with one org and member, and a service over prov with the
// chain owner registered.
func newEnv(t testing.TB, prov provider.Provider, mods ...func(*jobs.Config)) *tenv {
	t.Helper()
	e := &tenv{Env: jobstest.NewEnv(t, prov, mods...)}
	c, err := chain.New(chain.Config{Jobs: e.S})
	if err != nil {
		t.Fatalf("chain.New: %v", err)
	}
	e.c = c
	return e
}

// runtimeOpts adjust a RuntimeConfig.
type runtimeOpt = func(*jobs.RuntimeConfig)

// startRuntime builds and starts a runtime; the test's cleanup stops it.
func startRuntime(t testing.TB, e *tenv, svc *jobs.Service, workers int, opts ...runtimeOpt) *jobs.Runtime {
	return jobstest.StartRuntime(t, e.D.Pool, svc, workers, opts...)
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	jobstest.WaitFor(t, timeout, what, cond)
}

func validStatusDoc(t testing.TB, doc deferred.StatusDoc) map[string]any {
	return jobstest.ValidStatusDoc(t, doc)
}

func validHandleDoc(t testing.TB, h deferred.Handle) map[string]any {
	return jobstest.ValidHandleDoc(t, h)
}
