// Package feed is the one change feed: every state change of a job or an operation writes an
// event row in the transaction that makes the change; a sequencer numbers committed events in
// the order they became visible; every server process LISTENs and fans new events out to its
// subscribers. Reconnecting readers replay from the table, so nothing depends on a notification
// arriving.
package feed

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"

	"asterion/db"
)

// Notification channels.
const (
	// eventsChannel is notified by the sequencer: events up to the payload's seq are readable.
	eventsChannel = "asterion_events"
	// sequencerLock serialises sequencers across processes.
	sequencerLock int64 = 0x6173746576736571
)

// Topics of events.
const (
	TopicJob       = "job"
	TopicOperation = "operation"
)

// Event is one numbered change.
type Event struct {
	Seq         int64      `json:"seq"`
	Topic       string     `json:"topic"`
	OrgID       int64      `json:"org_id"`
	UserID      int64      `json:"user_id"`
	PromptID    *uuid.UUID `json:"prompt_id,omitempty"`
	JobID       *uuid.UUID `json:"job_id,omitempty"`
	OperationID *uuid.UUID `json:"operation_id,omitempty"`
	// Payload is compact JSON (one line) once read back from the table.
	Payload   json.RawMessage `json:"payload"`
	CreatedAt time.Time       `json:"created_at"`
}

// Publish records an event inside the caller's transaction; it becomes visible, and is
// numbered, only if that transaction commits.
//
// Writers do not NOTIFY: PostgreSQL serialises the commits of every transaction that sent a
// notification behind one lock held across the commit's WAL flush, which capped every job
// transaction at one commit per flush. Hubs instead look for unnumbered events every few
// milliseconds through a partial index (see Hub), and only the sequencer notifies.
func Publish(ctx context.Context, tx bun.IDB, e Event) error {
	if _, err := Insert(tx, e).Exec(ctx); err != nil {
		return fmt.Errorf("publish %s event: %w", e.Topic, err)
	}
	return nil
}

// Insert is the statement Publish runs, for a caller that batches it with its other writes
// (same transaction, same rules).
func Insert(tx bun.IDB, e Event) *bun.InsertQuery {
	return tx.NewInsert().Model(Row(e))
}

// Row is the unnumbered event row of e, for a caller that batches its insert.
func Row(e Event) *db.Event {
	return &db.Event{Topic: e.Topic, OrgID: e.OrgID, UserID: e.UserID, PromptID: e.PromptID, JobID: e.JobID,
		OperationID: e.OperationID, Payload: e.Payload}
}

// Pending reports whether committed events wait to be numbered (an index-only probe).
func Pending(ctx context.Context, bunDB bun.IDB) (bool, error) {
	var ok bool
	err := bunDB.QueryRowContext(ctx, pendingEventsSQL).Scan(&ok)
	return ok, err
}

// Sequence numbers every committed, unnumbered event in id order after the highest number given
// so far, and announces the new high mark. It returns the high mark and how many it numbered.
// Sequencers in several processes take turns on an advisory lock, so numbers never interleave.
//
// The lock and the numbering go to the server in one round trip, as one pipelined implicit
// transaction: the sequencer runs after nearly every commit of a busy process, and the four
// round trips of an explicit transaction (begin, lock, number, commit) cost more than the
// numbering. The numbering statement takes its snapshot after the lock is granted (each
// statement of a READ COMMITTED transaction has its own), so it never numbers an event that
// the sequencer before it numbered; a failure rolls the whole batch back at its end.
func Sequence(ctx context.Context, pool *pgxpool.Pool) (last int64, n int, err error) {
	b := &pgx.Batch{}
	b.Queue(lockSequencer, sequencerLock)
	b.Queue(sequenceEvents, eventsChannel).QueryRow(func(row pgx.Row) error {
		return row.Scan(&last, &n, nil)
	})
	if err := pool.SendBatch(ctx, b).Close(); err != nil {
		return 0, 0, fmt.Errorf("sequence events: %w", err)
	}
	return last, n, nil
}

// lockSequencer takes the sequencer's turn and keeps the numbering on idx_event_unsequenced,
// walked in id order. A numbered event leaves its unnumbered version behind until VACUUM; an
// index scan marks such entries dead as it meets them, so the next run skips them, but a bitmap
// scan (which the planner picks for a table it has no statistics of, on a new install or with
// autovacuum off) or a sequential scan visits every one each time, and the sequencer, which runs
// after nearly every commit, slows down the longer the server runs.
const lockSequencer = `SELECT pg_advisory_xact_lock($1), set_config('enable_bitmapscan', 'off', true),
    set_config('enable_seqscan', 'off', true)`

// sequenceEvents numbers up to 10000 pending events after the cursor, moves the cursor, and
// notifies $1 with the new high mark when it numbered any (delivered at commit).
const sequenceEvents = `
WITH pending AS (
    SELECT id, row_number() OVER (ORDER BY id) AS rn FROM sa_event WHERE seq IS NULL ORDER BY id LIMIT 10000
), cur AS (
    SELECT last_seq FROM sa_event_cursor WHERE id = 1
), upd AS (
    UPDATE sa_event e SET seq = cur.last_seq + pending.rn FROM pending, cur WHERE e.id = pending.id RETURNING e.seq
), moved AS (
    UPDATE sa_event_cursor SET last_seq = last_seq + (SELECT count(*) FROM upd) WHERE id = 1
    RETURNING last_seq, (SELECT count(*) FROM upd)::int AS n
)
SELECT last_seq, n, CASE WHEN n > 0 THEN pg_notify($1, last_seq::text) END FROM moved`

