// Package jobstest holds what the tests of jobs and of its owner packages (chain, delivery)
// share: a test database, a service and read models over it with the tests' defaults, orgs
// and users written straight to the database, submits, a started worker pool stopped with the
// test, a condition poll, and checks of the deferred-operation documents.
package jobstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"

	"asterion/db/dbtest"
	"asterion/jobs"
	"asterion/jobs/deferred"
)

// RandName is prefix with a random suffix, for names that must not collide between tests.
func RandName(prefix string) string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return prefix + "-" + hex.EncodeToString(b)
}

// CreateOrgUser inserts an org and one user of role in it.
func CreateOrgUser(t testing.TB, b *bun.DB, role string) (org, user int64) {
	t.Helper()
	if err := b.QueryRowContext(context.Background(), "INSERT INTO orgs (name) VALUES (?) RETURNING id",
		RandName("org")).Scan(&org); err != nil {
		t.Fatalf("insert org: %v", err)
	}
	return org, CreateUser(t, b, org, role)
}

// CreateUser inserts a user of role into org.
func CreateUser(t testing.TB, b *bun.DB, org int64, role string) (user int64) {
	t.Helper()
	if err := b.QueryRowContext(context.Background(), "INSERT INTO users (org_id, name, role) VALUES (?, ?, ?) RETURNING id",
		org, RandName("user"), role).Scan(&user); err != nil {
		t.Fatalf("insert user: %v", err)
	}
	return user
}

// NewRuntime builds a worker pool over pool that is not started yet; the test's cleanup stops
// it. opts adjust its configuration.
func NewRuntime(t testing.TB, pool *pgxpool.Pool, svc *jobs.Service, workers int, opts ...func(*jobs.RuntimeConfig)) *jobs.Runtime {
	t.Helper()
	cfg := jobs.RuntimeConfig{Pool: pool, Workers: workers, PriorityCeiling: -1, ReclaimEvery: time.Hour}
	for _, o := range opts {
		o(&cfg)
	}
	rt, err := jobs.NewRuntime(svc, cfg)
	if err != nil {
		t.Fatalf("NewRuntime: %v", err)
	}
	t.Cleanup(func() {
		if err := rt.Stop(context.Background(), 500*time.Millisecond); err != nil {
			t.Logf("stop runtime %s: %v", rt.ID(), err)
		}
	})
	return rt
}

// StartRuntime builds and starts a worker pool; the test's cleanup stops it.
func StartRuntime(t testing.TB, pool *pgxpool.Pool, svc *jobs.Service, workers int, opts ...func(*jobs.RuntimeConfig)) *jobs.Runtime {
	t.Helper()
	rt := NewRuntime(t, pool, svc, workers, opts...)
	if err := rt.Start(context.Background()); err != nil {
		t.Fatalf("start runtime: %v", err)
	}
	return rt
}

// WaitFor is dbtest.WaitFor, named here too so that a test of jobs needs one helper import.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	dbtest.WaitFor(t, timeout, what, cond)
}

// ValidStatusDoc checks doc against deferred-operation-status.v1 and returns it as JSON fields.
func ValidStatusDoc(t testing.TB, doc deferred.StatusDoc) map[string]any {
	t.Helper()
	return valid(t, doc, "status", deferred.ValidateStatus)
}

// ValidHandleDoc checks h against deferred-operation.v1 and returns it as JSON fields.
func ValidHandleDoc(t testing.TB, h deferred.Handle) map[string]any {
	t.Helper()
	return valid(t, h, "handle", deferred.ValidateHandle)
}

func valid(t testing.TB, v any, what string, check func([]byte) error) map[string]any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %s: %v", what, err)
	}
	if err := check(raw); err != nil {
		t.Fatalf("%s document does not validate: %v\n%s", what, err, raw)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}
