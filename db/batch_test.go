package db_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/db/dbtest"
)

type batchRow struct {
	bun.BaseModel `bun:"table:batch_probe"`
	ID            int64  `bun:"id,pk"`
	Body          string `bun:"body"`
}

func TestBatchRunsStatementsInOrderAndKeepsTextIntact(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	if _, err := d.Bun.ExecContext(ctx, "CREATE TABLE batch_probe (id bigint PRIMARY KEY, body text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	tricky := "what? it's ?1 and $1; DROP TABLE batch_probe; --"
	err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		if err := b.Add(tx.NewInsert().Model(&batchRow{ID: 1, Body: tricky})); err != nil {
			return err
		}
		b.AddSQL("INSERT INTO batch_probe (id, body) VALUES (?, ?)", 2, "second ?")
		if err := b.Add(tx.NewUpdate().Model((*batchRow)(nil)).Set("body = body || ?", "!").Where("id = ?", 2)); err != nil {
			return err
		}
		if b.Len() != 3 {
			t.Errorf("Len %d, want 3", b.Len())
		}
		if err := b.Exec(ctx, tx); err != nil {
			return err
		}
		if b.Len() != 0 {
			t.Errorf("Len %d after Exec, want 0", b.Len())
		}
		return b.Exec(ctx, tx) // an empty batch is a no-op
	})
	if err != nil {
		t.Fatal(err)
	}
	var rows []batchRow
	if err := d.Bun.NewSelect().Model(&rows).Order("id").Scan(ctx); err != nil {
		t.Fatal(err)
	}
	if len(rows) != 2 || rows[0].Body != tricky || rows[1].Body != "second ?!" {
		t.Fatalf("rows %+v", rows)
	}
}

func TestBatchFailureRollsBackEveryStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	if _, err := d.Bun.ExecContext(ctx, "CREATE TABLE batch_probe (id bigint PRIMARY KEY, body text NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
		b := db.NewBatch(tx)
		b.AddSQL("INSERT INTO batch_probe (id, body) VALUES (1, 'a')")
		b.AddSQL("INSERT INTO batch_probe (id, body) VALUES (1, 'duplicate')")
		b.AddSQL("INSERT INTO batch_probe (id, body) VALUES (2, 'b')")
		return b.Exec(ctx, tx)
	})
	if err == nil || !strings.Contains(err.Error(), "batch_probe_pkey") {
		t.Fatalf("err %v, want the duplicate key violation", err)
	}
	var n int
	if err := d.Bun.NewSelect().Table("batch_probe").ColumnExpr("count(*)").Scan(ctx, &n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d rows survived a failed batch", n)
	}
}

// TestBatchOneStatement: a batch goes with a query as one statement only when it holds writes,
// all with parameters, and no setting; a built query (sent as text) or a setting sends the
// writes apart, ahead of the query.
func TestBatchOneStatement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	if _, err := d.Bun.ExecContext(ctx, "CREATE TABLE batch_one (id bigint PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	insert := db.Statement{Table: "batch_one", SQL: "INSERT INTO batch_one (id) VALUES (?)", Args: []any{1}}
	for _, c := range []struct {
		name string
		fill func(tx bun.Tx, b *db.Batch) error
		want bool
	}{
		{name: "empty", fill: func(bun.Tx, *db.Batch) error { return nil }},
		{name: "inserts", want: true, fill: func(_ bun.Tx, b *db.Batch) error { b.Insert(insert); return nil }},
		{name: "a setting", fill: func(_ bun.Tx, b *db.Batch) error {
			b.Insert(insert)
			b.SetLocal("application_name", "one")
			return nil
		}},
		{name: "a built query", fill: func(tx bun.Tx, b *db.Batch) error {
			b.Insert(insert)
			return b.Add(tx.NewDelete().Table("batch_one").Where("id = ?", 2))
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := d.Bun.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error {
				b := db.NewBatch(tx)
				if err := c.fill(tx, b); err != nil {
					return err
				}
				if got := b.OneStatement(tx); got != c.want {
					t.Errorf("OneStatement %v, want %v", got, c.want)
				}
				return errRollback
			})
			if !errors.Is(err, errRollback) {
				t.Fatal(err)
			}
		})
	}
}
