package db

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"github.com/uptrace/bun/driver/pgdriver"
)

// ErrUnreachable reports that PostgreSQL did not answer within the wait window.
var ErrUnreachable = errors.New("database unreachable")

// OpenConfig says how to reach the database at start.
type OpenConfig struct {
	// URL is the validated connection URL.
	URL URL
	// WaitFor bounds how long Open retries an unreachable server (default 30 s).
	WaitFor time.Duration
	// CreateDatabase creates the database when it is missing and the role may.
	CreateDatabase bool
	// MaxOpenConns bounds the pool (default 20).
	MaxOpenConns int
	// Logger receives retry notices; nil means slog.Default.
	Logger *slog.Logger
	// StatementTimeout is every statement's statement_timeout on these connections (default
	// DefaultStatementTimeout); NoStatementTimeout leaves PostgreSQL's own setting (migrations).
	StatementTimeout   time.Duration
	NoStatementTimeout bool
}

// DefaultStatementTimeout bounds every statement of the app's connections: above the 10 s
// deadline of a request, so a request's own deadline ends it first, and far above any statement
// the app runs when healthy.
const DefaultStatementTimeout = 15 * time.Second

// clientCheckInterval is client_connection_check_interval: how often PostgreSQL checks, during a
// long statement, that the connection is still open. A statement whose context ends closes its
// connection (see preparingConn), and the server then stops the statement within this interval
// instead of running it to the end for nobody.
const clientCheckInterval = time.Second

func (cfg OpenConfig) validate() error {
	if cfg.StatementTimeout < 0 || cfg.StatementTimeout > 0 && cfg.StatementTimeout < time.Millisecond {
		return fmt.Errorf("statement timeout: want at least 1ms, got %s", cfg.StatementTimeout)
	}
	if cfg.MaxOpenConns < 0 {
		return fmt.Errorf("max open connections: want a positive number, got %d", cfg.MaxOpenConns)
	}
	return nil
}

// statementTimeout is the statement_timeout the connections get, 0 for none.
func (cfg OpenConfig) statementTimeout() time.Duration {
	switch {
	case cfg.NoStatementTimeout:
		return 0
	case cfg.StatementTimeout == 0:
		return DefaultStatementTimeout
	}
	return cfg.StatementTimeout
}

// Open connects bun over pgdriver, waiting with backoff while the server is unreachable and
// creating the database when asked to. The error names host and port when it gives up.
func Open(ctx context.Context, cfg OpenConfig) (*bun.DB, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.WaitFor == 0 {
		cfg.WaitFor = 30 * time.Second
	}
	if cfg.MaxOpenConns == 0 {
		cfg.MaxOpenConns = 20
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	deadline := time.Now().Add(cfg.WaitFor)
	backoff := 100 * time.Millisecond
	for {
		db, err := tryOpen(ctx, cfg)
		if err == nil {
			return db, nil
		}
		if !isConnectError(err) {
			return nil, err
		}
		if time.Now().Add(backoff).After(deadline) {
			return nil, fmt.Errorf("%w: cannot connect to PostgreSQL at %s after %s: %s",
				ErrUnreachable, cfg.URL.Addr(), cfg.WaitFor, shortErr(err))
		}
		log.Warn("database not reachable yet, retrying", "addr", cfg.URL.Addr(), "in", backoff, "err", shortErr(err))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
	}
}

func tryOpen(ctx context.Context, cfg OpenConfig) (*bun.DB, error) {
	db := newBun(cfg.URL, cfg.MaxOpenConns, cfg.statementTimeout())
	err := db.PingContext(ctx)
	if err == nil {
		return db, nil
	}
	_ = db.Close()
	if !cfg.CreateDatabase || !isMissingDatabase(err) {
		return nil, err
	}
	if err := createDatabase(ctx, cfg.URL); err != nil {
		return nil, err
	}
	db = newBun(cfg.URL, cfg.MaxOpenConns, cfg.statementTimeout())
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return db, nil
}

func newBun(u URL, maxOpen int, statementTimeout time.Duration) *bun.DB {
	sqldb := sql.OpenDB(preparingConnector{Connector: pgdriver.NewConnector(pgdriver.WithDSN(u.String()),
		pgdriver.WithTimeout(5*time.Second), pgdriver.WithApplicationName("asterion")),
		statementTimeout: statementTimeout})
	sqldb.SetMaxOpenConns(maxOpen)
	sqldb.SetMaxIdleConns(maxOpen)
	sqldb.SetConnMaxIdleTime(5 * time.Minute)
	return bun.NewDB(sqldb, pgdialect.New())
}

// createDatabase connects to the maintenance database and creates the target one.
func createDatabase(ctx context.Context, u URL) error {
	admin := newBun(u.WithDatabase("postgres"), 1, 0)
	defer admin.Close()
	_, err := admin.ExecContext(ctx, "CREATE DATABASE "+quoteIdent(u.Database))
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) && pgErr.Field('C') == "42P04" { // created meanwhile by another process
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", u.Database, err)
	}
	return nil
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string { return `"` + strings.ReplaceAll(s, `"`, `""`) + `"` }

func isMissingDatabase(err error) bool {
	var pgErr pgdriver.Error
	return errors.As(err, &pgErr) && pgErr.Field('C') == "3D000"
}

func isConnectError(err error) bool {
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return true
	}
	var pgErr pgdriver.Error
	if errors.As(err, &pgErr) {
		// 57P03: the server is starting up or shutting down.
		return pgErr.Field('C') == "57P03"
	}
	msg := err.Error()
	return strings.Contains(msg, "connection refused") || strings.Contains(msg, "no such host") ||
		strings.Contains(msg, "EOF") || strings.Contains(msg, "i/o timeout")
}

func shortErr(err error) string {
	msg := err.Error()
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i]
	}
	return msg
}
