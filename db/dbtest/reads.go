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

// SeedFinishedJobs writes n succeeded jobs of org, each with its prompt, created by user, and
// analyzes sa_job: the statistics then say that no job is queued or running, as after a
// drained queue. A test of how a statement reads beside a backlog moves them to the state it
// wants in a transaction of its own.
func SeedFinishedJobs(t testing.TB, idb bun.IDB, org, user int64, n int) {
	t.Helper()
	for _, q := range []string{
		`INSERT INTO sa_entity (id, kind, body, correlation_id, truth_class, state_class, org_id, created_by)
		SELECT md5('backlog ' || i)::uuid, 'prompt', 'p', md5('backlog ' || i)::uuid, 'claim', 'open', ?0, ?1
		FROM generate_series(1, ?2) AS i`,
		`INSERT INTO sa_job (id, prompt_id, state, execution_options, org_id, created_by, finished_at)
		SELECT gen_random_uuid(), md5('backlog ' || i)::uuid, 'succeeded', '{}', ?0, ?1, now()
		FROM generate_series(1, ?2) AS i`,
		"ANALYZE sa_job",
	} {
		if _, err := idb.ExecContext(context.Background(), q, org, user, n); err != nil {
			t.Fatalf("seed %d finished jobs: %v", n, err)
		}
	}
}
