package db_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
)

// fkFixture is a database with ip_parent and ip_child, two committed parents and a child of
// the first, and a pinned connection, whose session state (prepared statements, settings)
// the tests read back.
type fkFixture struct {
	d       *dbtest.DB
	conn    bun.Conn
	parents [2]uuid.UUID // named "p0" and "p1"
	child   uuid.UUID    // of parents[0], body "c0"
}

func newFKFixture(ctx context.Context, t *testing.T) fkFixture {
	t.Helper()
	f := fkFixture{d: newDBWith(ctx, t, fkDDL), parents: [2]uuid.UUID{uuid.New(), uuid.New()}, child: uuid.New()}
	for i, p := range f.parents {
		if _, err := f.d.Bun.NewInsert().Model(&ipParent{ID: p, Name: fmt.Sprintf("p%d", i)}).Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := f.d.Bun.NewInsert().Model(&ipChild{ID: f.child, ParentID: f.parents[0], Body: "c0"}).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	conn, err := f.d.Bun.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	f.conn = conn
	return f
}

var errRollback = errors.New("roll back")

// rolledBack runs fn in a transaction on conn and rolls it back, so every case of a table
// starts from the same committed rows.
func rolledBack(ctx context.Context, t *testing.T, conn bun.Conn, fn func(ctx context.Context, tx bun.Tx) error) {
	t.Helper()
	err := conn.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		if err := fn(ctx, tx); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
}

// preparedStatements lists the statements prepared in idb's session that start with prefix
// (all when empty), oldest first. The question travels without arguments, so it is not itself
// prepared.
func preparedStatements(ctx context.Context, t *testing.T, idb bun.IDB, prefix string) []string {
	t.Helper()
	rows, err := idb.QueryContext(ctx, "SELECT statement FROM pg_prepared_statements WHERE starts_with(statement, "+
		sqlLiteral(prefix)+") ORDER BY prepare_time")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func parentName(ctx context.Context, t *testing.T, idb bun.IDB, id uuid.UUID) string {
	t.Helper()
	var name string
	if err := idb.QueryRowContext(ctx, "SELECT name FROM ip_parent WHERE id = ?", id).Scan(&name); err != nil {
		t.Fatalf("read parent %s: %v", id, err)
	}
	return name
}

func readChild(ctx context.Context, t *testing.T, idb bun.IDB, id uuid.UUID) ipChild {
	t.Helper()
	var c ipChild
	if err := idb.NewSelect().Model(&c).Where("id = ?", id).Scan(ctx); err != nil {
		t.Fatalf("read child %s: %v", id, err)
	}
	return c
}

func insertAll(b *db.Batch, rows ...db.Statement) {
	for _, r := range rows {
		b.Insert(r)
	}
}

// TestBatchInsertAndUpdatesGoAsOneStatement: inserts and a model update, of distinct tables,
// travel as one prepared WITH statement whose writes all take effect, including a foreign key
// to a row inserted in the same statement.
func TestBatchInsertAndUpdatesGoAsOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	p2 := uuid.New()
	moved := "moved ? $1 it's \\"
	err := f.conn.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		before := len(preparedStatements(ctx, t, tx, ""))
		b := db.NewBatch(tx)
		b.Insert((&ipParent{ID: p2, Name: "inserted"}).insert())
		b.Update((&ipChild{ID: f.child, ParentID: p2, Body: moved}).update())
		if err := b.Exec(ctx, tx); err != nil {
			return err
		}
		if n := len(preparedStatements(ctx, t, tx, "")); n != before+1 {
			t.Errorf("%d statements prepared by the batch, want 1", n-before)
		}
		stmts := preparedStatements(ctx, t, tx, "WITH b0 AS (")
		if len(stmts) != 1 {
			t.Fatalf("prepared WITH statements %q, want one", stmts)
		}
		for _, part := range []string{`INSERT INTO "ip_parent"`, `UPDATE "ip_child" SET "parent_id" = $`} {
			if !strings.Contains(stmts[0], part) {
				t.Errorf("statement %q lacks %q", stmts[0], part)
			}
		}
		if strings.Contains(stmts[0], "moved") {
			t.Errorf("statement %q has values inlined", stmts[0])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := parentName(ctx, t, f.d.Bun, p2); got != "inserted" {
		t.Errorf("inserted parent %q", got)
	}
	if c := readChild(ctx, t, f.d.Bun, f.child); c.ParentID != p2 || c.Body != moved {
		t.Errorf("child %+v, want moved to %s with body %q", c, p2, moved)
	}
}

// TestBatchInsertsOfOneShapeGoAsMultiRowInserts: consecutive rows of one table and the same
// columns join one INSERT as rows of VALUES; a row of another table starts a new one, and a
// child may reference a parent inserted in the same statement.
func TestBatchInsertsOfOneShapeGoAsMultiRowInserts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	p1, p2, p3, c1, c2 := uuid.New(), uuid.New(), uuid.New(), uuid.New(), uuid.New()
	err := f.conn.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		insertAll(b, (&ipParent{ID: p1, Name: "one"}).insert(), (&ipParent{ID: p2, Name: tricky}).insert(),
			(&ipChild{ID: c1, ParentID: p1, Body: "of one"}).insert(), (&ipChild{ID: c2, ParentID: p2, Body: "of two"}).insert(),
			(&ipParent{ID: p3, Name: "three"}).insert())
		if b.Len() != 3 {
			t.Errorf("Len %d, want 3 statements (parents, children, parent)", b.Len())
		}
		if err := b.Exec(ctx, tx); err != nil {
			return err
		}
		stmts := preparedStatements(ctx, t, tx, `WITH b0 AS (INSERT INTO "ip_parent"`)
		want := `WITH b0 AS (INSERT INTO "ip_parent" ("id", "name") VALUES ($1, $2), ($3, $4)) , ` +
			`b1 AS (INSERT INTO "ip_child" ("id", "parent_id", "body") VALUES ($5, $6, $7), ($8, $9, $10)) ` +
			`INSERT INTO "ip_parent" ("id", "name") VALUES ($11, $12)`
		if len(stmts) != 1 || stmts[0] != want {
			t.Errorf("prepared statements %q, want [%q]", stmts, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := parentName(ctx, t, f.d.Bun, p2); got != tricky {
		t.Errorf("second parent's name %q, want %q", got, tricky)
	}
	if got := readChild(ctx, t, f.d.Bun, c2); got.ParentID != p2 || got.Body != "of two" {
		t.Errorf("second child %+v", got)
	}
	if n := countRows(ctx, t, f.d.Bun, "ip_parent"); n != 5 {
		t.Errorf("%d parents, want 5 (2 of the fixture, 3 inserted)", n)
	}
}

// TestBatchUpdatesOfOneTableRunInOrder: a batch updating a table twice is not combined (two
// updates of one row in one statement would not see each other); it runs statement by
// statement, so each update sees the one before it.
func TestBatchUpdatesOfOneTableRunInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	p0, p1 := f.parents[0], f.parents[1]
	appendName := func(b *db.Batch, id uuid.UUID, s string) {
		b.UpdateSQL("ip_parent", "UPDATE ip_parent SET name = name || ? WHERE id = ?", s, id)
	}
	cases := []struct {
		name string
		fill func(b *db.Batch) error
		want [2]string // names of p0 and p1 after
	}{
		{"two rows", func(b *db.Batch) error {
			b.Update((&ipParent{ID: p0, Name: "first"}).update())
			b.Update((&ipParent{ID: p1, Name: "second"}).update())
			return nil
		}, [2]string{"first", "second"}},
		{"one row twice", func(b *db.Batch) error {
			b.Update((&ipParent{ID: p0, Name: "first"}).update())
			b.Update((&ipParent{ID: p0, Name: "second"}).update())
			return nil
		}, [2]string{"second", "p1"}},
		{"model update then written update", func(b *db.Batch) error {
			b.Update((&ipParent{ID: p0, Name: "first"}).update())
			appendName(b, p0, " then ?")
			return nil
		}, [2]string{"first then ?", "p1"}},
		{"two written updates", func(b *db.Batch) error {
			appendName(b, p0, "+a")
			appendName(b, p0, "+b")
			return nil
		}, [2]string{"p0+a+b", "p1"}},
		{"insert then an update of the inserted row", func(b *db.Batch) error {
			// The update names p1 only after the insert: in one statement it would miss it.
			b.Insert((&ipParent{ID: uuid.New(), Name: "new"}).insert())
			b.UpdateSQL("ip_parent", "UPDATE ip_parent SET name = 'saw ' || (SELECT string_agg(name, ',' ORDER BY name) FROM ip_parent WHERE name = 'new') WHERE id = ?", p1)
			return nil
		}, [2]string{"p0", "saw new"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rolledBack(ctx, t, f.conn, func(ctx context.Context, tx bun.Tx) error {
				before := len(preparedStatements(ctx, t, tx, ""))
				b := db.NewBatch(tx)
				if err := c.fill(b); err != nil {
					return err
				}
				if err := b.Exec(ctx, tx); err != nil {
					return err
				}
				if n := len(preparedStatements(ctx, t, tx, "")); n != before {
					t.Errorf("the batch prepared %d statements, want none (statement by statement, as text)", n-before)
				}
				for i, id := range f.parents {
					if got := parentName(ctx, t, tx, id); got != c.want[i] {
						t.Errorf("p%d named %q, want %q", i, got, c.want[i])
					}
				}
				return nil
			})
		})
	}
}

func readSettings(ctx context.Context, t *testing.T, idb bun.IDB) [2]string {
	t.Helper()
	var s [2]string
	if err := idb.QueryRowContext(ctx, "SELECT current_setting('synchronous_commit'), current_setting('application_name')").
		Scan(&s[0], &s[1]); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestBatchSetLocalLastsForTheTransaction: the settings of a batch hold for the rest of the
// transaction and end with it, whether the batch holds only settings, inserts too (one WITH
// statement) or a text statement (statement by statement).
func TestBatchSetLocalLastsForTheTransaction(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	session := readSettings(ctx, t, f.conn)
	if session[0] != "on" {
		t.Fatalf("synchronous_commit is %q before the test, want on", session[0])
	}
	cases := []struct {
		name string
		// add appends, between the two settings, the statements that insert a parent named p.
		add func(b *db.Batch, p *ipParent) error
		// form is how the batch is prepared: a prefix of the statement, or "" for text.
		form string
	}{
		{"only settings", nil, "SELECT set_config($1, $2, true), set_config($3, $4, true)"},
		{"with inserts", func(b *db.Batch, p *ipParent) error { b.Insert(p.insert()); return nil },
			`WITH b0 AS (INSERT INTO "ip_parent" ("id", "name") VALUES ($1, $2)) SELECT set_config($3, $4, true), set_config($5, $6, true)`},
		{"with a text statement", func(b *db.Batch, p *ipParent) error {
			b.AddSQL("INSERT INTO ip_parent (id, name) VALUES (?, ?)", p.ID, p.Name)
			return nil
		}, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			want := [2]string{"off", "batch ? $1 it's \\ " + c.name}
			p := &ipParent{ID: uuid.New(), Name: c.name}
			err := f.conn.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				before := len(preparedStatements(ctx, t, tx, ""))
				b := db.NewBatch(tx)
				b.SetLocal("synchronous_commit", want[0])
				if c.add != nil {
					if err := c.add(b, p); err != nil {
						return err
					}
				}
				b.SetLocal("application_name", want[1])
				if err := b.Exec(ctx, tx); err != nil {
					return err
				}
				if got := readSettings(ctx, t, tx); got != want {
					t.Errorf("settings in the transaction %q, want %q", got, want)
				}
				if c.form == "" {
					if n := len(preparedStatements(ctx, t, tx, "")); n != before {
						t.Errorf("the batch prepared %d statements, want none", n-before)
					}
				} else if n := len(preparedStatements(ctx, t, tx, c.form)); n != 1 {
					t.Errorf("%d prepared statements start with %q, want 1", n, c.form)
				}
				if c.add != nil && parentName(ctx, t, tx, p.ID) != p.Name {
					t.Error("the batch's insert did not happen")
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := readSettings(ctx, t, f.conn); got != session {
				t.Errorf("settings after the transaction %q, want %q back", got, session)
			}
		})
	}
}

// TestBatchScanWithRunsTheWritesInTheStatement: the batch's inserts travel in the WITH clause
// of the returning statement, one prepared statement; the returned row is scanned, and its
// foreign key to a parent inserted in the same statement holds.
func TestBatchScanWithRunsTheWritesInTheStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	p2, c2 := uuid.New(), uuid.New()
	var moved ipChild
	err := f.conn.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		insertAll(b, (&ipParent{ID: p2, Name: "new ? $1"}).insert(), (&ipChild{ID: c2, ParentID: p2, Body: "new child"}).insert())
		err := b.ScanWith(ctx, tx, &moved, "UPDATE ip_child SET parent_id = ?, body = ? WHERE id = ? RETURNING *", p2, tricky, f.child)
		if err != nil {
			return err
		}
		if b.Len() != 0 {
			t.Errorf("Len %d after ScanWith, want 0", b.Len())
		}
		stmts := preparedStatements(ctx, t, tx, `WITH b0 AS (INSERT INTO "ip_parent"`)
		if len(stmts) != 1 || !strings.HasSuffix(stmts[0], "UPDATE ip_child SET parent_id = $6, body = $7 WHERE id = $8 RETURNING *") {
			t.Errorf("prepared statements %q, want the inserts and the update as one", stmts)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkMovedChild(ctx, t, f, moved, p2)
	if got := readChild(ctx, t, f.d.Bun, c2); got.ParentID != p2 || parentName(ctx, t, f.d.Bun, p2) != "new ? $1" {
		t.Errorf("rows inserted by the batch: child %+v", got)
	}
}

// checkMovedChild checks that the fixture's child was moved to parent p2 with the tricky body,
// as scanned and as stored.
func checkMovedChild(ctx context.Context, t *testing.T, f fkFixture, moved ipChild, p2 uuid.UUID) {
	t.Helper()
	if moved.ID != f.child || moved.ParentID != p2 || moved.Body != tricky {
		t.Errorf("scanned %+v, want child %s moved to %s with body %q", moved, f.child, p2, tricky)
	}
	if got := readChild(ctx, t, f.d.Bun, f.child); got != moved {
		t.Errorf("stored child %+v, scanned %+v", got, moved)
	}
}

// TestBatchScanWithContinuesTheQuerysWithClause: a query with a WITH clause of its own gets the
// batch's writes added to that clause, still as one prepared statement.
func TestBatchScanWithContinuesTheQuerysWithClause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	p2 := uuid.New()
	var moved ipChild
	err := f.conn.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		b.Insert((&ipParent{ID: p2, Name: "with ? clause"}).insert())
		err := b.ScanWith(ctx, tx, &moved,
			"WITH m AS (UPDATE ip_child SET parent_id = ?, body = ? WHERE id = ? RETURNING *) SELECT m.* FROM m", p2, tricky, f.child)
		if err != nil {
			return err
		}
		stmts := preparedStatements(ctx, t, tx, `WITH b0 AS (INSERT INTO "ip_parent"`)
		if len(stmts) != 1 || !strings.HasSuffix(stmts[0], ", m AS (UPDATE ip_child SET parent_id = $3, body = $4 WHERE id = $5 RETURNING *) SELECT m.* FROM m") {
			t.Errorf("prepared statements %q, want the insert joined to the query's WITH clause", stmts)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkMovedChild(ctx, t, f, moved, p2)
}

func TestBatchScanWithNoRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	err := f.conn.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		b.Insert((&ipParent{ID: uuid.New(), Name: "written all the same"}).insert())
		var got ipChild
		err := b.ScanWith(ctx, tx, &got, "UPDATE ip_child SET body = ? WHERE id = ? RETURNING *", "x", uuid.New())
		if n := countRows(ctx, t, tx, "ip_parent"); n != 3 {
			t.Errorf("%d parents in the transaction, want 3: the batch's writes happen all the same", n)
		}
		return err
	})
	if !errors.Is(err, sql.ErrNoRows) {
		t.Fatalf("err %v, want sql.ErrNoRows", err)
	}
	if n := countRows(ctx, t, f.d.Bun, "ip_parent"); n != 2 {
		t.Errorf("%d parents after the rollback, want 2", n)
	}
}

