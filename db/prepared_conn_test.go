package db_test

import (
	"context"
	"database/sql"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"

	"asterion/db"
	"asterion/db/dbtest"
)

// pinConn pins one pooled connection of the test database for the rest of the test.
func pinConn(t *testing.T, d *dbtest.DB) *sql.Conn {
	t.Helper()
	conn, err := d.Bun.DB.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// sqlLiteral quotes s as a PostgreSQL string literal (standard_conforming_strings is on).
func sqlLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// preparedOn counts the statements prepared on conn whose text is text (any text when empty).
// The count is asked without arguments, so it is not itself prepared.
func preparedOn(t *testing.T, conn *sql.Conn, text string) int {
	t.Helper()
	q := "SELECT count(*) FROM pg_prepared_statements"
	if text != "" {
		q += " WHERE statement = " + sqlLiteral(text)
	}
	var n int
	if err := conn.QueryRowContext(context.Background(), q).Scan(&n); err != nil {
		t.Fatalf("count prepared statements: %v", err)
	}
	return n
}

func sqlState(err error) string {
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) {
		return pgErr.Field('C')
	}
	return ""
}

func TestPreparedConnPreparesStatementsWithArgumentsOncePerConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	conn := pinConn(t, d)
	if _, err := conn.ExecContext(ctx, "CREATE TABLE pc_probe (id bigint PRIMARY KEY, v text NOT NULL)"); err != nil {
		t.Fatal(err)
	}

	// A write with arguments, twice with different values: one prepared statement, two rows.
	const insert = "INSERT INTO pc_probe (id, v) VALUES ($1, $2)"
	for i, v := range []string{"one", "two ?1 $1 'quoted'"} {
		res, err := conn.ExecContext(ctx, insert, int64(i+1), v)
		if err != nil {
			t.Fatalf("insert %d: %v", i+1, err)
		}
		if n, err := res.RowsAffected(); err != nil || n != 1 {
			t.Fatalf("insert %d affected %d rows (%v), want 1", i+1, n, err)
		}
	}
	if n := preparedOn(t, conn, insert); n != 1 {
		t.Errorf("%d prepared statements for the insert after two runs, want 1", n)
	}

	// A read with arguments, twice: one prepared statement, right answer both times.
	const read = "SELECT v FROM pc_probe WHERE id = $1"
	for _, c := range []struct {
		id   int64
		want string
	}{{1, "one"}, {2, "two ?1 $1 'quoted'"}, {1, "one"}} {
		var got string
		if err := conn.QueryRowContext(ctx, read, c.id).Scan(&got); err != nil {
			t.Fatalf("read %d: %v", c.id, err)
		}
		if got != c.want {
			t.Errorf("read %d = %q, want %q", c.id, got, c.want)
		}
	}
	if n := preparedOn(t, conn, read); n != 1 {
		t.Errorf("%d prepared statements for the read after three runs, want 1", n)
	}
	// A miss answers no rows through the prepared statement too.
	var none string
	if err := conn.QueryRowContext(ctx, read, int64(99)).Scan(&none); !errors.Is(err, sql.ErrNoRows) {
		t.Errorf("read of a missing id: %v, want sql.ErrNoRows", err)
	}

	// Without arguments a statement keeps the simple protocol and is not prepared.
	const plain = "SELECT count(*) FROM pc_probe WHERE v <> 'x'"
	for range 2 {
		var n int
		if err := conn.QueryRowContext(ctx, plain).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 2 {
			t.Errorf("plain count %d, want 2", n)
		}
	}
	if _, err := conn.ExecContext(ctx, "UPDATE pc_probe SET v = v WHERE id = 1"); err != nil {
		t.Fatal(err)
	}
	if n := preparedOn(t, conn, plain); n != 0 {
		t.Errorf("%d prepared statements for a query without arguments, want 0", n)
	}
	if n := preparedOn(t, conn, ""); n != 2 {
		t.Errorf("%d prepared statements on the connection, want 2 (the insert and the read)", n)
	}

	// bun's own queries inline their arguments and send none: nothing is prepared for them.
	bconn, err := d.Bun.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer bconn.Close()
	var v string
	if err := bconn.NewSelect().Table("pc_probe").Column("v").Where("id = ?", 2).Scan(ctx, &v); err != nil {
		t.Fatal(err)
	}
	if v != "two ?1 $1 'quoted'" {
		t.Errorf("bun read %q", v)
	}
	var bunPrepared int
	if err := bconn.Conn.QueryRowContext(ctx, "SELECT count(*) FROM pg_prepared_statements").Scan(&bunPrepared); err != nil {
		t.Fatal(err)
	}
	if bunPrepared != 0 {
		t.Errorf("%d statements prepared for bun's inlined query, want 0", bunPrepared)
	}
}

