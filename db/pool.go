package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// OpenPool opens the pgx pool that River's worker client and the change-feed listener use
// (LISTEN/NOTIFY needs a real pgx connection; see DESIGN.md on why bun's pgdriver is not used).
func OpenPool(ctx context.Context, u URL, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("%w: %s", ErrBadURL, shortErr(err))
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.RuntimeParams["application_name"] = "asterion-river"
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open pgx pool to %s: %w", u.Addr(), err)
	}
	return pool, nil
}
