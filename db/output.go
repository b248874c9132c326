package db

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// OutputChunk is one chunk of a job's live output: the text its provider call produced
// between two flushes of the writer, numbered per attempt.
type OutputChunk struct {
	bun.BaseModel `bun:"table:sa_job_output"`
	JobID         uuid.UUID `bun:"job_id,pk"`
	Attempt       int       `bun:"attempt,pk"`
	Seq           int       `bun:"seq,pk"`
	Text          string    `bun:"text"`
	Pieces        int       `bun:"pieces"`
	PromptID      uuid.UUID `bun:"prompt_id"`
	OrgID         int64     `bun:"org_id"`
	CreatedBy     int64     `bun:"created_by"`
	At            time.Time `bun:"at"`
	GID           int64     `bun:"gid"`
}

// PendingChunk is a chunk a writer is about to store, with the claim its execution must still
// hold for the chunk to be kept.
type PendingChunk struct {
	JobID   uuid.UUID `json:"job_id"`
	Attempt int       `json:"attempt"`
	Seq     int       `json:"seq"`
	Text    string    `json:"text"`
	Pieces  int       `json:"pieces"`
	Claim   string    `json:"claim"`
}

// insertOutputSQL stores a flush of chunks in one statement: the rows come as one JSON array
// (so the text never changes and stays prepared), each is kept only while its job is running
// the same attempt under the same claim (a late writer's chunks are dropped as its results
// are, and nothing follows a cancel, so a terminal job's output is final),
// and the stored rows' gid range is announced on the channel in $2 with the writer's tag $3,
// once per flush.
//
// A flush that stored rows commits without waiting for the WAL flush (synchronous_commit off
// for its own transaction): PostgreSQL holds one cluster-wide lock across the commit of every
// transaction that notified, so with a synchronous commit each flush, and the change feed's
// sequencer behind it, waited for its own disk flush while the next one waited for the lock.
// The chunks are the live output of a running attempt: the job's finish, a durable commit
// that follows its last flush, flushes them to disk with it, and a database crash can only
// lose the last chunks of an attempt that was still running.
const insertOutputSQL = `WITH v AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb)
        AS v(job_id uuid, attempt smallint, seq integer, text text, pieces integer, claim text)
), ins AS (
    INSERT INTO sa_job_output (job_id, attempt, seq, text, pieces, prompt_id, org_id, created_by)
    SELECT v.job_id, v.attempt, v.seq, v.text, v.pieces, j.prompt_id, j.org_id, j.created_by
    FROM v JOIN sa_job j ON j.id = v.job_id AND j.state = 'running' AND j.worker_claim = v.claim AND j.attempt = v.attempt
    ON CONFLICT DO NOTHING
    RETURNING job_id, attempt, seq, text, pieces, prompt_id, org_id, created_by, at, gid
), announced AS (
    SELECT pg_notify($2, r.lo || '-' || r.hi || ' ' || $3), set_config('synchronous_commit', 'off', true)
    FROM (SELECT min(gid) AS lo, max(gid) AS hi FROM ins) r
    WHERE r.lo IS NOT NULL
)
SELECT ins.job_id, ins.attempt, ins.seq, ins.text, ins.pieces, ins.prompt_id, ins.org_id, ins.created_by, ins.at, ins.gid
FROM ins, announced
ORDER BY ins.gid`

// InsertOutput stores chunks and returns those kept, in gid order, announcing them on channel
// with tag. A chunk already stored (a retried flush) is neither stored again nor returned.
// idb is the database, not a transaction: the statement relaxes the commit of the transaction
// it runs in.
func InsertOutput(ctx context.Context, idb bun.IDB, chunks []PendingChunk, channel, tag string) ([]OutputChunk, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	payload, err := json.Marshal(chunks)
	if err != nil {
		return nil, fmt.Errorf("encode %d output chunks: %w", len(chunks), err)
	}
	rows, err := rawQuery(ctx, idb, insertOutputSQL, string(payload), channel, tag)
	if err != nil {
		return nil, fmt.Errorf("insert %d output chunks: %w", len(chunks), err)
	}
	return scanOutput(rows)
}

// outputColumns are the columns every output read returns, in scanOutput's order.
const outputColumns = `job_id, attempt, seq, text, pieces, prompt_id, org_id, created_by, at, gid`

// outputAfterSQL reads one attempt's chunks after a seq.
const outputAfterSQL = `SELECT ` + outputColumns + ` FROM sa_job_output
WHERE job_id = $1 AND attempt = $2 AND seq > $3 ORDER BY seq LIMIT $4`

// OutputAfter returns up to limit chunks of a job's attempt after seq, in seq order.
func OutputAfter(ctx context.Context, idb bun.IDB, jobID uuid.UUID, attempt, after, limit int) ([]OutputChunk, error) {
	rows, err := rawQuery(ctx, idb, outputAfterSQL, jobID, attempt, after, limit)
	if err != nil {
		return nil, fmt.Errorf("read output of job %s attempt %d after %d: %w", jobID, attempt, after, err)
	}
	return scanOutput(rows)
}

// outputRangeSQL reads the chunks of an announced gid range.
const outputRangeSQL = `SELECT ` + outputColumns + ` FROM sa_job_output
WHERE gid BETWEEN $1 AND $2 ORDER BY gid`

// OutputRange returns the chunks whose gid is in [lo, hi], in gid order: what a flush of
// another process announced (with any rows of other flushes that fell in the range).
func OutputRange(ctx context.Context, idb bun.IDB, lo, hi int64) ([]OutputChunk, error) {
	rows, err := rawQuery(ctx, idb, outputRangeSQL, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("read output chunks %d-%d: %w", lo, hi, err)
	}
	return scanOutput(rows)
}

// outputProgressSQL sums an attempt's output.
const outputProgressSQL = `SELECT count(*), coalesce(sum(pieces), 0) FROM sa_job_output
WHERE job_id = $1 AND attempt = $2`

// OutputProgress returns how many chunks an attempt has written and how many provider pieces
// (about one token each) they hold.
func OutputProgress(ctx context.Context, idb bun.IDB, jobID uuid.UUID, attempt int) (chunks, pieces int, err error) {
	rows, err := rawQuery(ctx, idb, outputProgressSQL, jobID, attempt)
	if err != nil {
		return 0, 0, fmt.Errorf("read output progress of job %s: %w", jobID, err)
	}
	defer rows.Close()
	if rows.Next() {
		err = rows.Scan(&chunks, &pieces)
	}
	if err == nil {
		err = rows.Err()
	}
	if err != nil {
		return 0, 0, fmt.Errorf("read output progress of job %s: %w", jobID, err)
	}
	return chunks, pieces, nil
}

// rawQuery runs a statement with $n parameters on the database or transaction behind idb.
func rawQuery(ctx context.Context, idb bun.IDB, query string, args ...any) (*sql.Rows, error) {
	q := rawSQL(idb)
	if q == nil {
		return nil, fmt.Errorf("unsupported bun.IDB %T", idb)
	}
	return q.QueryContext(ctx, query, args...)
}

// scanOutput reads output rows and closes them.
func scanOutput(rows *sql.Rows) ([]OutputChunk, error) {
	defer rows.Close()
	var out []OutputChunk
	for rows.Next() {
		var c OutputChunk
		if err := rows.Scan(&c.JobID, &c.Attempt, &c.Seq, &c.Text, &c.Pieces, &c.PromptID, &c.OrgID, &c.CreatedBy, &c.At, &c.GID); err != nil {
			return nil, fmt.Errorf("scan output chunk: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read output chunks: %w", err)
	}
	return out, nil
}
