package db

import (
	"context"
	"errors"
	"fmt"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/driver/pgdriver"
	"github.com/uptrace/bun/schema"
)

// Batch collects write statements that need no answer and sends them to PostgreSQL in one
// round trip. bun's pgdriver speaks the simple query protocol with arguments already inlined,
// so several statements separated by semicolons travel as one message and run in order inside
// the surrounding transaction; the first failing statement fails the whole batch (and the
// transaction). A hot path that would otherwise wait for a dozen round trips waits for one.
//
// Statements in a batch run only at Exec: a read made before Exec does not see them.
type Batch struct {
	gen schema.QueryGen
	buf []byte
	n   int
}

// NewBatch starts an empty batch formatted for idb's dialect.
func NewBatch(idb bun.IDB) *Batch {
	return &Batch{gen: idb.NewSelect().DB().QueryGen()}
}

// Add appends a built bun query (insert, update, delete).
func (b *Batch) Add(q schema.QueryAppender) error {
	start := len(b.buf)
	if b.n > 0 {
		b.buf = append(b.buf, ";\n"...)
	}
	out, err := q.AppendQuery(b.gen, b.buf)
	if err != nil {
		b.buf = b.buf[:start]
		return fmt.Errorf("format batched statement: %w", err)
	}
	b.buf = out
	b.n++
	return nil
}

// AddSQL appends a statement written by hand; args fill its ? placeholders.
func (b *Batch) AddSQL(query string, args ...any) {
	if b.n > 0 {
		b.buf = append(b.buf, ";\n"...)
	}
	b.buf = b.gen.AppendQuery(b.buf, query, args...)
	b.n++
}

// Len is the number of statements waiting.
func (b *Batch) Len() int { return b.n }

// Exec sends every waiting statement in one round trip on idb and empties the batch.
func (b *Batch) Exec(ctx context.Context, idb bun.IDB) error {
	if b.n == 0 {
		return nil
	}
	query := string(b.buf)
	b.buf, b.n = b.buf[:0], 0
	// Without arguments bun passes the text through untouched, so a literal "?" inside a
	// prompt's text is never read as a placeholder.
	_, err := idb.ExecContext(ctx, query)
	if err != nil {
		return fmt.Errorf("run batched statements: %w", err)
	}
	return nil
}

// IsUniqueViolation reports whether err is PostgreSQL's unique_violation on constraint.
func IsUniqueViolation(err error, constraint string) bool {
	var pgErr pgdriver.Error
	return errors.As(err, &pgErr) && pgErr.Field('C') == "23505" && pgErr.Field('n') == constraint
}
