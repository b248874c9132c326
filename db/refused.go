package db

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun/driver/pgdriver"
)

// IsRefusedData reports whether err is PostgreSQL refusing what a statement would write: a
// data exception (class 22, a NUL in a text value among them), an integrity constraint
// (class 23), a limit of the server's (class 54) or an exception raised by a trigger or a
// function (P0001). The same rows written again fail the same way; a lost connection, a
// deadlock, a serialization failure or a cancelled statement do not, and are not refusals.
func IsRefusedData(err error) bool {
	var code string
	var pgErr pgdriver.Error
	var pgxErr *pgconn.PgError
	switch {
	case errors.As(err, &pgErr):
		code = pgErr.Field('C')
	case errors.As(err, &pgxErr):
		code = pgxErr.Code
	default:
		return false
	}
	switch {
	case strings.HasPrefix(code, "22"), strings.HasPrefix(code, "23"), strings.HasPrefix(code, "54"):
		return true
	}
	return code == "P0001"
}
