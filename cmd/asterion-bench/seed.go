package main

// Seeding of Asterion's own tables with plain SQL, for the phases that need a large database
// (pages) or a standing backlog (growth). Each table gets one INSERT … SELECT over
// generate_series (or over the River jobs just inserted), in a session with
// session_replication_role = replica, so no trigger runs: neither the foreign-key checks (every
// row is made consistent by construction) nor the counter triggers, whose work the same
// statement does in bulk by appending one delta row per (org, state) to sa_job_count and
// sa_operation_count. Status histories are real digest chains (the entry digests are computed
// in SQL exactly as deferred.entryDigest does), so detail pages verify them as they would
// verify the server's own.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"asterion/jobs"
)

// seeder writes bench rows into one asterion database.
type seeder struct {
	pool *pgxpool.Pool
	// now is the database's clock when the seeder was made, to the second.
	now time.Time
}

// owner is a user and its org.
type owner struct{ org, user int64 }

// newSeeder reads the database's clock.
func newSeeder(ctx context.Context, pool *pgxpool.Pool) (*seeder, error) {
	s := &seeder{pool: pool}
	if err := pool.QueryRow(ctx, `SELECT date_trunc('second', now())`).Scan(&s.now); err != nil {
		return nil, fmt.Errorf("read the database clock: %w", err)
	}
	return s, nil
}

// ownerOf looks up a user by name.
func (s *seeder) ownerOf(ctx context.Context, name string) (owner, error) {
	var o owner
	if err := s.pool.QueryRow(ctx, `SELECT org_id, id FROM users WHERE name = $1`, name).Scan(&o.org, &o.user); err != nil {
		return o, fmt.Errorf("look up user %s: %w", name, err)
	}
	return o, nil
}

// seedBatch is a range of finished rows to seed: from ≤ i < to, created between base − 2.5 s ×
// from and base − 2.5 s × to, owned by every20th when i is a multiple of 20, else by rest.
type seedBatch struct {
	from, to        int
	base            time.Time
	rest, every20th owner
}