func TestPreparedConnStatementOutlivesRolledBackTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	conn := pinConn(t, d)
	const q = "SELECT $1::int * 2"

	// Prepared inside a transaction that is rolled back: PostgreSQL keeps protocol-level
	// statements across rollback, so the cached one must still run afterwards.
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var got int
	if err := tx.QueryRowContext(ctx, q, 21).Scan(&got); err != nil || got != 42 {
		t.Fatalf("in tx: %d, %v", got, err)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, q, 5).Scan(&got); err != nil || got != 10 {
		t.Fatalf("after rollback: %d, %v; want 10", got, err)
	}
	if n := preparedOn(t, conn, q); n != 1 {
		t.Errorf("%d prepared statements for %q, want 1", n, q)
	}

	// A failed statement aborts the transaction; after rollback the cache still serves.
	tx, err = conn.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tx.QueryRowContext(ctx, q, "not a number").Scan(&got); err == nil {
		t.Fatal("a bad argument succeeded")
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(ctx, q, 7).Scan(&got); err != nil || got != 14 {
		t.Fatalf("after failed tx: %d, %v; want 14", got, err)
	}
}

func TestPreparedConnRecoversWhenTheTableChangesShape(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	conn := pinConn(t, d)
	if _, err := conn.ExecContext(ctx, "CREATE TABLE pc_shape (id bigint PRIMARY KEY, a text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.ExecContext(ctx, "INSERT INTO pc_shape VALUES (1, 'first')"); err != nil {
		t.Fatal(err)
	}
	const q = "SELECT * FROM pc_shape WHERE id = $1"

	// readRow runs q for id 1 and returns the row as column → value.
	readRow := func() (map[string]string, error) {
		rows, err := conn.QueryContext(ctx, q, int64(1))
		if err != nil {
			return nil, err
		}
		defer rows.Close()
		cols, err := rows.Columns()
		if err != nil {
			return nil, err
		}
		if !rows.Next() {
			return nil, errors.Join(errors.New("no row"), rows.Err())
		}
		vals := make([]sql.NullString, len(cols))
		dest := make([]any, len(cols))
		for i := range vals {
			dest[i] = &vals[i]
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, err
		}
		out := make(map[string]string, len(cols))
		for i, c := range cols {
			out[c] = vals[i].String
		}
		return out, rows.Err()
	}

	for range 2 { // the second run uses the cached statement
		row, err := readRow()
		if err != nil {
			t.Fatal(err)
		}
		if len(row) != 2 || row["id"] != "1" || row["a"] != "first" {
			t.Fatalf("row before ALTER %v", row)
		}
	}
	if n := preparedOn(t, conn, q); n != 1 {
		t.Fatalf("%d prepared statements before ALTER, want 1", n)
	}

	if _, err := conn.ExecContext(ctx, "ALTER TABLE pc_shape ADD COLUMN b text NOT NULL DEFAULT 'added'"); err != nil {
		t.Fatal(err)
	}

	// The cached plan's result type changed: PostgreSQL may refuse it once (0A000).
	row, err := readRow()
	if err != nil {
		if code := sqlState(err); code != "0A000" {
			t.Fatalf("first read after ALTER: %v (SQLSTATE %q), want 0A000 or success", err, code)
		}
		t.Logf("first read after ALTER failed as allowed: %v", err)
	} else {
		t.Logf("first read after ALTER succeeded: %v", row)
	}
	// From then on the statement is prepared afresh and answers with the new column.
	for i := range 2 {
		row, err := readRow()
		if err != nil {
			t.Fatalf("read %d after ALTER: %v (SQLSTATE %q); the cache did not recover", i+2, err, sqlState(err))
		}
		if len(row) != 3 || row["id"] != "1" || row["a"] != "first" || row["b"] != "added" {
			t.Fatalf("read %d after ALTER: row %v, want id, a and the new column b", i+2, row)
		}
	}
	if n := preparedOn(t, conn, q); n < 1 {
		t.Errorf("no prepared statement for the query after recovery")
	} else if n > 1 {
		// The stale statement is closed when it is dropped from the cache; more than one here
		// means the close did not reach the server.
		t.Logf("%d server-side prepared statements for the query after recovery", n)
	}
}

