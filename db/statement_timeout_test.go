package db_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"

	"asterion/db"
	"asterion/db/dbtest"
)

// TestStatementTimeoutOnEveryConnection: the app's connections carry statement_timeout (the
// default, or the configured value) and PostgreSQL ends a statement that runs longer, with and
// without arguments; migrations' connections can go without; the pgx pool has its own bound.
func TestStatementTimeoutOnEveryConnection(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	show := func(t *testing.T, cfg db.OpenConfig) string {
		t.Helper()
		cfg.URL, cfg.MaxOpenConns = d.URL, 2
		b, err := db.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		var v string
		if err := b.QueryRowContext(ctx, "SHOW statement_timeout").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := show(t, db.OpenConfig{}); v != "15s" {
		t.Errorf("default statement_timeout %q, want 15s", v)
	}
	if v := show(t, db.OpenConfig{NoStatementTimeout: true}); v != "0" {
		t.Errorf("statement_timeout with NoStatementTimeout %q, want 0", v)
	}
	if _, err := db.Open(ctx, db.OpenConfig{URL: d.URL, StatementTimeout: -time.Second}); err == nil {
		t.Error("a negative statement timeout was accepted")
	}

	b, err := db.Open(ctx, db.OpenConfig{URL: d.URL, MaxOpenConns: 2, StatementTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, tc := range []struct {
		name string
		args []any
		q    string
	}{
		{"simple protocol", nil, "SELECT pg_sleep(3)"},
		{"prepared", []any{3}, "SELECT pg_sleep($1)"},
	} {
		_, err := b.DB.ExecContext(ctx, tc.q, tc.args...) // database/sql itself: arguments reach the driver
		var pgErr pgdriver.Error
		if !errors.As(err, &pgErr) || pgErr.Field('C') != "57014" {
			t.Errorf("%s: a 3 s statement under a 200 ms statement_timeout: %v, want SQLSTATE 57014", tc.name, err)
		}
	}
	var v string
	if err := d.Pool.QueryRow(ctx, "SHOW statement_timeout").Scan(&v); err != nil || v != "2min" {
		t.Errorf("pgx pool statement_timeout %q (%v), want 2min", v, err)
	}
}

// TestCancelledContextEndsStatement: when the context of a running statement is cancelled
// (not only past a deadline, which the driver honours itself), the call returns at once and
// PostgreSQL stops the statement instead of running it to the end.
func TestCancelledContextEndsStatement(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	b, err := db.Open(context.Background(), db.OpenConfig{URL: d.URL, MaxOpenConns: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.ExecContext(ctx, "SELECT pg_sleep(60) /* cancelled-statement-test */")
		errc <- err
	}()
	running := func() int {
		var n int
		if err := d.Bun.QueryRowContext(context.Background(),
			"SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' AND query LIKE '%cancelled-statement-test%' AND pid <> pg_backend_pid()").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	dbtest.WaitFor(t, 20*time.Second, "the statement to run", func() bool { return running() == 1 })
	cancel()
	// The statement sleeps a minute: only the cancel can end it, or make it fail, before then.
	if err := <-errc; err == nil {
		t.Fatal("a cancelled statement succeeded")
	}
	dbtest.WaitFor(t, 20*time.Second, "PostgreSQL to stop the statement", func() bool { return running() == 0 })
	// The pool recovers: the next statement runs on a fresh connection.
	if _, err := b.ExecContext(context.Background(), "SELECT 1"); err != nil {
		t.Fatalf("statement after a cancelled one: %v", err)
	}
}
