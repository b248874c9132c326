package main

import (
	"context"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/uptrace/bun"

	"asterion/db"
)

// conn is an open database: bun for the app's tables, pgx for River and LISTEN.
type conn struct {
	bun  *bun.DB
	pool *pgxpool.Pool
	url  db.URL
	log  *slog.Logger
}

func (cn *conn) close() {
	cn.pool.Close()
	_ = cn.bun.Close()
}

// connect validates the common settings and opens the database (creating it when create is
// set), waiting for an unreachable server up to ASTERION_DB_WAIT (30 s).
func (c *cli) connect(ctx context.Context, cm *common, create bool, poolSize int32) (*conn, error) {
	u, level, err := cm.validate(c.getenv)
	if err != nil {
		return nil, err
	}
	log := c.newLogger(level)
	bunDB, err := db.Open(ctx, db.OpenConfig{URL: u, WaitFor: cm.dbWait, CreateDatabase: create, Logger: log,
		StatementTimeout: cm.statementTimeout, NoStatementTimeout: cm.noStatementTimeout})
	if err != nil {
		return nil, err
	}
	pool, err := db.OpenPool(ctx, u, poolSize)
	if err != nil {
		_ = bunDB.Close()
		return nil, err
	}
	return &conn{bun: bunDB, pool: pool, url: u, log: log}, nil
}

// migrateUp applies every pending migration.
func (cn *conn) migrateUp(ctx context.Context) ([]string, error) {
	m, err := db.NewMigrator(cn.bun, cn.pool)
	if err != nil {
		return nil, err
	}
	return m.Up(ctx)
}
