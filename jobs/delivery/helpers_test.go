package delivery_test

import (
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/delivery"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
	"asterion/secretbox"
)

// testKey is the server secret key of every test service unless a test gives its own.
var testKey = func() secretbox.Key {
	k, _, err := secretbox.NewKey()
	if err != nil {
		panic(err)
	}
	return k
}()

// instantSim is the real sim provider without its random latency.
func instantSim() provider.Provider { return jobstest.InstantSim() }

// tenv is one test's database, org, users, service and read models (jobstest.Env), with the
// delivery owner registered on the service.
type tenv struct{ *jobstest.Env }

// newEnv makes a fresh database with one org and member, and a service over prov with the
// delivery owner configured by dcfg.
func newEnv(t testing.TB, prov provider.Provider, dcfg delivery.Config, mods ...func(*jobs.Config)) *tenv {
	t.Helper()
	e := &tenv{jobstest.NewEnv(t, prov, mods...)}
	e.register(e.S, dcfg)
	return e
}

// service builds another Service, with its delivery owner, over the same database (a second
// process, say).
func (e *tenv) service(prov provider.Provider, dcfg delivery.Config, mods ...func(*jobs.Config)) *jobs.Service {
	e.T.Helper()
	s := jobstest.NewService(e.T, e.D, prov, mods...)
	e.register(s, dcfg)
	return s
}

// register builds the delivery owner configured by dcfg on s.
func (e *tenv) register(s *jobs.Service, dcfg delivery.Config) {
	e.T.Helper()
	dcfg.Jobs = s
	if dcfg.SecretKey == nil {
		dcfg.SecretKey = secretbox.Static(testKey)
	}
	if _, err := delivery.New(dcfg); err != nil {
		e.T.Fatalf("delivery.New: %v", err)
	}
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
