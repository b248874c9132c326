package dbtest

import (
	"context"
	"testing"

	"github.com/uptrace/bun"
)

// RowsRead is the rows of table that tx has read so far, by index and sequential scans alike
// (pg_stat_xact_user_tables): a test of how many rows a statement reads takes it before and
// after the statement, in the same transaction.
func RowsRead(t testing.TB, tx bun.Tx, table string) int64 {
	t.Helper()
	var n int64
	if err := tx.QueryRowContext(context.Background(), `SELECT coalesce(idx_tup_fetch, 0) + coalesce(seq_tup_read, 0)
		FROM pg_stat_xact_user_tables WHERE relname = ?`, table).Scan(&n); err != nil {
		t.Fatalf("read how many rows of %s the transaction read: %v", table, err)
	}
	return n
}
