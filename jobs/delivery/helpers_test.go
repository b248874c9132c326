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

// settled waits until every delivery's ledger row is settled (no longer accepted, retryable or
// in flight, so no execution will send it) and two more rounds of the leader's recovery have
// finished. From then on nothing but a bug can send a request: "nothing more arrives" is
// asserted after that known event instead of after a sleep.
func (e *tenv) settled() {
	e.T.Helper()
	const rounds = "SELECT count(*) FROM river_job WHERE kind = 'asterion.recover_deliveries' AND state = 'completed'"
	before := e.Count(rounds)
	jobstest.WaitFor(e.T, 30*time.Second, "every delivery settled and two more recovery rounds", func() bool {
		return e.Count("SELECT count(*) FROM sa_delivery WHERE state IN ('accepted', 'retryable', 'in_flight')") == 0 &&
			e.Count(rounds) >= before+2
	})
}
