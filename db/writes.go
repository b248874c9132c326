package db

import (
	"context"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/schema"
)

// Writes is the writes of one transaction: it wraps the transaction, collects the writes that
// need no answer (Insert, Update, SetLocal, Add...) and sends them in one round trip, as one
// prepared statement where it can (see Batch), at the latest when Send is called before the
// transaction commits.
//
// It is also the one place that keeps the rule that a read sees only sent writes. ScanOne
// sends the pending writes, then reads: the read sees every write made through Writes before
// it. ScanWith sends them in the read's own statement (its WITH clause), one round trip, for a
// statement that writes rows referencing them; such a read does not see them. Tx sends them
// before handing out the transaction for statements Writes does not make (bun's query
// builders, River's inserts, another component's own reads).
type Writes struct {
	tx    bun.Tx
	batch *Batch
}

// NewWrites starts the writes of tx, none pending.
func NewWrites(tx bun.Tx) *Writes {
	return &Writes{tx: tx, batch: NewBatch(tx)}
}

// Insert adds the insert of one row (an entity's InsertStatement); inserts of one entity
// added one after another go as one multi-row INSERT.
func (w *Writes) Insert(s Statement) { w.batch.Insert(s) }

// Update adds an UPDATE with parameters (such as an entity's UpdateStatement).
func (w *Writes) Update(s Statement) { w.batch.Update(s) }

// UpdateSQL adds an UPDATE of table written by hand, its ? placeholders filled by args.
func (w *Writes) UpdateSQL(table, query string, args ...any) {
	w.batch.UpdateSQL(table, query, args...)
}

// SetLocal adds a setting for the rest of the transaction (SET LOCAL name = value).
func (w *Writes) SetLocal(name, value string) { w.batch.SetLocal(name, value) }

// Add adds a built bun query (insert, update, delete); it makes the writes go as text.
func (w *Writes) Add(q schema.QueryAppender) error { return w.batch.Add(q) }

// Pending is the number of statements not sent yet.
func (w *Writes) Pending() int { return w.batch.Len() }

// Send sends every pending write now, in one round trip; with none pending it does nothing.
func (w *Writes) Send(ctx context.Context) error {
	return w.batch.Exec(ctx, w.tx)
}

// ScanOne sends the pending writes, then runs query (with ? placeholders, prepared on the
// connection) and scans its first row into dest, a bun model; sql.ErrNoRows when there is
// none. The query sees every write made through w before it.
func (w *Writes) ScanOne(ctx context.Context, dest any, query string, args ...any) error {
	if err := w.Send(ctx); err != nil {
		return err
	}
	return ScanOne(ctx, w.tx, dest, query, args...)
}

// ScanWith runs query with the pending writes in its WITH clause, as one statement (see
// Batch.ScanWith), and scans its first row into dest. The query does not see those writes,
// but its rows may reference theirs; on sql.ErrNoRows the writes have happened all the same.
func (w *Writes) ScanWith(ctx context.Context, dest any, query string, args ...any) error {
	return w.batch.ScanWith(ctx, w.tx, dest, query, args...)
}

// OneStatement reports whether ScanWith would send the pending writes and its query as one
// statement (see Batch.OneStatement); otherwise the writes go first, in a statement of their
// own.
func (w *Writes) OneStatement() bool { return w.batch.OneStatement(w.tx) }

// Tx sends the pending writes and returns the transaction, for a statement Writes does not
// make; that statement sees every write made through w before it.
func (w *Writes) Tx(ctx context.Context) (bun.Tx, error) {
	if err := w.Send(ctx); err != nil {
		return bun.Tx{}, err
	}
	return w.tx, nil
}
