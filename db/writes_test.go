package db_test

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
)

// TestWritesReadsSeeSentWrites: a read through Writes sees every write collected before it
// (ScanOne, Tx), or carries them in its own statement (ScanWith); nothing is sent before.
func TestWritesReadsSeeSentWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFKFixture(ctx, t)
	const countParents = "SELECT count(*) AS n FROM ip_parent"
	type count struct {
		N int `bun:"n"`
	}
	rolledBack(ctx, t, f.conn, func(ctx context.Context, tx bun.Tx) error {
		w := db.NewWrites(tx)
		w.Insert((&ipParent{ID: uuid.New(), Name: "pending"}).insert())
		if w.Pending() != 1 || countRows(ctx, t, tx, "ip_parent") != 2 {
			t.Errorf("%d pending, %d rows: a write went before a read asked", w.Pending(), countRows(ctx, t, tx, "ip_parent"))
		}
		var n count
		if err := w.ScanOne(ctx, &n, countParents); err != nil {
			return err
		}
		if n.N != 3 || w.Pending() != 0 {
			t.Errorf("ScanOne counted %d parents with %d pending, want 3 and 0", n.N, w.Pending())
		}

		w.Insert((&ipParent{ID: uuid.New(), Name: "carried"}).insert())
		if err := w.ScanWith(ctx, &n, countParents); err != nil {
			return err
		}
		if n.N != 3 || w.Pending() != 0 || countRows(ctx, t, tx, "ip_parent") != 4 {
			t.Errorf("ScanWith counted %d parents, want 3: the write it carried is not visible to it but happens", n.N)
		}
		if stmts := preparedStatements(ctx, t, tx, `WITH b0 AS (INSERT INTO "ip_parent"`); len(stmts) != 1 {
			t.Errorf("prepared %q, want the insert and the read as one statement", stmts)
		}

		w.Update((&ipParent{ID: f.parents[0], Name: "renamed"}).update())
		got, err := w.Tx(ctx)
		if err != nil {
			return err
		}
		if name := parentName(ctx, t, got, f.parents[0]); name != "renamed" || w.Pending() != 0 {
			t.Errorf("after Tx the parent is named %q with %d pending, want renamed and 0", name, w.Pending())
		}
		return w.Send(ctx) // nothing pending: a no-op
	})
}
