package readmodel_test

import (
	"testing"

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
