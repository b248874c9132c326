package main

// What a job costs the database, read from PostgreSQL's own counters around a phase:
// pg_stat_statements for the statements the server ran (their count and execution time) and
// pg_stat_user_tables for the rows written, from which the index entries written follow. The
// bench's own reads (the probe's counts, its VACUUM) run as a role of their own and are not
// counted.

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// probeRole is the role the bench's probes connect as, so that pg_stat_statements tells their
// statements from the servers'.
const probeRole = "asterion_bench_probe"

// statsFlushWait is how long a backend may keep its table counters before reporting them
// (PostgreSQL flushes an idle backend's pending statistics within ten seconds).
const statsFlushWait = 11 * time.Second

// prepareCostCounters creates the pg_stat_statements view in the database at dbURL and the
// probe's role, and returns the URL the probe connects with. It fails when the server did not
// load pg_stat_statements (a shared server rarely does): the bench then runs without the cost
// figures.
func prepareCostCounters(ctx context.Context, dbURL string) (string, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", fmt.Errorf("connect %s: %w", dbURL, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `DO $$ BEGIN
	IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '`+probeRole+`') THEN CREATE ROLE `+probeRole+` LOGIN SUPERUSER; END IF;
END $$`); err != nil {
		return "", fmt.Errorf("create the probe's role: %w", err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		return "", fmt.Errorf("parse %s: %w", dbURL, err)
	}
	u.User = url.User(probeRole)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		return u.String(), fmt.Errorf("create pg_stat_statements: %w", err)
	}
	if _, err := conn.Exec(ctx, "SELECT count(*) FROM pg_stat_statements"); err != nil {
		return u.String(), fmt.Errorf("read pg_stat_statements: %w", err)
	}
	return u.String(), nil
}

// stmtCounter is one statement's cumulative counters.
type stmtCounter struct {
	Query string
	Calls int64
	Ms    float64
	Rows  int64
}

// tableCounter is one table's cumulative row counters and the number of its indexes (and of
// those that are partial).
type tableCounter struct {
	Inserted, Updated, HotUpdated int64
	Indexes, Partial              int
}

// costSnapshot is the database's counters at one moment.
type costSnapshot struct {
	stmts  map[int64]stmtCounter
	tables map[string]tableCounter
}

// statementsSQL reads the statements the servers ran in the current database (every role but
// the probe's).
const statementsSQL = `SELECT queryid, query, calls, total_exec_time, rows FROM pg_stat_statements s
JOIN pg_roles r ON r.oid = s.userid
WHERE s.dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND r.rolname <> $1 AND s.toplevel`

// tablesSQL reads the row counters of every user table and how many indexes it has.
const tablesSQL = `SELECT t.relname, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd,
       count(i.indexrelid)::int, count(i.indexrelid) FILTER (WHERE i.indpred IS NOT NULL)::int
