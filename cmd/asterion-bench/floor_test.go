package main

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"

	"asterion/db/dbtest"
	"asterion/jobs/jobstest"
)

// TestFloorLeavesTheRecordsOfAnsweredJobs runs the floor on a migrated database, whole and
// without each group of records, and reads back what the jobs left, so that the floor keeps
// writing Asterion's records as the schema changes and leaves out exactly what it is told.
func TestFloorLeavesTheRecordsOfAnsweredJobs(t *testing.T) {
	t.Parallel()
	const jobs = 12
	counts := []struct {
		what, group, sql string
		perJob           int
	}{
		{"succeeded jobs with their response", "", `SELECT count(*) FROM sa_job j JOIN sa_entity e ON e.id = j.response_id
			WHERE j.state = 'succeeded' AND e.kind = 'response' AND j.org_id = $1`, 1},
		{"completed River jobs of the floor's queue", "", `SELECT count(*) FROM river_job WHERE state = 'completed'
			AND queue = '` + floorQueue + `' AND args->>'job_id' IN (SELECT id::text FROM sa_job WHERE org_id = $1)`, 1},
		{"jobs counted as succeeded", "", `SELECT coalesce(sum(n), 0) FROM sa_job_count WHERE org_id = $1 AND state = 'succeeded'`, 1},
		{"completed operations", floorRegistry, `SELECT count(*) FROM sa_operation WHERE status = 'completed'
			AND terminal_at IS NOT NULL AND history_seq = 3 AND org_id = $1`, 1},
		{"history entries", floorRegistry, `SELECT count(*) FROM sa_operation_history h JOIN sa_job j ON j.operation_id = h.operation_id
			WHERE j.org_id = $1`, 3},
		{"numbered events", floorFeed, `SELECT count(*) FROM sa_event WHERE seq IS NOT NULL AND org_id = $1`, 3},
		{"highest event number", floorFeed, `SELECT coalesce(max(seq), 0) FROM sa_event WHERE org_id = $1`, 3},
		{"output chunks", floorOutput, `SELECT count(*) FROM sa_job_output WHERE org_id = $1 AND seq = 1`, 1},
		{"edges", floorRecords, `SELECT count(*) FROM sa_edge WHERE org_id = $1`, 1},
		{"ledger rows", floorRecords, `SELECT count(*) FROM sa_ledger WHERE org_id = $1`, 1},
		{"attempt rows", floorRecords, `SELECT count(*) FROM sa_attempt WHERE org_id = $1`, 1},
		{"audit entries", floorRecords, `SELECT count(*) FROM sa_audit WHERE org_id = $1 AND action = 'job.succeeded'`, 1},
	}
	for _, without := range [][]string{nil, {floorRegistry}, {floorFeed}, {floorRecords}, {floorOutput}, floorGroups} {
		name := "whole"
		if without != nil {
			name = "without " + strings.Join(without, ",")
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := dbtest.New(t)
			org, user := jobstest.CreateOrgUser(t, d.Bun, "member")
			r, err := runFloor(ctx, d.Pool, floorOwner{org: org, user: user}, without, 3, jobs)
			if err != nil {
				t.Fatalf("runFloor: %v", err)
			}
			if r.Jobs != jobs || r.Workers != 3 || r.JobsPerSec <= 0 || !slices.Equal(r.Without, without) {
				t.Fatalf("runFloor = %+v, want %d jobs through 3 workers without %v", r, jobs, without)
			}
			for _, c := range counts {
				want := c.perJob * jobs
				if slices.Contains(without, c.group) {
					want = 0
				}
				var got int
				if err := d.Pool.QueryRow(ctx, c.sql, org).Scan(&got); err != nil {
					t.Fatalf("%s: %v", c.what, err)
				}
				if got != want {
					t.Errorf("%s: %d, want %d", c.what, got, want)
				}
			}
			var unnumbered int
			if err := d.Pool.QueryRow(ctx, `SELECT count(*) FROM sa_event WHERE seq IS NULL`).Scan(&unnumbered); err != nil {
				t.Fatal(err)
			}
			if unnumbered != 0 {
				t.Errorf("%d events left unnumbered", unnumbered)
			}
		})
	}
}

// TestFloorStepsOfItsStatements classifies the floor's statements, whole and without every
// group, as pg_stat_statements shows them, with every constant replaced by a parameter.
func TestFloorStepsOfItsStatements(t *testing.T) {
	t.Parallel()
	constant := regexp.MustCompile(`'[^']*'`)
	for _, without := range [][]string{nil, floorGroups} {
		stmts := floorSQL(without)
		for q, want := range map[string]string{
			stmts.submit: "submit",
			stmts.claim:  "claim",
			stmts.finish: "finish",
			`WITH pending AS ( SELECT id, row_number() OVER (ORDER BY id) AS rn FROM sa_event WHERE seq IS NULL ORDER BY id LIMIT $2 ) SELECT 1`: "other",
			`SELECT pg_advisory_xact_lock($1), set_config($2, $3, $4), set_config($5, $6, $7)`:                                                   "other",
		} {
			if got := floorStep(constant.ReplaceAllString(q, "$$99")); got != want {
				t.Errorf("without %v: floorStep(%.60q) = %s, want %s", without, q, got, want)
			}
		}
	}
}

func TestParseFloorWithout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   string
		want []string
		ok   bool
	}{
		{"", nil, true},
		{"feed", []string{"feed"}, true},
		{"registry, records,output", []string{"registry", "records", "output"}, true},
		{"budget", nil, false},
		{"feed,", nil, false},
	} {
		got, err := parseFloorWithout(c.in)
		if (err == nil) != c.ok || !slices.Equal(got, c.want) && c.ok {
			t.Errorf("parseFloorWithout(%q) = %v, %v; want %v (ok %v)", c.in, got, err, c.want, c.ok)
		}
	}
}