func TestPreparedConnRecoversFromDeallocatedStatements(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	conn := pinConn(t, d)
	const q = "SELECT $1::text || '!'"
	var got string
	if err := conn.QueryRowContext(ctx, q, "a").Scan(&got); err != nil || got != "a!" {
		t.Fatalf("first run: %q, %v", got, err)
	}
	// The server forgets the statement behind the cache's back.
	if _, err := conn.ExecContext(ctx, "DEALLOCATE ALL"); err != nil {
		t.Fatal(err)
	}
	if n := preparedOn(t, conn, ""); n != 0 {
		t.Fatalf("%d prepared statements after DEALLOCATE ALL", n)
	}
	err := conn.QueryRowContext(ctx, q, "b").Scan(&got)
	if err != nil {
		if code := sqlState(err); code != "26000" {
			t.Fatalf("run after DEALLOCATE: %v (SQLSTATE %q), want 26000 or success", err, code)
		}
	} else if got != "b!" {
		t.Fatalf("run after DEALLOCATE: %q", got)
	}
	if err := conn.QueryRowContext(ctx, q, "c").Scan(&got); err != nil || got != "c!" {
		t.Fatalf("next run: %q, %v (SQLSTATE %q); the cache did not recover", got, err, sqlState(err))
	}
	if n := preparedOn(t, conn, q); n != 1 {
		t.Errorf("%d prepared statements after recovery, want 1", n)
	}
}

func TestPreparedConnBoundsItsCache(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	conn := pinConn(t, d)
	const bound = 256 // maxPreparedPerConn
	const distinct = bound + 44
	query := func(i int) string { return "SELECT $1::bigint + " + strconv.Itoa(i) }
	run := func(i int) {
		t.Helper()
		arg := int64(1000 * i)
		var got int64
		if err := conn.QueryRowContext(ctx, query(i), arg).Scan(&got); err != nil {
			t.Fatalf("query %d: %v", i, err)
		}
		if want := arg + int64(i); got != want {
			t.Fatalf("query %d answered %d, want %d", i, got, want)
		}
	}
	for i := range distinct {
		run(i)
		n := preparedOn(t, conn, "")
		if n > bound {
			t.Fatalf("%d statements prepared on the connection after %d distinct queries, bound %d", n, i+1, bound)
		}
		if n < 1 || n > i+1 {
			t.Fatalf("%d statements prepared after %d distinct queries", n, i+1)
		}
		if i == bound-1 && n != bound {
			t.Fatalf("%d statements prepared after %d distinct queries, want all %d cached", n, bound, bound)
		}
	}
	// Every statement, evicted or not, still answers, and the bound still holds.
	for i := range distinct {
		run(i)
	}
	if n := preparedOn(t, conn, ""); n > bound {
		t.Fatalf("%d statements prepared after a second pass, bound %d", n, bound)
	}
}

// TestPreparedConnDroppedAfterBackendDies: when the server ends a connection under a cached
// statement (here pg_terminate_backend, as a restart would), the failing call closes it, so the
// pool discards it and the next call runs on a fresh connection instead of failing forever.
func TestPreparedConnDroppedAfterBackendDies(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	one, err := db.Open(ctx, db.OpenConfig{URL: d.URL, MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	const q = "SELECT pg_backend_pid() + $1::int"
	pidOf := func() (int, error) {
		var n int
		err := one.DB.QueryRowContext(ctx, q, 0).Scan(&n)
		return n, err
	}
	pid, err := pidOf()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Bun.ExecContext(ctx, "SELECT pg_terminate_backend(?)", pid); err != nil {
		t.Fatal(err)
	}
	// The backend may answer once more before it has gone; the call that meets the dead
	// connection may fail; the ones after it must not.
	dbtest.WaitFor(t, 10*time.Second, "the terminated backend to stop answering", func() bool {
		p, err := pidOf()
		return err != nil || p != pid
	})
	for i := 0; i < 3; i++ {
		again, err := pidOf()
		if err != nil {
			t.Fatalf("call %d after the backend died: %v", i, err)
		}
		if again == pid {
			t.Fatalf("still on the terminated backend %d", pid)
		}
	}
}
