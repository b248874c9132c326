package main

import (
	"context"
	"regexp"
	"testing"

	"asterion/db/dbtest"
	"asterion/jobs/jobstest"
)

// TestFloorLeavesTheRecordsOfAnsweredJobs runs the floor on a migrated database and reads back
// what an answered prompt leaves, so that the floor keeps writing Asterion's records as the
// schema changes.
func TestFloorLeavesTheRecordsOfAnsweredJobs(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	org, user := jobstest.CreateOrgUser(t, d.Bun, "member")
	const jobs = 12
	r, err := runFloor(ctx, d.Pool, floorOwner{org: org, user: user}, 3, jobs)
	if err != nil {
		t.Fatalf("runFloor: %v", err)
	}
	if r.Jobs != jobs || r.Workers != 3 || r.JobsPerSec <= 0 {
		t.Fatalf("runFloor = %+v, want %d jobs through 3 workers", r, jobs)
	}
	for _, c := range []struct {
		what, sql string
		want      int
	}{
		{"succeeded jobs with their response", `SELECT count(*) FROM sa_job j JOIN sa_entity e ON e.id = j.response_id
			WHERE j.state = 'succeeded' AND e.kind = 'response' AND j.org_id = $1`, jobs},
		{"completed operations", `SELECT count(*) FROM sa_operation WHERE status = 'completed' AND terminal_at IS NOT NULL
			AND history_seq = 3 AND org_id = $1`, jobs},
		{"history entries", `SELECT count(*) FROM sa_operation_history h JOIN sa_operation o ON o.id = h.operation_id
			WHERE o.org_id = $1`, 3 * jobs},
		{"numbered events", `SELECT count(*) FROM sa_event WHERE seq IS NOT NULL AND org_id = $1`, 3 * jobs},
		{"unnumbered events", `SELECT count(*) FROM sa_event WHERE seq IS NULL AND org_id = $1`, 0},
		{"highest event number", `SELECT coalesce(max(seq), 0) FROM sa_event WHERE org_id = $1`, 3 * jobs},
		{"completed River jobs of the floor's queue", `SELECT count(*) FROM river_job WHERE state = 'completed'
			AND queue = '` + floorQueue + `' AND args->>'job_id' IN (SELECT id::text FROM sa_job WHERE org_id = $1)`, jobs},
		{"output chunks", `SELECT count(*) FROM sa_job_output WHERE org_id = $1 AND seq = 1`, jobs},
		{"edges", `SELECT count(*) FROM sa_edge WHERE org_id = $1`, jobs},
		{"ledger rows", `SELECT count(*) FROM sa_ledger WHERE org_id = $1`, jobs},
		{"attempt rows", `SELECT count(*) FROM sa_attempt WHERE org_id = $1`, jobs},
		{"audit entries", `SELECT count(*) FROM sa_audit WHERE org_id = $1 AND action = 'job.succeeded'`, jobs},
		{"jobs counted as succeeded", `SELECT coalesce(sum(n), 0) FROM sa_job_count WHERE org_id = $1 AND state = 'succeeded'`, jobs},
	} {
		var got int
		if err := d.Pool.QueryRow(ctx, c.sql, org).Scan(&got); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		if got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
}

// TestFloorStepsOfItsStatements classifies the floor's statements as pg_stat_statements shows
// them, with every constant replaced by a parameter.
func TestFloorStepsOfItsStatements(t *testing.T) {
	t.Parallel()
	constant := regexp.MustCompile(`'[^']*'`)
	for q, want := range map[string]string{
		floorSubmitSQL: "submit",
		floorClaimSQL:  "claim",
		floorFinishSQL: "finish",
		`WITH pending AS ( SELECT id, row_number() OVER (ORDER BY id) AS rn FROM sa_event WHERE seq IS NULL ORDER BY id LIMIT $2 ) SELECT 1`: "other",
		`SELECT pg_advisory_xact_lock($1), set_config($2, $3, $4), set_config($5, $6, $7)`:                                                   "other",
	} {
		if got := floorStep(constant.ReplaceAllString(q, "$$99")); got != want {
			t.Errorf("floorStep(%.60q) = %s, want %s", q, got, want)
		}
	}
}