// TestBatchScanWithFallsBackToExecThenScan: a batch holding a setting or a text statement
// cannot travel in the WITH clause; it runs first, so the query sees its writes and settings.
func TestBatchScanWithFallsBackToExecThenScan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	appName := readSettings(ctx, t, f.conn)[1]
	const query = "SELECT id, name || '/' || current_setting('application_name') AS name FROM ip_parent WHERE id = ?"
	cases := []struct {
		name string
		add  func(b *db.Batch, id uuid.UUID)
		want string // the name query returns
	}{
		{"with a setting", func(b *db.Batch, _ uuid.UUID) { b.SetLocal("application_name", "scan ? it's") }, "fresh/scan ? it's"},
		{"with a text statement", func(b *db.Batch, id uuid.UUID) {
			b.AddSQL("UPDATE ip_parent SET name = name || ? WHERE id = ?", " renamed?", id)
		}, "fresh renamed?/" + appName},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rolledBack(ctx, t, f.conn, func(ctx context.Context, tx bun.Tx) error {
				id := uuid.New()
				b := db.NewBatch(tx)
				b.Insert((&ipParent{ID: id, Name: "fresh"}).insert())
				c.add(b, id)
				var got ipParent
				if err := b.ScanWith(ctx, tx, &got, query, id); err != nil {
					return err
				}
				if got.ID != id || got.Name != c.want {
					t.Errorf("scanned %+v, want %s named %q", got, id, c.want)
				}
				if b.Len() != 0 {
					t.Errorf("Len %d after ScanWith, want 0", b.Len())
				}
				var withQuery []string
				for _, s := range preparedStatements(ctx, t, tx, "") {
					if strings.Contains(s, "AS name FROM ip_parent") {
						withQuery = append(withQuery, s)
					}
				}
				if len(withQuery) != 1 || withQuery[0] != db.Numbered(query) {
					t.Errorf("prepared %q, want the query on its own", withQuery)
				}
				return nil
			})
		})
	}
}