// Scope limits which events a reader may see.
type Scope struct {
	// AllOrgs sees every org (admins).
	AllOrgs bool
	// OrgID is the reader's org.
	OrgID int64
	// UserID, when non-zero, limits to events about that user's own work (members).
	UserID int64
	// Topics, when non-empty, limits to these topics.
	Topics []string
}

// Allows reports whether e is inside the scope.
func (s Scope) Allows(e Event) bool {
	if !s.AllOrgs && e.OrgID != s.OrgID {
		return false
	}
	if s.UserID != 0 && e.UserID != s.UserID {
		return false
	}
	if len(s.Topics) > 0 {
		for _, t := range s.Topics {
			if t == e.Topic {
				return true
			}
		}
		return false
	}
	return true
}

// ErrReplayGone reports a replay from a point the retained feed no longer reaches back to (or
// past its end): some events after it were pruned, so the reader starts from a snapshot.
var ErrReplayGone = errors.New("the events after this point are no longer retained")

// Replay returns numbered events after seq inside scope, oldest first, at most limit, or
// ErrReplayGone when some event after seq is no longer kept. A scoped replay walks the event
// index of its org (and user), idx_event_org_seq or idx_event_org_user_seq, from seq on, and
// stops at limit; it never walks the feed's seq order filtering out other tenants' events.
// The org is compared as "= ANY" of a one-element array on purpose: a plain equality makes
// the planner treat org_id as a constant, so that seq order alone satisfies the ORDER BY and
// sa_event_seq_key, filtered, looks as good as the scope index whenever the statistics make
// the scope look common (and a scope whose events are all recent then walks the whole feed).
// As an array comparison the ORDER BY needs org_id first, which only the scope indexes give.
func Replay(ctx context.Context, bunDB bun.IDB, after int64, scope Scope, limit int) ([]Event, error) {
	if err := checkRetained(ctx, bunDB, after); err != nil {
		return nil, err
	}
	q := bunDB.NewSelect().Model((*db.Event)(nil)).Where("seq > ?", after).Limit(limit)
	switch {
	case scope.AllOrgs:
		q = q.OrderExpr("seq")
	case scope.UserID != 0:
		q = q.Where("org_id = ANY (?)", pgdialect.Array([]int64{scope.OrgID})).Where("user_id = ?", scope.UserID).
			OrderExpr("org_id, user_id, seq")
	default:
		q = q.Where("org_id = ANY (?)", pgdialect.Array([]int64{scope.OrgID})).OrderExpr("org_id, seq")
	}
	if len(scope.Topics) > 0 {
		q = q.Where("topic IN (?)", bun.List(scope.Topics))
	}
	var rows []db.Event
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("replay events after %d: %w", after, err)
	}
	out := make([]Event, len(rows))
	for i, r := range rows {
		out[i] = fromRow(r)
	}
	return out, nil
}

// checkRetained returns ErrReplayGone unless every event numbered after seq is still kept:
// numbers are given without gaps, so that holds when the oldest kept event is at most seq+1
// (or, none being kept, when none was numbered after seq).
func checkRetained(ctx context.Context, bunDB bun.IDB, after int64) error {
	var oldest sql.NullInt64
	var last int64
	if err := bunDB.QueryRowContext(ctx, retainedBoundsSQL).Scan(&oldest, &last); err != nil {
		return fmt.Errorf("read the retained feed's bounds: %w", err)
	}
	if after > last || (oldest.Valid && after+1 < oldest.Int64) || (!oldest.Valid && after < last) {
		return fmt.Errorf("replay after %d (kept: %d..%d): %w", after, oldest.Int64, last, ErrReplayGone)
	}
	return nil
}

// HighMark returns the highest event number given so far.
func HighMark(ctx context.Context, bunDB bun.IDB) (int64, error) {
	var last int64
	if err := bunDB.QueryRowContext(ctx, highMarkSQL).Scan(&last); err != nil {
		return 0, fmt.Errorf("read event high mark: %w", err)
	}
	return last, nil
}

// fromRow converts a stored event. PostgreSQL prints jsonb with spaces; the payload is
// compacted here, once per event read, rather than by each of the streams it fans out to.
func fromRow(r db.Event) Event {
	var seq int64
	if r.Seq != nil {
		seq = *r.Seq
	}
	payload := json.RawMessage(`{}`)
	var b bytes.Buffer
	if err := json.Compact(&b, r.Payload); err == nil {
		payload = b.Bytes()
	}
	return Event{Seq: seq, Topic: r.Topic, OrgID: r.OrgID, UserID: r.UserID, PromptID: r.PromptID, JobID: r.JobID,
		OperationID: r.OperationID, Payload: payload, CreatedAt: r.CreatedAt}
}
