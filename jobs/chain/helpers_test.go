package chain_test

import (
	"testing"

	"asterion/jobs"
	"asterion/jobs/chain"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

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
