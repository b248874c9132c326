package db_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"asterion/db"
	"asterion/db/dbtest"
)

// TestIsRefusedData asks the real server for each kind of error and checks which of them the
// same rows would meet again.
func TestIsRefusedData(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	if _, err := d.Bun.ExecContext(ctx, `CREATE TABLE refusal_probe (id int PRIMARY KEY, body text);
		INSERT INTO refusal_probe VALUES (1, 'one')`); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, sql string
		refused   bool
	}{
		{"a NUL in a text value", "INSERT INTO refusal_probe VALUES (2, E'a' || chr(0))", true},
		{"a duplicate key", "INSERT INTO refusal_probe VALUES (1, 'again')", true},
		{"a division by zero", "SELECT 1 / (SELECT count(*) - 1 FROM refusal_probe)", true},
		{"an exception a function raises", "DO $$ BEGIN RAISE EXCEPTION 'no'; END $$", true},
		{"a statement cancelled by its timeout", "SET LOCAL statement_timeout = 1; SELECT pg_sleep(1)", false},
		{"a syntax error", "SELEC 1", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tx, err := d.Bun.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = tx.Rollback() }()
			_, err = tx.ExecContext(ctx, c.sql)
			if err == nil {
				t.Fatal("the statement passed")
			}
			if got := db.IsRefusedData(fmt.Errorf("write: %w", err)); got != c.refused {
				t.Errorf("%v: refused %v, want %v", err, got, c.refused)
			}
		})
	}
	if db.IsRefusedData(nil) || db.IsRefusedData(errors.New("no rows")) {
		t.Error("nil or a plain error counted as refused data")
	}
}
