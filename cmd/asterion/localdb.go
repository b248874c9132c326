package main

import (
	"context"
	"fmt"
	"time"

	"asterion/db"
)

// The settings of serve --local-database.
const (
	// defaultDBAddrEnv is the PostgreSQL tried first when no database URL is given.
	defaultDBAddrEnv = "ASTERION_DEFAULT_DB_ADDR"
	// localDBDirEnv is where the private cluster lives.
	localDBDirEnv = "ASTERION_LOCAL_DB_DIR"
	// pgBinEnv names the directory of PostgreSQL's server programs.
	pgBinEnv = "ASTERION_PG_BIN"
)

// localDatabase finds a database for serve --local-database when no URL was given: the
// PostgreSQL at ASTERION_DEFAULT_DB_ADDR (127.0.0.1:5432) when something answers there,
// otherwise a private cluster under ASTERION_LOCAL_DB_DIR (.data/postgres), started from the
// machine's PostgreSQL programs and stopped by the returned stop.
func (c *cli) localDatabase(ctx context.Context) (url string, stop func(), err error) {
	addr := envOr(c.getenv, defaultDBAddrEnv, "127.0.0.1:5432")
	if db.Answers(addr, time.Second) {
		return "postgres://postgres@" + addr + "/asterion?sslmode=disable", func() {}, nil
	}
	dir := envOr(c.getenv, localDBDirEnv, ".data/postgres")
	cluster, err := db.StartLocalCluster(ctx, db.LocalClusterConfig{Dir: dir, BinDir: c.getenv(pgBinEnv)})
	if err != nil {
		return "", nil, fmt.Errorf("nothing answers on %s and no private PostgreSQL could be started: %w", addr, err)
	}
	fmt.Fprintf(c.stderr, "asterion: nothing answers on %s; running a private PostgreSQL in %s on %s until the server stops\n",
		addr, dir, cluster.Addr())
	stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cluster.Stop(sctx); err != nil {
			fmt.Fprintf(c.stderr, "asterion: stopping the private PostgreSQL in %s: %s\n", dir, oneLine(err))
		}
	}
	return cluster.URL(), stop, nil
}
