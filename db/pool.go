package db

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// PoolStatementTimeout is the statement_timeout of the pgx pool's connections. No client
// request runs a statement there: River's own statements (its maintenance bounds each run to a
// minute, a reindex included), the change-feed sequencer and LISTEN; so the bound is a backstop
// above River's, not the app's DefaultStatementTimeout.
const PoolStatementTimeout = 2 * time.Minute

// OpenPool opens the pgx pool that River's worker client and the change-feed listener use
// (LISTEN/NOTIFY needs a real pgx connection, which bun's pgdriver does not give).
func OpenPool(ctx context.Context, u URL, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadURL, shortErr(err))
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "asterion-river"
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(PoolStatementTimeout.Milliseconds(), 10)
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pgx pool to %s: %w", u.Addr(), err)
	}
	return pool, nil
}