// TestScanOne scans the first row into a bun model on every kind of handle, and reports an
// empty result as sql.ErrNoRows.
func TestScanOne(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	named := "it's ? $1 \\"
	if _, err := f.d.Bun.NewUpdate().Model(&ipParent{ID: f.parents[1], Name: named}).WherePK().Exec(ctx); err != nil {
		t.Fatal(err)
	}
	handles := []struct {
		name string
		with func(fn func(bun.IDB))
	}{
		{"*bun.DB", func(fn func(bun.IDB)) { fn(f.d.Bun) }},
		{"bun.Conn", func(fn func(bun.IDB)) { fn(f.conn) }},
		{"bun.Tx", func(fn func(bun.IDB)) {
			rolledBack(ctx, t, f.conn, func(_ context.Context, tx bun.Tx) error { fn(tx); return nil })
		}},
		{"*bun.Conn (through bun)", func(fn func(bun.IDB)) { fn(&f.conn) }},
	}
	for _, h := range handles {
		t.Run(h.name, func(t *testing.T) {
			h.with(func(idb bun.IDB) {
				var got ipParent
				if err := db.ScanOne(ctx, idb, &got, "SELECT * FROM ip_parent WHERE name = ?", named); err != nil || got.ID != f.parents[1] {
					t.Errorf("by name: %+v, %v", got, err)
				}
				got = ipParent{}
				if err := db.ScanOne(ctx, idb, &got, "SELECT * FROM ip_parent WHERE name <> ? ORDER BY name", "none"); err != nil ||
					got.ID != f.parents[1] {
					t.Errorf("first of two: %+v, %v; want %s", got, err, f.parents[1])
				}
				if err := db.ScanOne(ctx, idb, &got, "SELECT * FROM ip_parent WHERE name = ?", "missing"); !errors.Is(err, sql.ErrNoRows) {
					t.Errorf("no row: err %v, want sql.ErrNoRows", err)
				}
			})
		})
	}
}

func TestScanOneIsPreparedOnTheConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	const query = "SELECT * FROM ip_child WHERE parent_id = ? AND body = ?"
	for range 3 {
		var got ipChild
		if err := db.ScanOne(ctx, f.conn, &got, query, f.parents[0], "c0"); err != nil || got.ID != f.child {
			t.Fatalf("%+v, %v", got, err)
		}
	}
	if n := preparedOn(t, f.conn.Conn, "SELECT * FROM ip_child WHERE parent_id = $1 AND body = $2"); n != 1 {
		t.Errorf("statement prepared %d times on the connection, want once", n)
	}
}

func TestNumbered(t *testing.T) {
	t.Parallel()
	for query, want := range map[string]string{
		"a = ? AND b = ?":              "a = $1 AND b = $2",
		"":                             "",
		"no placeholder":               "no placeholder",
		"?":                            "$1",
		strings.Repeat("?,", 11) + "?": "$1,$2,$3,$4,$5,$6,$7,$8,$9,$10,$11,$12",
		"héllo ? 世界 ?":                 "héllo $1 世界 $2",
	} {
		if got := db.Numbered(query); got != want {
			t.Errorf("Numbered(%q) = %q, want %q", query, got, want)
		}
	}
}
