package db

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/schema"
)

// Batch collects write statements that need no answer and sends them to PostgreSQL in one
// round trip. It is the composition under Writes, through which the application writes.
//
// A batch of rows added with Insert only goes out as one statement with parameters (each row
// an INSERT in a WITH clause), which the connection prepares once and afterwards only binds
// and executes: PostgreSQL skips parsing, analysing and planning, which on the hot paths cost
// more than the writes themselves. Inserts of new rows cannot see or disturb one another, so
// running them as one statement changes nothing but the cost; foreign keys between them are
// checked at the end of the statement, when every row is in.
//
// A batch holding any other statement (Add, AddSQL) goes out as text: bun's pgdriver speaks
// the simple query protocol with arguments inlined, so the statements, separated by
// semicolons, travel as one message and run in order inside the surrounding transaction.
//
// Either way the first failing statement fails the whole batch (and the transaction), and the
// statements run only at Exec: a read made before Exec does not see them.
type Batch struct {
	gen   schema.QueryGen
	parts []batchPart
}

// batchPart is one statement: text ready to send, or, for the kinds written with parameters,
// text with ? placeholders and the values that fill them.
type batchPart struct {
	text  string
	args  []any
	kind  partKind
	table string // of an insert or an update
	// row is the one-row text of an insert, which a following insert of the same columns
	// joins as another row of VALUES.
	row string
}

// maxInsertArgs bounds the parameters of one multi-row insert, well inside PostgreSQL's 65535
// per statement.
const maxInsertArgs = 16384

type partKind int

const (
	partText partKind = iota
	partInsert
	partUpdate
	partSetting
)

// NewBatch starts an empty batch formatted for idb's dialect.
func NewBatch(idb bun.IDB) *Batch {
	return &Batch{gen: idb.NewSelect().DB().QueryGen()}
}

// Insert appends the insert of one row, s (an entity's InsertStatement: one row of VALUES
// with its arguments). An insert of the same text as the insert just before it joins that
// insert as another row of VALUES: one statement writing many rows costs PostgreSQL little
// more than one writing a single row, and rows inserted together cannot see one another
// either way.
func (b *Batch) Insert(s Statement) {
	if n := len(b.parts); n > 0 {
		last := &b.parts[n-1]
		if last.kind == partInsert && last.row == s.SQL && len(last.args)+len(s.Args) <= maxInsertArgs {
			last.text += ", " + s.SQL[strings.LastIndex(s.SQL, " VALUES (")+len(" VALUES "):]
			last.args = append(last.args, s.Args...)
			return
		}
	}
	b.parts = append(b.parts, batchPart{text: s.SQL, args: s.Args, kind: partInsert, table: s.Table, row: s.SQL})
}

// Update appends an UPDATE with parameters, s (such as an entity's UpdateStatement). A batch
// sent as one statement may update a table only once: two updates of one row in one
// statement would not see each other.
func (b *Batch) Update(s Statement) {
	b.parts = append(b.parts, batchPart{text: s.SQL, args: s.Args, kind: partUpdate, table: s.Table})
}

// UpdateSQL appends an UPDATE of table written by hand, its ? placeholders filled by args as
// parameters; like Update, it can travel in one statement with the batch's other writes.
func (b *Batch) UpdateSQL(table, query string, args ...any) {
	b.Update(Statement{Table: table, SQL: query, Args: args})
}

// SetLocal appends a setting for the rest of the transaction (SET LOCAL name = value).
func (b *Batch) SetLocal(name, value string) {
	b.parts = append(b.parts, batchPart{text: "set_config(?, ?, true)", args: []any{name, value}, kind: partSetting})
}

// Add appends a built bun query (insert, update, delete).
func (b *Batch) Add(q schema.QueryAppender) error {
	out, err := q.AppendQuery(b.gen, nil)
	if err != nil {
		return fmt.Errorf("format batched statement: %w", err)
	}
	b.parts = append(b.parts, batchPart{text: string(out)})
	return nil
}

// AddSQL appends a statement written by hand; args fill its ? placeholders.
func (b *Batch) AddSQL(query string, args ...any) {
	b.parts = append(b.parts, batchPart{text: string(b.gen.AppendQuery(nil, query, args...))})
}

// Len is the number of statements waiting.
func (b *Batch) Len() int { return len(b.parts) }

