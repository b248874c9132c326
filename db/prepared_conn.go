package db

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/uptrace/bun/driver/pgdriver"
)

// maxPreparedPerConn bounds the statements one connection keeps prepared. The statements that
// arrive with arguments come from a fixed set of call sites (River's queries and the
// prepared batches of the hot paths), so the bound is a guard, not a working limit.
const maxPreparedPerConn = 256

// preparingConnector hands out pgdriver connections that run every statement arriving with
// arguments as a prepared statement, prepared once per connection and then only bound and
// executed. bun formats its own queries and sends them without arguments, so they keep the
// simple protocol; River's queries (through riverdatabasesql) and the batches built by
// Batch.Insert arrive with arguments, and PostgreSQL then parses, analyses and plans each of
// them once per connection instead of once per call. On the hot paths that parsing and
// planning was about a third of the database's CPU.
//
// It also sets each connection's statement_timeout (when statementTimeout is above 0) and
// client_connection_check_interval, and its connections close when the context of a running
// statement ends (see watch).
type preparingConnector struct {
	driver.Connector
	statementTimeout time.Duration
}

// Connect opens a connection with an empty statement cache and the connection settings.
func (c preparingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	cn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	pc, ok := cn.(*pgdriver.Conn)
	if !ok {
		return cn, nil
	}
	if err := setSessionLimits(ctx, pc, c.statementTimeout); err != nil {
		_ = pc.Close()
		return nil, err
	}
	return &preparingConn{Conn: pc, stmts: make(map[string]driver.Stmt)}, nil
}

// setSessionLimits sets statement_timeout and client_connection_check_interval on a new
// connection. The latter exists from PostgreSQL 14; an older server goes without it.
func setSessionLimits(ctx context.Context, pc *pgdriver.Conn, statementTimeout time.Duration) error {
	if statementTimeout > 0 {
		q := "SET statement_timeout = " + strconv.FormatInt(statementTimeout.Milliseconds(), 10)
		if _, err := pc.ExecContext(ctx, q, nil); err != nil {
			return fmt.Errorf("set statement_timeout: %w", err)
		}
	}
	q := "SET client_connection_check_interval = " + strconv.FormatInt(clientCheckInterval.Milliseconds(), 10)
	if _, err := pc.ExecContext(ctx, q, nil); err != nil {
		var pgErr pgdriver.Error
		if !errors.As(err, &pgErr) || pgErr.Field('C') != "42704" { // undefined parameter
			return fmt.Errorf("set client_connection_check_interval: %w", err)
		}
	}
	return nil
}

// watch closes the connection if ctx ends while a statement runs. pgdriver only honours a
// context's deadline, through socket deadlines, and never a cancellation; closing the socket
// ends the call at once, PostgreSQL stops the statement within client_connection_check_interval,
// and database/sql discards the connection (IsValid). The returned func stops watching.
func (cn *preparingConn) watch(ctx context.Context) func() bool {
	if ctx.Done() == nil {
		return func() bool { return true }
	}
	return context.AfterFunc(ctx, func() { _ = cn.Conn.Close() })
}

// preparingConn is a pgdriver connection with a statement cache. database/sql uses a
// connection from one goroutine at a time, so the cache needs no lock.
type preparingConn struct {
	*pgdriver.Conn
	stmts map[string]driver.Stmt
}

// ExecContext runs query; with arguments, as a cached prepared statement.
func (cn *preparingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	defer cn.watch(ctx)()
	if len(args) == 0 {
		return cn.Conn.ExecContext(ctx, query, args)
	}
	st, err := cn.prepared(ctx, query)
	if err != nil {
		return nil, cn.checkBadConn(err)
	}
	res, err := st.(driver.StmtExecContext).ExecContext(ctx, args)
	cn.forgetIfStale(query, err)
	return res, cn.checkBadConn(err)
}

// QueryContext runs query; with arguments, as a cached prepared statement.
func (cn *preparingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	defer cn.watch(ctx)()
	if len(args) == 0 {
		return cn.Conn.QueryContext(ctx, query, args)
	}
	st, err := cn.prepared(ctx, query)
	if err != nil {
		return nil, cn.checkBadConn(err)
	}
	rows, err := st.(driver.StmtQueryContext).QueryContext(ctx, args)
	cn.forgetIfStale(query, err)
	return rows, cn.checkBadConn(err)
}

// prepared returns the connection's statement for query, preparing it on first use.
func (cn *preparingConn) prepared(ctx context.Context, query string) (driver.Stmt, error) {
	if st, ok := cn.stmts[query]; ok {
		return st, nil
	}
	if len(cn.stmts) >= maxPreparedPerConn {
		for q, st := range cn.stmts {
			_ = st.Close()
			delete(cn.stmts, q)
		}
	}
	st, err := cn.Conn.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	cn.stmts[query] = st
	return st, nil
}

// checkBadConn closes the connection after an error that leaves it unusable, as pgdriver does
// on its own paths: anything that is not an ordinary PostgreSQL error (a broken socket, a
// cancelled context mid-protocol), a FATAL or PANIC, an aborted transaction or a cancelled
// statement. database/sql then discards the connection (IsValid), and a later call that finds
// it closed gets driver.ErrBadConn and is retried on a fresh one. It returns err unchanged.
func (cn *preparingConn) checkBadConn(err error) error {
	if err == nil {
		return nil
	}
	pgErr, ok := err.(pgdriver.Error)
	if !ok {
		_ = cn.Conn.Close()
		return err
	}
	switch {
	case pgErr.Field('V') == "FATAL", pgErr.Field('V') == "PANIC",
		pgErr.Field('C') == "25P02", pgErr.Field('C') == "57014":
		_ = cn.Conn.Close()
	}
	return err
}

// forgetIfStale drops a statement PostgreSQL can no longer run as prepared (its tables
// changed shape under it, or the server lost it), so the next call prepares it afresh.
func (cn *preparingConn) forgetIfStale(query string, err error) {
	var pgErr pgdriver.Error
	if err == nil || !errors.As(err, &pgErr) {
		return
	}
	switch pgErr.Field('C') {
	case "0A000", "26000": // cached plan must not change result type; no such prepared statement
		if st, ok := cn.stmts[query]; ok {
			_ = st.Close()
			delete(cn.stmts, query)
		}
	}
}