FROM pg_stat_user_tables t LEFT JOIN pg_index i ON i.indrelid = t.relid
GROUP BY t.relname, t.n_tup_ins, t.n_tup_upd, t.n_tup_hot_upd`

// snapshotCost reads the counters through the probe's pool.
func snapshotCost(ctx context.Context, pool *pgxpool.Pool) (costSnapshot, error) {
	s := costSnapshot{stmts: map[int64]stmtCounter{}, tables: map[string]tableCounter{}}
	rows, err := pool.Query(ctx, statementsSQL, probeRole)
	if err != nil {
		return s, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	for rows.Next() {
		var id int64
		var c stmtCounter
		if err := rows.Scan(&id, &c.Query, &c.Calls, &c.Ms, &c.Rows); err != nil {
			rows.Close()
			return s, fmt.Errorf("read pg_stat_statements: %w", err)
		}
		s.stmts[id] = c
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("read pg_stat_statements: %w", err)
	}
	rows, err = pool.Query(ctx, tablesSQL)
	if err != nil {
		return s, fmt.Errorf("read pg_stat_user_tables: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var name string
		var c tableCounter
		if err := rows.Scan(&name, &c.Inserted, &c.Updated, &c.HotUpdated, &c.Indexes, &c.Partial); err != nil {
			return s, fmt.Errorf("read pg_stat_user_tables: %w", err)
		}
		s.tables[name] = c
	}
	return s, rows.Err()
}

// stepCost is what the statements of one step of a job's life cost, per job.
type stepCost struct {
	Statements float64 `json:"statements_per_job"`
	Ms         float64 `json:"ms_per_job"`
}

// stmtCost is one statement's share of a phase, per job.
type stmtCost struct {
	Step   string  `json:"step"`
	Query  string  `json:"query"`
	Calls  float64 `json:"calls_per_job"`
	Ms     float64 `json:"ms_per_job"`
	MeanMs float64 `json:"mean_ms"`
}

// tableWrites is one table's rows and index entries written per job.
type tableWrites struct {
	Table          string  `json:"table"`
	Rows           float64 `json:"rows_per_job"`
	IndexEntries   float64 `json:"index_entries_per_job"`
	PartialEntries float64 `json:"partial_index_entries_at_most_per_job"`
}

// dbCostResult is what a phase's jobs cost the database, per job.
type dbCostResult struct {
	Phase string `json:"phase"`
	Jobs  int    `json:"jobs"`
	// Life is every statement of the phase; Steps splits it by the step of a job's life each
	// statement belongs to (submit, claim, finish, other).
	Life  stepCost            `json:"life"`
	Steps map[string]stepCost `json:"steps"`
	// IndexEntries is the index entries written per job into indexes that are not partial:
	// each inserted row and each update that was not HOT writes one entry into every index of
	// its table. PartialEntries is the most the same rows wrote into partial indexes (a row
	// writes into one only when its new version matches the predicate).
	IndexEntries   float64       `json:"index_entries_per_job"`
	PartialEntries float64       `json:"partial_index_entries_at_most_per_job"`
	Tables         []tableWrites `json:"tables"`
	Statements     []stmtCost    `json:"statements"`
}

// measureCost runs phase (which returns how many jobs it ran) between two snapshots of the
// counters of the database pool reads, and returns its cost per job; with no statement
// statistics it runs the phase and returns nil.
func measureCost(ctx context.Context, pool *pgxpool.Pool, name string, classify func(string) string, phase func() (int, error)) (*dbCostResult, error) {
	time.Sleep(statsFlushWait)
	before, err := snapshotCost(ctx, pool)
	if err != nil {
		fmt.Fprintln(os.Stderr, "warning: no database cost figures:", err)
		_, err := phase()
		return nil, err
	}
	jobs, err := phase()
	if err != nil {
		return nil, err
	}
	time.Sleep(statsFlushWait)
	after, err := snapshotCost(ctx, pool)
	if err != nil || jobs <= 0 {
		return nil, err
	}
	return diffCost(name, jobs, before, after, classify), nil
}

// diffCost is the cost per job of the jobs run between two snapshots.
func diffCost(name string, jobs int, before, after costSnapshot, classify func(string) string) *dbCostResult {
	r := &dbCostResult{Phase: name, Jobs: jobs, Steps: map[string]stepCost{}}
	n := float64(jobs)
	for id, a := range after.stmts {
		b := before.stmts[id]
		calls, ms := a.Calls-b.Calls, a.Ms-b.Ms
		if calls <= 0 {
			continue
		}
		step := classify(a.Query)
		sc := r.Steps[step]
		sc.Statements += float64(calls) / n
		sc.Ms += ms / n
		r.Steps[step] = sc
		r.Life.Statements += float64(calls) / n
		r.Life.Ms += ms / n
		r.Statements = append(r.Statements, stmtCost{Step: step, Query: oneLine(a.Query), Calls: float64(calls) / n, Ms: ms / n, MeanMs: ms / float64(calls)})
	}
	slices.SortFunc(r.Statements, func(x, y stmtCost) int {
		switch {
		case x.Ms > y.Ms:
			return -1
		case x.Ms < y.Ms:
			return 1
		}
		return 0
	})
	for name, a := range after.tables {
		b := before.tables[name]
		rows := float64(a.Inserted - b.Inserted + a.Updated - b.Updated)
		written := float64(a.Inserted - b.Inserted + (a.Updated - b.Updated) - (a.HotUpdated - b.HotUpdated))
		entries, partial := written*float64(a.Indexes-a.Partial), written*float64(a.Partial)
		if rows <= 0 {
			continue
		}
		r.IndexEntries += entries / n
		r.PartialEntries += partial / n
		r.Tables = append(r.Tables, tableWrites{Table: name, Rows: rows / n, IndexEntries: entries / n, PartialEntries: partial / n})
	}
	slices.SortFunc(r.Tables, func(x, y tableWrites) int {
		switch {
		case x.IndexEntries > y.IndexEntries:
			return -1
		case x.IndexEntries < y.IndexEntries:
			return 1
		}
		return 0
	})
	return r
}

// oneLine squeezes a statement's text onto one line, at most 160 characters.
func oneLine(q string) string {
	out := make([]rune, 0, 160)
	space := false
	for _, r := range q {
		if r == '\n' || r == '\t' || r == ' ' || r == '\r' {
			space = true
			continue
		}
		if space && len(out) > 0 {
			out = append(out, ' ')
		}
		space = false
		out = append(out, r)
		if len(out) >= 160 {
			return string(out) + "…"
		}
	}
	return string(out)
}