// Exec sends every waiting statement in one round trip on idb and empties the batch.
func (b *Batch) Exec(ctx context.Context, idb bun.IDB) error {
	if len(b.parts) == 0 {
		return nil
	}
	parts := b.parts
	b.parts = nil
	if exec := rawSQL(idb); exec != nil && combinable(parts) {
		query, args := combined(parts, nil)
		if _, err := exec.ExecContext(ctx, query, args...); err != nil {
			return fmt.Errorf("run batched statements: %w", err)
		}
		return nil
	}
	var buf []byte
	for i, p := range parts {
		if i > 0 {
			buf = append(buf, ";\n"...)
		}
		switch p.kind {
		case partText:
			buf = append(buf, p.text...)
		case partSetting:
			buf = b.gen.AppendQuery(append(buf, "SELECT "...), p.text, p.args...)
		default:
			buf = b.gen.AppendQuery(buf, p.text, p.args...)
		}
	}
	// Without arguments bun passes the text through untouched, so a literal "?" inside a
	// prompt's text is never read as a placeholder.
	if _, err := idb.ExecContext(ctx, string(buf)); err != nil {
		return fmt.Errorf("run batched statements: %w", err)
	}
	return nil
}

// OneStatement reports whether ScanWith on idb would send the batch's writes and its query as
// one statement: the batch holds writes, all of a kind that combine, and no setting.
func (b *Batch) OneStatement(idb bun.IDB) bool {
	for _, p := range b.parts {
		if p.kind == partSetting {
			return false
		}
	}
	return len(b.parts) > 0 && combinable(b.parts) && rawSQL(idb) != nil
}

// ScanWith runs query (a statement with ? placeholders that returns rows) with the batch's
// writes in its WITH clause (continuing query's own, when it has one), as one statement the
// connection keeps prepared, scans the first row into dest (a bun model) and empties the batch. It returns sql.ErrNoRows when query
// returns no row; the writes have happened all the same, so the caller rolls back when that
// matters. Writes in the WITH clause are not visible to query, but foreign keys from query's
// rows to theirs hold: they are checked at the end of the statement. A batch that cannot go
// as one statement runs first, then query.
func (b *Batch) ScanWith(ctx context.Context, idb bun.IDB, dest any, query string, args ...any) error {
	parts := b.parts
	if !b.OneStatement(idb) {
		if err := b.Exec(ctx, idb); err != nil {
			return err
		}
		return ScanOne(ctx, idb, dest, query, args...)
	}
	b.parts = nil
	text, all := combined(parts, &batchPart{text: query, args: args})
	rows, err := rawSQL(idb).QueryContext(ctx, text, all...)
	if err != nil {
		return err
	}
	return scanFirst(ctx, idb, rows, dest)
}

// combinable reports whether parts can run as one statement: all written with parameters,
// and no table updated that another part also writes (in one statement an update would not
// see a row inserted or updated beside it).
func combinable(parts []batchPart) bool {
	updated, written := map[string]bool{}, map[string]int{}
	for _, p := range parts {
		switch p.kind {
		case partText:
			return false
		case partUpdate:
			updated[p.table] = true
		}
		if p.kind != partSetting {
			written[p.table]++
		}
	}
	for table := range updated {
		if written[table] > 1 {
			return false
		}
	}
	return true
}

// combined writes parts as one statement: the writes in a WITH clause, the last of them (or,
// when the batch holds settings, a SELECT of the settings) as the statement itself, with the
// placeholders numbered $1, $2, ... throughout.
func combined(parts []batchPart, main *batchPart) (string, []any) {
	var writes, settings []batchPart
	for _, p := range parts {
		if p.kind == partSetting {
			settings = append(settings, p)
		} else {
			writes = append(writes, p)
		}
	}
	var q strings.Builder
	var args []any
	put := func(p batchPart) {
		base := len(args)
		for _, c := range []byte(p.text) {
			if c == '?' {
				args = append(args, p.args[len(args)-base])
				fmt.Fprintf(&q, "$%d", len(args))
				continue
			}
			q.WriteByte(c)
		}
	}
	inWith := len(writes)
	if len(settings) == 0 && main == nil {
		inWith--
	}
	for i, p := range writes[:inWith] {
		if i == 0 {
			q.WriteString("WITH ")
		} else {
			q.WriteString(", ")
		}
		fmt.Fprintf(&q, "b%d AS (", i)
		put(p)
		q.WriteString(") ")
	}
	if main != nil {
		// A main statement with a WITH clause of its own continues the batch's.
		if rest, ok := strings.CutPrefix(main.text, "WITH "); ok && inWith > 0 {
			q.WriteString(", ")
			put(batchPart{text: rest, args: main.args})
			return q.String(), args
		}
		put(*main)
		return q.String(), args
	}
	if len(settings) == 0 {
		put(writes[len(writes)-1])
		return q.String(), args
	}
	q.WriteString("SELECT ")
	for i, p := range settings {
		if i > 0 {
			q.WriteString(", ")
		}
		put(p)
	}
	return q.String(), args
}

// IsUniqueViolation reports whether err is PostgreSQL's unique_violation on constraint.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr pgdriver.Error
	return errors.As(err, &pgErr) && pgErr.Field('C') == "23505" && pgErr.Field('n') == constraint
}
