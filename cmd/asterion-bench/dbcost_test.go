package main

import (
	"math"
	"testing"
)

func TestAsterionStepsOfTheirStatements(t *testing.T) {
	t.Parallel()
	for q, want := range map[string]string{
		`WITH b0 AS (INSERT INTO sa_entity (id) VALUES ($1)) , b3 AS (INSERT INTO sa_job (id, prompt_id) VALUES ($2, $3)) INSERT INTO sa_event (seq) VALUES ($4)`:     "submit",
		`-- name: JobInsertFastMany :many WITH raw_job_data AS (SELECT 1)`:                                                                                            "submit",
		`SELECT granted, slot, now_at, paused, metered FROM asterion_governor_reserve($1, $2, $3, $4, $5, $6)`:                                                        "claim",
		`SELECT operator_paused, greatest(extract(epoch FROM paused_until - clock_timestamp()), $2)::float8 FROM sa_governor WHERE model = $1`:                        "claim",
		`WITH moved AS (UPDATE sa_job SET state = $1, updated_at = now(), worker_claim = $2, claimed_at = now() WHERE id = $3 RETURNING *) SELECT 1`:                  "claim",
		`WITH b0 AS (UPDATE sa_operation SET kind = $1 WHERE id = $2) , b1 AS (INSERT INTO sa_operation_history (seq) VALUES ($3)) SELECT set_config($4, $5, $6)`:     "claim",
		`WITH b0 AS (UPDATE sa_operation SET kind = $1 WHERE id = $2) , b1 AS (INSERT INTO sa_event (seq) VALUES ($3)) INSERT INTO sa_audit (org_id) VALUES ($4)`:     "finish",
		`WITH b0 AS (INSERT INTO sa_entity (id) VALUES ($1)) , b2 AS (INSERT INTO sa_ledger (job_id) VALUES ($2)) , moved AS (UPDATE sa_job SET state = $3) SELECT 1`: "finish",
		`WITH a AS ( INSERT INTO sa_attempt (job_id) VALUES ($1) RETURNING org_id) INSERT INTO sa_usage_period SELECT 1`:                                              "finish",
		`WITH pending AS ( SELECT id FROM sa_event WHERE seq IS NULL ORDER BY id LIMIT $2 ) SELECT 1`:                                                                 "other",
	} {
		if got := asterionStep(q); got != want {
			t.Errorf("asterionStep(%.70q) = %s, want %s", q, got, want)
		}
	}
	for q, want := range map[string]string{
		`INSERT INTO bench_job (id, prompt_id) VALUES ($1, $2)`:                 "submit",
		`-- name: JobGetAvailable :many WITH locked_jobs AS (SELECT 1)`:         "claim",
		`-- name: JobSetStateIfRunningMany :many WITH job_input AS (SELECT 1)`:  "finish",
		`-- name: LeaderAttemptReelect :one UPDATE river_leader SET expires_at`: "other",
	} {
		if got := baselineStep(q); got != want {
			t.Errorf("baselineStep(%.70q) = %s, want %s", q, got, want)
		}
	}
}

func TestDiffCostIsPerJobBetweenSnapshots(t *testing.T) {
	t.Parallel()
	before := costSnapshot{
		stmts:  map[int64]stmtCounter{1: {Query: "INSERT INTO bench_job (id) VALUES ($1)", Calls: 10, Ms: 5}},
		tables: map[string]tableCounter{"bench_job": {Inserted: 10, Indexes: 2, Partial: 1}},
	}
	after := costSnapshot{
		stmts: map[int64]stmtCounter{
			1: {Query: "INSERT INTO bench_job (id) VALUES ($1)", Calls: 110, Ms: 55},
			2: {Query: "-- name: JobGetAvailable :many", Calls: 50, Ms: 20},
		},
		tables: map[string]tableCounter{"bench_job": {Inserted: 110, Updated: 100, HotUpdated: 40, Indexes: 2, Partial: 1}},
	}
	c := diffCost("e2e", 100, before, after, baselineStep)
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("life statements", c.Life.Statements, 1.5)
	near("life ms", c.Life.Ms, 0.7)
	near("submit ms", c.Steps["submit"].Ms, 0.5)
	near("claim statements", c.Steps["claim"].Statements, 0.5)
	// 100 inserts and 60 updates that were not HOT, into one plain and one partial index.
	near("index entries", c.IndexEntries, 1.6)
	near("partial entries", c.PartialEntries, 1.6)
	if len(c.Statements) != 2 || c.Statements[0].Ms < c.Statements[1].Ms {
		t.Errorf("statements not costliest first: %+v", c.Statements)
	}
}
