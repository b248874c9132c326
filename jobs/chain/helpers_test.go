package chain_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs"
	"asterion/jobs/chain"
	"asterion/jobs/deferred"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// These helpers are the jobs tests' own, with the chain owner registered on the service.

// discard is the logger of every test service: tests assert on rows, not log lines.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// fastWait keeps the backoff recorded on the row but lets the vehicle run again almost at once.
func fastWait(time.Duration) time.Duration { return 10 * time.Millisecond }

// instantSim is the real sim provider without its random latency.
func instantSim() provider.Provider { return provider.NewSim(provider.SimConfig{}) }

// tenv is one test's database, org, users, service and chain owner.
type tenv struct {
	t  testing.TB
	d  *dbtest.DB
	s  *jobs.Service
	c  *chain.Chains
	o  int64       // the org
	u  int64       // a member of the org
	v  jobs.Viewer // the member's view
	op jobs.Viewer // an operator's view of the org
}

// newEnv makes a fresh database with one org and member, and a service over prov with the
// chain owner registered.
func newEnv(t testing.TB, prov provider.Provider) *tenv {
	t.Helper()
	d := dbtest.New(t)
	if _, err := d.Bun.ExecContext(context.Background(),
		"DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = off', current_database()); END $$"); err != nil {
		t.Fatalf("relax test database durability: %v", err)
	}
	org, user := createOrgUser(t, d.Bun, "member")
	opUser := createUser(t, d.Bun, org, "operator")
	e := &tenv{t: t, d: d, o: org, u: user,
		v:  jobs.Viewer{OrgID: org, UserID: user},
		op: jobs.Viewer{OrgID: org, UserID: opUser, OrgWide: true}}
	s, err := jobs.NewService(jobs.Config{DB: d.Bun, Provider: prov, Logger: discard, HeartbeatInterval: 50 * time.Millisecond,
		Wait: fastWait})
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	c, err := chain.New(chain.Config{Jobs: s})
	if err != nil {
		t.Fatalf("chain.New: %v", err)
	}
	e.s, e.c = s, c
	return e
}

// createOrgUser inserts an org and one user of role in it.
func createOrgUser(t testing.TB, b *bun.DB, role string) (org, user int64) {
	return jobstest.CreateOrgUser(t, b, role)
}

// createUser inserts a user of role into org.
func createUser(t testing.TB, b *bun.DB, org int64, role string) (user int64) {
	return jobstest.CreateUser(t, b, org, role)
}

// runtimeOpts adjust a RuntimeConfig.
type runtimeOpt = func(*jobs.RuntimeConfig)

// startRuntime builds and starts a runtime; the test's cleanup stops it.
func startRuntime(t testing.TB, e *tenv, svc *jobs.Service, workers int, opts ...runtimeOpt) *jobs.Runtime {
	return jobstest.StartRuntime(t, e.d.Pool, svc, workers, opts...)
}

// waitFor polls cond every 10 ms until it holds or timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	jobstest.WaitFor(t, timeout, what, cond)
}

// job reads a job row.
func (e *tenv) job(id uuid.UUID) db.Job {
	e.t.Helper()
	var j db.Job
	if err := e.d.Bun.NewSelect().Model(&j).Where("id = ?", id).Scan(context.Background()); err != nil {
		e.t.Fatalf("read job %s: %v", id, err)
	}
	return j
}

// operation reads a registry row.
func (e *tenv) operation(id uuid.UUID) db.Operation {
	e.t.Helper()
	var op db.Operation
	if err := e.d.Bun.NewSelect().Model(&op).Where("id = ?", id).Scan(context.Background()); err != nil {
		e.t.Fatalf("read operation %s: %v", id, err)
	}
	return op
}

// history reads an operation's status history, oldest first.
func (e *tenv) history(id uuid.UUID) []db.OperationHistory {
	e.t.Helper()
	var rows []db.OperationHistory
	if err := e.d.Bun.NewSelect().Model(&rows).Where("operation_id = ?", id).OrderExpr("seq").
		Scan(context.Background()); err != nil {
		e.t.Fatalf("read history of %s: %v", id, err)
	}
	return rows
}

// count runs a SELECT count(*) … query.
func (e *tenv) count(query string, args ...any) int {
	e.t.Helper()
	var n int
	if err := e.d.Bun.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		e.t.Fatalf("count %q: %v", query, err)
	}
	return n
}

// waitState waits until the job is in state.
func (e *tenv) waitState(id uuid.UUID, st jobs.State, timeout time.Duration) db.Job {
	e.t.Helper()
	var j db.Job
	waitFor(e.t, timeout, fmt.Sprintf("job %s to be %s", id, st), func() bool {
		j = e.job(id)
		return j.State == string(st)
	})
	return j
}

func validStatusDoc(t testing.TB, doc deferred.StatusDoc) map[string]any {
	return jobstest.ValidStatusDoc(t, doc)
}

func validHandleDoc(t testing.TB, h deferred.Handle) map[string]any {
	return jobstest.ValidHandleDoc(t, h)
}

// historyStatuses lists the statuses of an operation's history.
func (e *tenv) historyStatuses(id uuid.UUID) []string {
	var out []string
	for _, h := range e.history(id) {
		out = append(out, h.Status)
	}
	return out
}
