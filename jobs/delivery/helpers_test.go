package delivery_test

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
	"asterion/jobs/delivery"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
	"asterion/secretbox"
)

// These helpers are the jobs tests' own, with the delivery owner registered on every service.

// discard is the logger of every test service: tests assert on rows, not log lines.
var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// testKey is the server secret key of every test service unless a test gives its own.
var testKey = func() secretbox.Key {
	k, _, err := secretbox.NewKey()
	if err != nil {
		panic(err)
	}
	return k
}()

// fastWait keeps the backoff recorded on the row but lets the vehicle run again almost at once.
func fastWait(time.Duration) time.Duration { return 10 * time.Millisecond }

// instantSim is the real sim provider without its random latency.
func instantSim() provider.Provider { return provider.NewSim(provider.SimConfig{}) }

// tenv is one test's database, org, users and service.
type tenv struct {
	t  testing.TB
	d  *dbtest.DB
	s  *jobs.Service
	o  int64       // the org
	u  int64       // a member of the org
	v  jobs.Viewer // the member's view
	op jobs.Viewer // an operator's view of the org
}

// newEnv makes a fresh database with one org and member, and a service over prov with the
// delivery owner configured by dcfg.
func newEnv(t testing.TB, prov provider.Provider, dcfg delivery.Config, mods ...func(*jobs.Config)) *tenv {
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
	e.s = e.service(prov, dcfg, mods...)
	return e
}

// service builds another Service, with its delivery owner, over the same database (a second
// process, say).
func (e *tenv) service(prov provider.Provider, dcfg delivery.Config, mods ...func(*jobs.Config)) *jobs.Service {
	e.t.Helper()
	cfg := jobs.Config{DB: e.d.Bun, Provider: prov, Logger: discard, HeartbeatInterval: 50 * time.Millisecond,
		Wait: fastWait}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := jobs.NewService(cfg)
	if err != nil {
		e.t.Fatalf("NewService: %v", err)
	}
	dcfg.Jobs = s
	if dcfg.SecretKey == nil {
		dcfg.SecretKey = secretbox.Static(testKey)
	}
	if _, err := delivery.New(dcfg); err != nil {
		e.t.Fatalf("delivery.New: %v", err)
	}
	return s
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

// submit submits text as the env's member and fails the test on error.
func (e *tenv) submit(text string, mods ...func(*jobs.SubmitRequest)) jobs.Submitted {
	e.t.Helper()
	req := jobs.SubmitRequest{Viewer: e.v, Prompt: text}
	for _, m := range mods {
		m(&req)
	}
	sub, err := e.s.Submit(context.Background(), req)
	if err != nil {
		e.t.Fatalf("Submit(%q): %v", text, err)
	}
	return sub
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

// riverState reads the state of a River job.
func (e *tenv) riverState(id int64) string {
	e.t.Helper()
	var st string
	if err := e.d.Bun.QueryRowContext(context.Background(), "SELECT state FROM river_job WHERE id = ?", id).Scan(&st); err != nil {
		e.t.Fatalf("read river job %d: %v", id, err)
	}
	return st
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
