package fairshare_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/fairshare"
	"asterion/jobs/jobstest"
)

// TestDispatchPlans: on a database holding a backlog (org A's 1000 jobs at priority 0, org C's
// 300 scheduled for later), whether the planner's statistics last saw an empty queue or the
// backlog, the fast path's one statement and the locked path's org list and candidate read no
// job or vehicle table whole and walk no backlog: every scan of sa_job reads at most a head of
// 64 entries per loop, C's scheduled jobs included.
func TestDispatchPlans(t *testing.T) {
	t.Parallel()
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	vc := e.otherOrg()
	analyze := func() {
		if _, err := e.D.Bun.ExecContext(ctx, "ANALYZE sa_job, river_job, sa_org_share"); err != nil {
			t.Fatal(err)
		}
	}
	analyze()
	a := submitMany(t, e, e.V, 1000, "org A's backlog", priority(0))
	later := func(r *jobs.SubmitRequest) { at := time.Now().Add(time.Hour); r.ScheduledFor = &at }
	submitMany(t, e, vc, 300, "org C's later work", later)
	mid := e.Job(a[500].JobID)
	v := vehicleOf(t, e, mid.ID)
	first := vehicleOf(t, e, a[0].JobID)
	statements := []struct {
		name string
		sql  string
		args []any
	}{
		{"fast path", fairshare.VehicleJobSQL, []any{v.ID, v.Args.Job, 100, 0}},
		{"fast path, the org's oldest job", fairshare.VehicleJobSQL, []any{first.ID, first.Args.Job, 100, 0}},
		{"orgs with queued work", fairshare.QueuedOrgsSQL, []any{v.ID, jobs.QueuePrompts, e.O}},
		{"own org's better job", fairshare.CandidatesSQL, []any{e.O, mid.Priority, mid.CreatedAt, 100}},
		{"another org's best job", fairshare.CandidatesSQL, []any{vc.OrgID, 100, time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), 100}},
		{"a refused job to pass a slot on to", fairshare.RefusedSQL, []any{e.O}},
	}
	explain := func(q interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}, name, query string, args []any) planNode {
		var raw []byte
		if err := q.QueryRowContext(ctx, "EXPLAIN (ANALYZE, FORMAT JSON) "+query, args...).Scan(&raw); err != nil {
			t.Fatalf("explain %s: %v", name, err)
		}
		var plans []struct{ Plan planNode }
		if err := json.Unmarshal(raw, &plans); err != nil || len(plans) != 1 {
			t.Fatalf("read the plan of %s: %v", name, err)
		}
		return plans[0].Plan
	}
	for _, stats := range []string{"stale", "fresh"} {
		if stats == "fresh" {
			analyze()
		}
		for _, st := range statements {
			if !explain(e.D.Bun.DB, st.name, st.sql, st.args).check(t, stats+" statistics, "+st.name) {
				logPlan(t, e, st.sql, st.args)
			}
		}
	}

	// The band index walks every org's queued jobs in River's order; an org's head is in
	// idx_job_queued_org. Which of the two the planner takes must not hang on its statistics:
	// with the org index gone (in a transaction rolled back), no read of the dispatch may use the
	// band index at all.
	tx, err := e.D.Bun.DB.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "DROP INDEX idx_job_queued_org"); err != nil {
		t.Fatal(err)
	}
	for _, st := range statements {
		if ix := explain(tx, st.name, st.sql, st.args).indexes()["idx_job_queued_band"]; ix {
			t.Errorf("without idx_job_queued_org, %s walks idx_job_queued_band", st.name)
		}
	}
}

// indexes names the indexes the plan under n scans.
func (n planNode) indexes() map[string]bool {
	out := map[string]bool{}
	var walk func(planNode)
	walk = func(n planNode) {
		if n.Index != "" {
			out[n.Index] = true
		}
		for _, c := range n.Plans {
			walk(c)
		}
	}
	walk(n)
	return out
}

// planNode is a node of EXPLAIN (ANALYZE, FORMAT JSON).
type planNode struct {
	NodeType      string     `json:"Node Type"`
	Relation      string     `json:"Relation Name"`
	Index         string     `json:"Index Name"`
	ActualRows    float64    `json:"Actual Rows"`
	RemovedFilter float64    `json:"Rows Removed by Filter"`
	Plans         []planNode `json:"Plans"`
}

// check fails the test for a scan of the job or vehicle table that reads it whole, or an index
// scan that reads more than a head of entries per loop.
func (n planNode) check(t *testing.T, what string) bool {
	t.Helper()
	ok := true
	switch {
	case n.NodeType == "Seq Scan" && (n.Relation == "sa_job" || n.Relation == "river_job"):
		t.Errorf("%s: %s on %s", what, n.NodeType, n.Relation)
		ok = false
	case strings.Contains(n.NodeType, "Index") && n.ActualRows+n.RemovedFilter > 70:
		t.Errorf("%s: %s of %s using %s read %.0f rows per loop", what, n.NodeType, n.Relation, n.Index,
			n.ActualRows+n.RemovedFilter)
		ok = false
	}
	for _, c := range n.Plans {
		ok = c.check(t, what) && ok
	}
	return ok
}

// logPlan logs the plan of query as text, to explain a failed check.
func logPlan(t *testing.T, e *tenv, query string, args []any) {
	t.Helper()
	rows, err := e.D.Bun.DB.QueryContext(context.Background(), "EXPLAIN (ANALYZE) "+query, args...)
	if err != nil {
		t.Logf("explain: %v", err)
		return
	}
	defer rows.Close()
	for rows.Next() {
		var line string
		if rows.Scan(&line) == nil {
			t.Log(line)
		}
	}
}
