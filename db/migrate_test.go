package db_test

import (
	"context"
	"testing"
	"time"

	"asterion/db"
	"asterion/db/dbtest"
)

func TestMigrationsUpDownUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	u := dbtest.NewEmpty(t)
	bunDB, err := db.Open(ctx, db.OpenConfig{URL: u, WaitFor: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer bunDB.Close()
	pool, err := db.OpenPool(ctx, u, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	m, err := db.NewMigrator(bunDB, pool)
	if err != nil {
		t.Fatal(err)
	}

	st, err := m.Status(ctx)
	if err != nil {
		t.Fatalf("status on empty database: %v", err)
	}
	if st.Current() || len(st.AppPending) == 0 || st.RiverVersion != 0 {
		t.Fatalf("empty database reported as %+v", st)
	}

	for round := 1; round <= 2; round++ {
		applied, err := m.Up(ctx)
		if err != nil {
			t.Fatalf("round %d up: %v", round, err)
		}
		if len(applied) == 0 {
			t.Fatalf("round %d up applied nothing", round)
		}
		if err := m.Validate(ctx); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		st, err := m.Status(ctx)
		if err != nil || !st.Current() {
			t.Fatalf("round %d status after up: %+v, %v", round, st, err)
		}
		var n int
		if err := bunDB.NewSelect().TableExpr("information_schema.tables").
			Where("table_name IN ('sa_job','sa_entity','sa_edge','sa_ledger','sa_audit','orgs','users','api_tokens','sessions','river_job')").
			ColumnExpr("count(*)").Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		if n != 10 {
			t.Fatalf("round %d: %d of 10 tables exist", round, n)
		}
		again, err := m.Up(ctx)
		if err != nil || len(again) != 0 {
			t.Fatalf("second up in round %d applied %v, %v", round, again, err)
		}
		rolled, err := m.Down(ctx, true)
		if err != nil {
			t.Fatalf("round %d down: %v", round, err)
		}
		if len(rolled) == 0 {
			t.Fatalf("round %d down rolled back nothing", round)
		}
		if err := bunDB.NewSelect().TableExpr("information_schema.tables").
			Where("table_schema = 'public' AND table_name NOT IN ('bun_migrations','bun_migration_locks')").
			ColumnExpr("count(*)").Scan(ctx, &n); err != nil {
			t.Fatal(err)
		}
		if n != 0 {
			t.Fatalf("round %d: %d tables left after down", round, n)
		}
	}
}

func TestUpdatedAtTrigger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	var before, after time.Time
	err := d.Bun.QueryRowContext(ctx, `INSERT INTO orgs (name) VALUES ('o') RETURNING id`).Err()
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Bun.ExecContext(ctx, `INSERT INTO users (org_id, name, role) VALUES (1, 'u', 'member')`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Bun.ExecContext(ctx, `INSERT INTO sa_entity (id, kind, body, correlation_id, truth_class, state_class, org_id, created_by, updated_at)
		VALUES ('00000000-0000-0000-0000-000000000001', 'prompt', 'x', '00000000-0000-0000-0000-000000000001', 'asserted', 'open', 1, 1, now() - interval '1 hour')`)
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Bun.ExecContext(ctx, `INSERT INTO sa_job (id, prompt_id, execution_options, org_id, created_by, updated_at)
		VALUES ('00000000-0000-0000-0000-000000000002', '00000000-0000-0000-0000-000000000001', '{}', 1, 1, now() - interval '1 hour')`)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Bun.QueryRowContext(ctx, `SELECT updated_at FROM sa_job`).Scan(&before); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Bun.ExecContext(ctx, `UPDATE sa_job SET state = 'running'`); err != nil {
		t.Fatal(err)
	}
	if err := d.Bun.QueryRowContext(ctx, `SELECT updated_at FROM sa_job`).Scan(&after); err != nil {
		t.Fatal(err)
	}
	if !after.After(before.Add(30 * time.Minute)) {
		t.Fatalf("updated_at not moved by the trigger: before %v after %v", before, after)
	}
	// The trigger is skipped only when the writer already set now(); any other value it
	// writes, older or newer, still becomes the transaction's start.
	for _, set := range []string{"now() - interval '2 hours'", "now() + interval '2 hours'", "now()"} {
		var got, txStart time.Time
		err := d.Bun.QueryRowContext(ctx, `UPDATE sa_job SET updated_at = `+set+` RETURNING updated_at, now()`).Scan(&got, &txStart)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(txStart) {
			t.Errorf("SET updated_at = %s stored %v, want the transaction's start %v", set, got, txStart)
		}
	}
	if _, err := d.Bun.ExecContext(ctx, `UPDATE sa_job SET state = 'bogus'`); err == nil {
		t.Fatal("a state outside the state machine was accepted")
	}
}