// inSeedTx runs stmt with args in its own transaction with triggers off and asynchronous
// commit.
func (s *seeder) inSeedTx(ctx context.Context, what, stmt string, args ...any) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return fmt.Errorf("turn triggers off for seeding: %w", err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return fmt.Errorf("set asynchronous commit for seeding: %w", err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL work_mem = '256MB'`); err != nil {
			return fmt.Errorf("set work_mem for seeding: %w", err)
		}
		if _, err := tx.Exec(ctx, stmt, args...); err != nil {
			return fmt.Errorf("seed %s: %w", what, err)
		}
		return nil
	})
}

// seedSource numbers seeded rows $1 ≤ i < $2, in the order of h = md5('bench-' || i): the
// ids of row i are h with its last byte replaced (a1 prompt, b2 job, c3 operation; see
// seededID) and its creation time falls between $3 − 2.5 s × $1 and $3 − 2.5 s × $2, at the
// place h takes among all hashes. Ids look random, but within one step every key (ids and
// times) rises or falls with h, so rows arrive at each index in key order, as a bulk load
// does, instead of at random pages of indexes larger than the buffer cache. Row i belongs to
// org $6 / user $7 when i is a multiple of 20, else to org $4 / user $5. With $8 = 0 or 1 only
// the rows of that parity are written ($8 = -1: all; see seedFinished).
const seedSource = `SELECT i,
    (left(h, 30) || 'a1')::uuid AS prompt_id,
    (left(h, 30) || 'b2')::uuid AS job_id,
    (left(h, 30) || 'c3')::uuid AS op_id,
    CASE WHEN i % 20 = 0 THEN $6::bigint ELSE $4::bigint END AS org_id,
    CASE WHEN i % 20 = 0 THEN $7::bigint ELSE $5::bigint END AS user_id,
    $3::timestamptz - ($1::bigint + ('x' || left(h, 13))::bit(52)::bigint::float8 / 4503599627370496.0 * ($2::bigint - $1::bigint))
        * interval '2500 ms' AS t,
    i % 100 AS r,
    CASE WHEN i % 100 < 90 THEN 'completed' WHEN i % 100 < 96 THEN 'failed' ELSE 'cancelled' END AS op_status
FROM (SELECT i, md5('bench-' || i) AS h FROM generate_series($1::bigint, $2::bigint - 1) AS i
    WHERE $8::int < 0 OR i % 2 = $8::int ORDER BY h) AS g`

// seedEntities writes the prompts of finished rows.
const seedEntities = `INSERT INTO sa_entity (id, kind, body, correlation_id, truth_class, state_class, org_id, created_by, created_at, updated_at)
SELECT prompt_id, 'prompt', 'seeded bench prompt ' || i, prompt_id, 'authored', 'open', org_id, user_id, t, t + interval '1 s'
FROM (` + seedSource + `) AS s`

// seedJobs writes finished jobs: 90 % succeeded, 6 % failed after three attempts, 4 %
// cancelled.
const seedJobs = `WITH ins AS (
    INSERT INTO sa_job (id, prompt_id, state, priority, attempt, max_attempts, execution_options, worker_claim, claimed_at,
        started_at, finished_at, error_kind, error_message, org_id, created_by, created_at, updated_at, scheduled_at, operation_id)
    SELECT job_id, prompt_id,
        CASE WHEN r < 90 THEN 'succeeded' WHEN r < 96 THEN 'failed' ELSE 'cancelled' END,
        50, CASE WHEN r >= 90 AND r < 96 THEN 3 ELSE 1 END, 3, '{}'::jsonb, 'bench-seed', t + interval '5 ms',
        t + interval '6 ms', t + interval '1 s',
        CASE WHEN r >= 90 AND r < 96 THEN 'provider_5xx' END,
        CASE WHEN r >= 90 AND r < 96 THEN 'seeded failure' END,
        org_id, user_id, t, t + interval '1 s', t, op_id
    FROM (` + seedSource + `) AS s
    RETURNING org_id, state)
INSERT INTO sa_job_count (org_id, state, n) SELECT org_id, state, count(*) FROM ins GROUP BY org_id, state`

// historyDigest is the SQL form of deferred.entryDigest for entry seq of status st at the
// formatted time ts with document digest doc after prev.
func historyDigest(ts, doc, prev, seq, st string) string {
	return `encode(sha256(convert_to('{"at":"' || ` + ts + ` || '","doc_digest":"' || ` + doc + ` || '","prev_digest":"' || ` + prev +
		` || '","seq":` + seq + `,"status":"' || ` + st + ` || '","v":"deferred-operation-history-entry.v1"}', 'UTF8')), 'hex')`
}

// sqlTime formats a timestamptz expression as deferred.FormatTime does.
func sqlTime(expr string) string {
	return `to_char((` + expr + `) AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`
}

const genesisDigest = `'0000000000000000000000000000000000000000000000000000000000000000'`

// seedDigests adds, to each row s of seedSource, the two history entries' document digests
// (a.d1, a.d2) and formatted times (a.ts0, a.ts1), and their entry digests (b.e1, c.e2).
var seedDigests = `CROSS JOIN LATERAL (SELECT md5('bench-doc1-' || s.i) || md5('bench-doc1b-' || s.i) AS d1,
        md5('bench-doc2-' || s.i) || md5('bench-doc2b-' || s.i) AS d2,
        ` + sqlTime("s.t") + ` AS ts0, ` + sqlTime("s.t + interval '1 s'") + ` AS ts1) AS a
    CROSS JOIN LATERAL (SELECT ` + historyDigest("a.ts0", "a.d1", genesisDigest, "1", "'pending'") + ` AS e1) AS b
    CROSS JOIN LATERAL (SELECT ` + historyDigest("a.ts1", "a.d2", "b.e1", "2", "s.op_status") + ` AS e2) AS c`

// seedOperations writes finished operations (90 % completed, 6 % failed, 4 % cancelled).
var seedOperations = `WITH ops AS (
    INSERT INTO sa_operation (id, kind, owner, status, org_id, created_by, subject, correlation_id, accepted_at, expires_at,
        retry_after_seconds, last_error_kind, last_error_message, next_poll_at, poll_count, terminal_at, updated_at,
        history_seq, history_digest, history_at)
    SELECT s.op_id, '` + jobs.KindPromptExecute + `', '` + jobs.OwnerPromptRuntime + `', s.op_status, s.org_id, s.user_id,
        jsonb_build_object('prompt_id', s.prompt_id, 'job_id', s.job_id), s.prompt_id, s.t, s.t + interval '15 min', 2,
        CASE WHEN s.op_status = 'failed' THEN 'provider_5xx' END, CASE WHEN s.op_status = 'failed' THEN 'seeded failure' END,
        s.t + interval '2 s', 0, s.t + interval '1 s', s.t + interval '1 s', 2, c.e2, s.t + interval '1 s'
    FROM (` + seedSource + `) AS s
    ` + seedDigests + `
    RETURNING org_id, status)
INSERT INTO sa_operation_count (org_id, status, n) SELECT org_id, status, count(*) FROM ops GROUP BY org_id, status`

// seedHistory writes each finished operation's two history entries: pending, then its final
// status a second later.
var seedHistory = `INSERT INTO sa_operation_history (operation_id, seq, status, at, doc_digest, prev_digest, entry_digest)
SELECT s.op_id, v.seq, v.status, v.at, v.doc, v.prev, v.entry
FROM (` + seedSource + `) AS s
    ` + seedDigests + `
    CROSS JOIN LATERAL (VALUES (1, 'pending', s.t, a.d1, ` + genesisDigest + `, b.e1), (2, s.op_status, s.t + interval '1 s', a.d2, b.e1, c.e2))
        AS v (seq, status, at, doc, prev, entry)`

// seedFinished adds the finished rows of b: for each a prompt, a job, an operation and its two
// history entries, the four tables written at once on separate connections. It then folds the
// counter deltas; the caller vacuums and analyses (vacuumAnalyze) when done seeding.
func (s *seeder) seedFinished(ctx context.Context, b seedBatch) error {
	from, to := b.from, b.to
	args := func(parity int) []any {
		return []any{from, to, b.base, b.rest.org, b.rest.user, b.every20th.org, b.every20th.user, parity}
	}
	// The histories are the most work (two wide rows and two digests per operation): they
	// are written in two halves at once, so that the statements end at about the same time.
	stmts := []struct {
		what, sql string
		args      []any
	}{
		{"prompts", seedEntities, args(-1)},
		{"jobs", seedJobs, args(-1)},
		{"operations", seedOperations, args(-1)},
		{"histories (even rows)", seedHistory, args(0)},
		{"histories (odd rows)", seedHistory, args(1)},
	}
	errs := make([]error, len(stmts))
	var wg sync.WaitGroup
	for k, st := range stmts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			errs[k] = s.inSeedTx(ctx, st.what, st.sql, st.args...)
			fmt.Fprintf(os.Stderr, "seed: %d %s in %.1f s\n", to-from, st.what, time.Since(start).Seconds())
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return s.compactCounts(ctx)
}

// compactCounts folds the counter deltas into one row per key, as the server does
// periodically.
func (s *seeder) compactCounts(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `SELECT asterion_compact_counts()`); err != nil {
		return fmt.Errorf("compact the counters: %w", err)
	}
	return nil
}

// vacuumAnalyze vacuums the seeded tables and refreshes the planner's statistics, as after
// any bulk load. The vacuum also spares the measurements an autovacuum that a million
// inserted rows would otherwise start in the middle of them.
func (s *seeder) vacuumAnalyze(ctx context.Context) error {
	if _, err := s.pool.Exec(ctx, `VACUUM (ANALYZE) sa_entity, sa_job, sa_operation, sa_operation_history, sa_job_count, sa_operation_count, river_job`); err != nil {
		return fmt.Errorf("vacuum and analyze the seeded tables: %w", err)
	}
	return nil
}

// seedBacklog writes the app's rows of the River jobs with id above $1 that carry the job ids
// $4, owned by org $2 and user $3: for each the prompt, the queued job carrying that River job, the pending
// operation and its first history entry, as Submit writes them.
var seedBacklog = `WITH a AS MATERIALIZED (
    SELECT rj.id AS river_id, (rj.args->>'job_id')::uuid AS job_id, rj.created_at AS t,
        md5('backlog-prompt-' || (rj.args->>'job_id'))::uuid AS prompt_id,
        md5('backlog-op-' || (rj.args->>'job_id'))::uuid AS op_id,
        md5('backlog-doc1-' || rj.id) || md5('backlog-doc1b-' || rj.id) AS d1,
        ` + sqlTime("rj.created_at") + ` AS ts0
    FROM river_job AS rj
    JOIN unnest($4::uuid[]) AS mine (job_id) ON mine.job_id = (rj.args->>'job_id')::uuid
    WHERE rj.kind = '` + jobs.KindPromptExecute + `' AND rj.id > $1),
b AS MATERIALIZED (SELECT a.*, ` + historyDigest("ts0", "d1", genesisDigest, "1", "'pending'") + ` AS e1 FROM a),
ent AS (
    INSERT INTO sa_entity (id, kind, body, correlation_id, truth_class, state_class, org_id, created_by, created_at, updated_at)
    SELECT prompt_id, 'prompt', 'backlog prompt ' || river_id, prompt_id, 'authored', 'open', $2, $3, t, t FROM b),
ops AS (
    INSERT INTO sa_operation (id, kind, owner, status, org_id, created_by, subject, correlation_id, accepted_at, expires_at,
        retry_after_seconds, next_poll_at, poll_count, updated_at, history_seq, history_digest, history_at)
    SELECT op_id, '` + jobs.KindPromptExecute + `', '` + jobs.OwnerPromptRuntime + `', 'pending', $2, $3,
        jsonb_build_object('prompt_id', prompt_id, 'job_id', job_id), prompt_id, t, t + interval '15 min', 2,
        t + interval '15 min', 0, t, 1, e1, t
    FROM b
    RETURNING org_id, status),
hist AS (
    INSERT INTO sa_operation_history (operation_id, seq, status, at, doc_digest, prev_digest, entry_digest)
    SELECT op_id, 1, 'pending', t, d1, ` + genesisDigest + `, e1 FROM b),
jb AS (
    INSERT INTO sa_job (id, prompt_id, state, priority, attempt, max_attempts, execution_options, org_id, created_by,
        created_at, updated_at, river_job_id, scheduled_at, operation_id)
    SELECT job_id, prompt_id, 'queued', 50, 1, 3, '{}'::jsonb, $2, $3, t, t, river_id, t, op_id FROM b
    RETURNING org_id, state),
jc AS (INSERT INTO sa_job_count (org_id, state, n) SELECT org_id, state, count(*) FROM jb GROUP BY org_id, state)
INSERT INTO sa_operation_count (org_id, status, n) SELECT org_id, status, count(*) FROM ops GROUP BY org_id, status`

// addBacklog queues n more prompt jobs of o without the API, in one transaction: River's own
// InsertManyFastTx writes the vehicles exactly as Submit's InsertTx would (kind, queue, priority
// band, attempts, args), then one statement writes the app's rows for those vehicles.
func (s *seeder) addBacklog(ctx context.Context, o owner, n int) error {
	client, err := river.NewClient(riverpgxv5.New(s.pool), &river.Config{})
	if err != nil {
		return fmt.Errorf("river insert client: %w", err)
	}
	const prio = jobs.DefaultPriority
	// vehicleMaxAttempts of package jobs, which Submit gives every vehicle.
	const vehicleMaxAttempts = 25
	ids := make([]uuid.UUID, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	err = pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica`); err != nil {
			return fmt.Errorf("turn triggers off for seeding: %w", err)
		}
		if _, err := tx.Exec(ctx, `SET LOCAL synchronous_commit = off`); err != nil {
			return fmt.Errorf("set asynchronous commit for seeding: %w", err)
		}
		var after int64
		if err := tx.QueryRow(ctx, `SELECT coalesce(max(id), 0) FROM river_job`).Scan(&after); err != nil {
			return fmt.Errorf("read the newest river job: %w", err)
		}
		for done := 0; done < n; {
			batch := min(n-done, 5000)
			params := make([]river.InsertManyParams, batch)
			for i := range params {
				params[i] = river.InsertManyParams{Args: jobs.PromptArgs{JobID: ids[done+i], Priority: prio},
					InsertOpts: &river.InsertOpts{Queue: jobs.QueuePrompts, Priority: jobs.RiverPriority(prio), MaxAttempts: vehicleMaxAttempts}}
			}
			if _, err := client.InsertManyFastTx(ctx, tx, params); err != nil {
				return fmt.Errorf("insert %d river jobs: %w", batch, err)
			}
			done += batch
		}
		if _, err := tx.Exec(ctx, seedBacklog, after, o.org, o.user, ids); err != nil {
			return fmt.Errorf("seed the backlog's rows: %w", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := s.compactCounts(ctx); err != nil {
		return err
	}
	return s.vacuumAnalyze(ctx)
}
