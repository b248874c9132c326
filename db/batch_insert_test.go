package db_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
)

// tricky is text that a placeholder rewrite or an inlining would break.
var tricky = "what? it's ?1 and $1; -- héllo wörld 世界 🚀 and a \\ backslash, C:\\path\\n"

const fkDDL = `CREATE TABLE ip_parent (id uuid PRIMARY KEY, name text NOT NULL UNIQUE);
CREATE TABLE ip_child (id uuid PRIMARY KEY, parent_id uuid NOT NULL REFERENCES ip_parent (id), body text NOT NULL)`

type ipParent struct {
	bun.BaseModel `bun:"table:ip_parent"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	Name          string    `bun:"name"`
}

type ipChild struct {
	bun.BaseModel `bun:"table:ip_child"`
	ID            uuid.UUID `bun:"id,pk,type:uuid"`
	ParentID      uuid.UUID `bun:"parent_id,type:uuid"`
	Body          string    `bun:"body"`
}

// The test tables' statements are written as bun writes them, so the prepared texts read the
// same as for a bun model.
const (
	insertParentSQL = `INSERT INTO "ip_parent" ("id", "name") VALUES (?, ?)`
	updateParentSQL = `UPDATE "ip_parent" SET "name" = ? WHERE "id" = ?`
	insertChildSQL  = `INSERT INTO "ip_child" ("id", "parent_id", "body") VALUES (?, ?, ?)`
	updateChildSQL  = `UPDATE "ip_child" SET "parent_id" = ?, "body" = ? WHERE "id" = ?`
)

func (p *ipParent) insert() db.Statement {
	return db.Statement{Table: "ip_parent", SQL: insertParentSQL, Args: []any{p.ID.String(), p.Name}}
}

func (p *ipParent) update() db.Statement {
	return db.Statement{Table: "ip_parent", SQL: updateParentSQL, Args: []any{p.Name, p.ID.String()}}
}

func (c *ipChild) insert() db.Statement {
	return db.Statement{Table: "ip_child", SQL: insertChildSQL, Args: []any{c.ID.String(), c.ParentID.String(), c.Body}}
}

func (c *ipChild) update() db.Statement {
	return db.Statement{Table: "ip_child", SQL: updateChildSQL, Args: []any{c.ParentID.String(), c.Body, c.ID.String()}}
}

func countRows(ctx context.Context, t *testing.T, idb bun.IDB, table string) int {
	t.Helper()
	var n int
	if err := idb.QueryRowContext(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestBatchInsertChildBeforeParent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, fkDDL)
	parent, child := uuid.New(), uuid.New()
	err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		b.Insert((&ipChild{ID: child, ParentID: parent, Body: "child first?"}).insert())
		b.Insert((&ipParent{ID: parent, Name: "parent"}).insert())
		return b.Exec(ctx, tx)
	})
	if err != nil {
		t.Fatalf("all-insert batch with the child before its parent: %v", err)
	}
	var got ipChild
	if err := d.Bun.NewSelect().Model(&got).Where("id = ?", child).Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if got.ParentID != parent || got.Body != "child first?" {
		t.Errorf("child row %+v", got)
	}
	if n := countRows(ctx, t, d.Bun, "ip_parent"); n != 1 {
		t.Errorf("%d parent rows, want 1", n)
	}

	// Mixed with another statement, the batch runs statement by statement, so the same order
	// breaks the foreign key: this is what the one-statement form buys.
	parent2, child2 := uuid.New(), uuid.New()
	err = d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		b.Insert((&ipChild{ID: child2, ParentID: parent2, Body: "orphan"}).insert())
		b.Insert((&ipParent{ID: parent2, Name: "parent 2"}).insert())
		b.AddSQL("SELECT 1")
		return b.Exec(ctx, tx)
	})
	if err == nil || !strings.Contains(err.Error(), "ip_child_parent_id_fkey") {
		t.Fatalf("mixed batch with the child first: %v, want the foreign key violation", err)
	}
	if n := countRows(ctx, t, d.Bun, "ip_child"); n != 1 {
		t.Errorf("%d child rows after the failed mixed batch, want 1", n)
	}
}

func TestBatchInsertUniqueViolationLeavesNoRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, fkDDL)
	existing := uuid.New()
	if _, err := d.Bun.NewInsert().Model(&ipParent{ID: existing, Name: "taken"}).Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name   string
		second string // the name the second insert uses
	}{
		{"within the batch", "dup"},
		{"against a committed row", "taken"},
	} {
		t.Run(c.name, func(t *testing.T) {
			first, second, third := uuid.New(), uuid.New(), uuid.New()
			err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				b := db.NewBatch(tx)
				for _, p := range []*ipParent{{ID: first, Name: "dup"}, {ID: second, Name: c.second}} {
					b.Insert(p.insert())
				}
				b.Insert((&ipChild{ID: third, ParentID: first, Body: "c"}).insert())
				return b.Exec(ctx, tx)
			})
			if !db.IsUniqueViolation(err, "ip_parent_name_key") {
				t.Fatalf("err %v, want the unique violation on ip_parent_name_key", err)
			}
			var n int
			if err := d.Bun.QueryRowContext(ctx, "SELECT count(*) FROM ip_parent WHERE id IN (?, ?)", first, second).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d parent rows of the failed batch survived", n)
			}
			if n := countRows(ctx, t, d.Bun, "ip_child"); n != 0 {
				t.Errorf("%d child rows of the failed batch survived", n)
			}
			var name string
			if err := d.Bun.QueryRowContext(ctx, "SELECT name FROM ip_parent WHERE id = ?", existing).Scan(&name); err != nil || name != "taken" {
				t.Errorf("committed row: %q, %v", name, err)
			}
		})
	}
}

func TestBatchMixedInsertAndSQLKeepsOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, fkDDL)
	parent, child := uuid.New(), uuid.New()
	err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		b.Insert((&ipParent{ID: parent, Name: "p ? $1 it's"}).insert())
		// Runs after the insert before it and sees its row.
		b.AddSQL("UPDATE ip_parent SET name = name || ? WHERE id = ?", " updated?", parent)
		b.Insert((&ipChild{ID: child, ParentID: parent, Body: tricky}).insert())
		if err := b.Add(tx.NewUpdate().Model((*ipChild)(nil)).Set("body = body || ?", "!").Where("id = ?", child)); err != nil {
			return err
		}
		if b.Len() != 4 {
			t.Errorf("Len %d, want 4", b.Len())
		}
		return b.Exec(ctx, tx)
	})
	if err != nil {
		t.Fatal(err)
	}
	var name, body string
	if err := d.Bun.QueryRowContext(ctx, "SELECT name FROM ip_parent WHERE id = ?", parent).Scan(&name); err != nil {
		t.Fatal(err)
	}
	if name != "p ? $1 it's updated?" {
		t.Errorf("parent name %q: the UPDATE did not see the row inserted before it", name)
	}
	if err := d.Bun.QueryRowContext(ctx, "SELECT body FROM ip_child WHERE id = ?", child).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if body != tricky+"!" {
		t.Errorf("child body %q, want %q", body, tricky+"!")
	}
}

// TestBatchInsertIsPreparedOnTheConnection checks that an all-insert batch reaches the driver
// with arguments, so the connection prepares it once and reuses it.
func TestBatchInsertIsPreparedOnTheConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDBWith(ctx, t, fkDDL)
	conn, err := d.Bun.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for i := range 3 {
		parent := uuid.New()
		b := db.NewBatch(conn)
		b.Insert((&ipParent{ID: parent, Name: fmt.Sprintf("p%d", i)}).insert())
		b.Insert((&ipChild{ID: uuid.New(), ParentID: parent, Body: "c"}).insert())
		if err := b.Exec(ctx, conn); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := conn.Conn.QueryRowContext(ctx,
		"SELECT count(*) FROM pg_prepared_statements WHERE statement LIKE 'WITH b0 AS (INSERT INTO %'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d prepared batch statements after three batches of the same shape, want 1", n)
	}
	if got := countRows(ctx, t, d.Bun, "ip_child"); got != 3 {
		t.Errorf("%d child rows, want 3", got)
	}
}

// newDBWith is a fresh test database with the tables of ddl.
func newDBWith(ctx context.Context, t *testing.T, ddl string) *dbtest.DB {
	t.Helper()
	d := dbtest.New(t)
	if _, err := d.Bun.ExecContext(ctx, ddl); err != nil {
		t.Fatal(err)
	}
	return d
}
