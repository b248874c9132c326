package db

import (
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/uptrace/bun/driver/pgdriver"
)

// IsUnavailable reports whether err means the database could not be reached or went away
// (refused or reset connections, a server shutting down or starting up), as opposed to a
// query it answered with an error. Callers answer such errors with "try again shortly".
func IsUnavailable(err error) bool {
	if err == nil {
		return false
	}
	if code, ok := sqlState(err); ok {
		return sqlStateUnavailable(code)
	}
	var netErr net.Error
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.As(err, &netErr):
		return true
	}
	return errors.Is(err, ErrUnreachable)
}

// sqlState is the SQLSTATE of an error PostgreSQL answered, through either driver the server
// uses (bun's pgdriver, pgx under River and the pools); false when err is no such error.
func sqlState(err error) (string, bool) {
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) {
		return pgErr.Field('C'), true
	}
	var pgxErr *pgconn.PgError
	if errors.As(err, &pgxErr) {
		return pgxErr.Code, true
	}
	return "", false
}

// sqlStateUnavailable: class 08 is connection exception; 57P01..57P03 are an administrator or
// crash shutdown and a server that cannot take connections yet.
func sqlStateUnavailable(code string) bool {
	return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03"
}
