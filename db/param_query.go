package db

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/uptrace/bun"
)

// ScanOne runs a query written with ? placeholders as a statement with parameters, which the
// connection keeps prepared (see preparingConnector), and scans its first row into dest, a
// bun model. It returns sql.ErrNoRows when there is none. It is for the hot statements whose
// text never changes: bun would inline the arguments, and PostgreSQL would parse and plan
// every call anew.
func ScanOne(ctx context.Context, idb bun.IDB, dest any, query string, args ...any) error {
	q := rawSQL(idb)
	if q == nil {
		return idb.NewRaw(query, args...).Scan(ctx, dest)
	}
	rows, err := q.QueryContext(ctx, Numbered(query), args...)
	if err != nil {
		return err
	}
	return scanFirst(ctx, idb, rows, dest)
}

// scanFirst scans the first of rows into dest and closes rows; sql.ErrNoRows when there is
// none (bun's ScanRows reports an empty result as success).
func scanFirst(ctx context.Context, idb bun.IDB, rows *sql.Rows, dest any) error {
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return err
		}
		return sql.ErrNoRows
	}
	if err := idb.NewSelect().DB().ScanRow(ctx, rows, dest); err != nil {
		return err
	}
	for rows.Next() {
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return rows.Close()
}

// Numbered rewrites the ? placeholders of query as $1, $2, ... The query must hold no other
// question mark (no jsonb ? operator, no ? inside a literal).
func Numbered(query string) string {
	var b strings.Builder
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteByte(query[i])
	}
	return b.String()
}

// sqlHandle is what *sql.DB, *sql.Tx and *sql.Conn share.
type sqlHandle interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

// rawSQL is the database/sql handle under idb, which passes arguments on to the driver (bun
// would inline them), or nil for a handle of another kind.
func rawSQL(idb bun.IDB) sqlHandle {
	switch v := idb.(type) {
	case bun.Tx:
		return v.Tx
	case *bun.Tx:
		return v.Tx
	case *bun.DB:
		return v.DB
	case bun.Conn:
		return v.Conn
	}
	return nil
}
