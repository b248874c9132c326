package db

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// Statement is one write with parameters, as the store layer writes it: a named SQL text with
// ? placeholders, written once per entity, the table it writes and the values of its
// placeholders in order. An insert's text is one row of VALUES, so that inserts of one text
// in a batch join as rows of one statement (see Batch.Insert).
//
// Named SQL texts elsewhere use $N placeholders. ? is kept only where what runs the text needs
// it: a Statement's text, because Batch joins several texts into one statement and numbers
// their placeholders in order (Numbered); the texts of ScanOne, Writes.ScanOne and
// Writes.ScanWith, which join a batch too or fall back to bun; and the texts run through bun
// (its builder's fragments, NewRaw and the bun.IDB Exec and Query methods), whose formatter
// fills ? and bun's numbered ?N and knows no $N. A text run on database/sql or pgx directly
// takes $N.
//
// The texts keep bun's rule for a column it would write as DEFAULT: a nil pointer, or a zero
// field that is nullzero or has a default, leaves the value to the database. A column whose
// default is NULL takes NULL; one with another default takes coalesce(?, default), its value
// nil when the field is zero. The text is therefore the same for every row of an entity.
type Statement struct {
	Table string
	SQL   string
	Args  []any
}

// The argument helpers turn a model's fields into the values pgdriver sends as text: UUIDs as
// their text, JSON as its text (bytes would travel as bytea), times as times.

func uuidArg(u uuid.UUID) any { return u.String() }

func uuidPtrArg(u *uuid.UUID) any {
	if u == nil {
		return nil
	}
	return u.String()
}

func stringPtrArg(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}

func int64PtrArg(n *int64) any {
	if n == nil {
		return nil
	}
	return *n
}

// timeArg is a time bun writes as it is: the zero time is written as the zero instant (pgdriver
// would send NULL).
func timeArg(t time.Time) any {
	if t.IsZero() {
		return "0001-01-01 00:00:00+00"
	}
	return t
}

func timePtrArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return timeArg(*t)
}

// defaultTimeArg is a nullzero time whose column has a default: nil when zero, so that the
// text's coalesce(?, default) gives the default.
func defaultTimeArg(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}

// jsonArg is a JSON column bun writes as it is: a nil message is JSON null.
func jsonArg(raw json.RawMessage) any {
	if raw == nil {
		return "null"
	}
	return string(raw)
}

// defaultJSONArg is a nullzero JSON column: nil when the message is nil, so that the column
// takes its default (through the text's coalesce, or NULL when it has none).
func defaultJSONArg(raw json.RawMessage) any {
	if raw == nil {
		return nil
	}
	return string(raw)
}
