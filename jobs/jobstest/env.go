package jobstest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs"
	"asterion/jobs/provider"
	"asterion/jobs/readmodel"
)

// Discard is the logger of every test service: tests assert on rows, not log lines.
var Discard = slog.New(slog.NewTextHandler(io.Discard, nil))

// FastWait keeps the backoff recorded on the row but lets the vehicle run again almost at once.
func FastWait(time.Duration) time.Duration { return 10 * time.Millisecond }

// InstantSim is the real sim provider without its random latency.
func InstantSim() provider.Provider { return provider.NewSim(provider.SimConfig{}) }

// NewDB makes a fresh test database, dropped with the test.
func NewDB(t testing.TB) *dbtest.DB {
	t.Helper()
	d := dbtest.New(t)
	// A test database needs no crash durability: commits that skip the WAL flush keep the
	// many small job transactions (and PostgreSQL's cluster-wide NOTIFY commit lock) fast.
	// Sessions opened from now on inherit it; it changes nothing the code under test can see.
	if _, err := d.Bun.ExecContext(context.Background(),
		"DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET synchronous_commit = off', current_database()); END $$"); err != nil {
		t.Fatalf("relax test database durability: %v", err)
	}
	return d
}

// NewService builds a Service over d with the tests' defaults (a 50 ms heartbeat, FastWait),
// changed by mods.
func NewService(t testing.TB, d *dbtest.DB, prov provider.Provider, mods ...func(*jobs.Config)) *jobs.Service {
	t.Helper()
	cfg := jobs.Config{DB: d.Bun, Provider: prov, Logger: Discard, HeartbeatInterval: 50 * time.Millisecond,
		Wait: FastWait}
	for _, m := range mods {
		m(&cfg)
	}
	s, err := jobs.NewService(cfg)
	if err != nil {
		t.Fatalf("NewService: %v", err)
	}
	return s
}

// NewReads builds the read models over svc's database, registry and meter.
func NewReads(t testing.TB, svc *jobs.Service) *readmodel.Reads {
	t.Helper()
	return readmodel.Of(svc)
}

// Submit submits text as v on svc, changed by mods, and fails the test on error.
func Submit(t testing.TB, svc *jobs.Service, v jobs.Viewer, text string, mods ...func(*jobs.SubmitRequest)) jobs.Submitted {
	t.Helper()
	req := jobs.SubmitRequest{Viewer: v, Prompt: text}
	for _, m := range mods {
		m(&req)
	}
	sub, err := svc.Submit(context.Background(), req)
	if err != nil {
		t.Fatalf("Submit(%q): %v", text, err)
	}
	return sub
}

// Job reads a job row.
func Job(t testing.TB, d *dbtest.DB, id uuid.UUID) db.Job {
	t.Helper()
	var j db.Job
	if err := d.Bun.NewSelect().Model(&j).Where("id = ?", id).Scan(context.Background()); err != nil {
		t.Fatalf("read job %s: %v", id, err)
	}
	return j
}

// DumpQueue logs how many jobs and River jobs are in each state, to explain a failed wait.
func DumpQueue(t testing.TB, d *dbtest.DB) {
	t.Helper()
	rows, err := d.Bun.QueryContext(context.Background(), `SELECT 'job', state, count(*) FROM sa_job GROUP BY state
		UNION ALL SELECT 'river:' || queue, state::text, count(*) FROM river_job GROUP BY queue, state ORDER BY 1, 2`)
	if err != nil {
		t.Logf("dump: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var a, b string
		var n int
		_ = rows.Scan(&a, &b, &n)
		t.Logf("%s %s: %d", a, b, n)
	}
}

// Env is one test's database, an org with a member and an operator, a service over the
// database and the read models over that service.
type Env struct {
	T  testing.TB
	D  *dbtest.DB
	S  *jobs.Service
	R  *readmodel.Reads
	O  int64       // the org
	U  int64       // a member of the org
	V  jobs.Viewer // the member's view
	Op jobs.Viewer // an operator's view of the org
}

// NewEnv makes a fresh database with one org, a member and an operator, a service over prov
// (NewService's defaults, changed by mods) and the read models over it.
func NewEnv(t testing.TB, prov provider.Provider, mods ...func(*jobs.Config)) *Env {
	t.Helper()
	d := NewDB(t)
	org, user := CreateOrgUser(t, d.Bun, "member")
	opUser := CreateUser(t, d.Bun, org, "operator")
	e := &Env{T: t, D: d, O: org, U: user,
		V:  jobs.Viewer{OrgID: org, UserID: user},
		Op: jobs.Viewer{OrgID: org, UserID: opUser, OrgWide: true}}
	e.S = NewService(t, d, prov, mods...)
	e.R = NewReads(t, e.S)
	return e
}

// Submit submits text as the env's member and fails the test on error.
func (e *Env) Submit(text string, mods ...func(*jobs.SubmitRequest)) jobs.Submitted {
	e.T.Helper()
	return Submit(e.T, e.S, e.V, text, mods...)
}

// Job reads a job row.
func (e *Env) Job(id uuid.UUID) db.Job {
	e.T.Helper()
	return Job(e.T, e.D, id)
}

// Operation reads a registry row.
func (e *Env) Operation(id uuid.UUID) db.Operation {
	e.T.Helper()
	var op db.Operation
	if err := e.D.Bun.NewSelect().Model(&op).Where("id = ?", id).Scan(context.Background()); err != nil {
		e.T.Fatalf("read operation %s: %v", id, err)
	}
	return op
}

// History reads an operation's status history, oldest first.
func (e *Env) History(id uuid.UUID) []db.OperationHistory {
	e.T.Helper()
	var rows []db.OperationHistory
	if err := e.D.Bun.NewSelect().Model(&rows).Where("operation_id = ?", id).OrderExpr("seq").
		Scan(context.Background()); err != nil {
		e.T.Fatalf("read history of %s: %v", id, err)
	}
	return rows
}

// HistoryStatuses lists the statuses of an operation's history, oldest first.
func (e *Env) HistoryStatuses(id uuid.UUID) []string {
	e.T.Helper()
	var out []string
	for _, h := range e.History(id) {
		out = append(out, h.Status)
	}
	return out
}

// Count runs a SELECT count(*) … query.
func (e *Env) Count(query string, args ...any) int {
	e.T.Helper()
	var n int
	if err := e.D.Bun.QueryRowContext(context.Background(), query, args...).Scan(&n); err != nil {
		e.T.Fatalf("count %q: %v", query, err)
	}
	return n
}

// RiverState reads the state of a River job.
func (e *Env) RiverState(id int64) string {
	e.T.Helper()
	var st string
	if err := e.D.Bun.QueryRowContext(context.Background(), "SELECT state FROM river_job WHERE id = ?", id).Scan(&st); err != nil {
		e.T.Fatalf("read river job %d: %v", id, err)
	}
	return st
}

// WaitState waits until the job is in state and returns its row.
func (e *Env) WaitState(id uuid.UUID, st jobs.State, timeout time.Duration) db.Job {
	e.T.Helper()
	var j db.Job
	WaitFor(e.T, timeout, fmt.Sprintf("job %s to be %s", id, st), func() bool {
		j = e.Job(id)
		return j.State == string(st)
	})
	return j
}
