package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"
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
	// defaultLocalDBDir is the private cluster's place, under the working directory, for a
	// process that does not run as root.
	defaultLocalDBDir = ".data/postgres"
)

// localDatabase finds a database for serve --local-database when no URL was given: the
// PostgreSQL at ASTERION_DEFAULT_DB_ADDR (127.0.0.1:5432) when something answers there,
// otherwise a private cluster started from the machine's PostgreSQL programs and stopped by
// the returned stop. The cluster lives in ASTERION_LOCAL_DB_DIR when set; otherwise in
// .data/postgres, or, run as root, in a directory of the postgres user's own under
// /var/lib/asterion kept for this working directory (.data is private to root, for the secret
// key, and the cluster runs as postgres).
func (c *cli) localDatabase(ctx context.Context) (url string, stop func(), err error) {
	addr := envOr(c.getenv, defaultDBAddrEnv, "127.0.0.1:5432")
	if db.Answers(addr, time.Second) {
		return "postgres://postgres@" + addr + "/asterion?sslmode=disable", func() {}, nil
	}
	fail := func(err error) (string, func(), error) {
		return "", nil, fmt.Errorf("nothing answers on %s and no private PostgreSQL could be started: %w", addr, err)
	}
	dir := c.getenv(localDBDirEnv)
	if dir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fail(err)
		}
		if dir, err = db.LocalClusterDir(defaultLocalDBDir, filepath.Base(wd)); err != nil {
			return fail(fmt.Errorf("%w; set %s to a directory to keep it in", err, localDBDirEnv))
		}
	}
	cluster, err := db.StartLocalCluster(ctx, db.LocalClusterConfig{Dir: dir, BinDir: c.getenv(pgBinEnv)})
	if err != nil {
		var unreachable *db.UnreachableDirError
		var dirErr *db.LocalClusterDirError
		switch {
		case errors.As(err, &unreachable) && c.getenv(localDBDirEnv) != "":
			err = fmt.Errorf("%w: point %s at a directory every user may enter, or unset it", err, localDBDirEnv)
		case errors.As(err, &dirErr):
			err = fmt.Errorf("%w: set %s to a directory you may create", err, localDBDirEnv)
		}
		return fail(err)
	}
	fmt.Fprintf(c.stderr, "asterion: nothing answers on %s; running a private PostgreSQL in %s on %s until the server stops\n",
		addr, cluster.Dir(), cluster.Addr())
	stop = func() {
		sctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cluster.Stop(sctx); err != nil {
			fmt.Fprintf(c.stderr, "asterion: stopping the private PostgreSQL in %s: %s\n", cluster.Dir(), oneLine(err))
		}
	}
	return cluster.URL(), stop, nil
}

// addrInUse is the error of a listen address another process holds, saying what to do.
func addrInUse(addr string) error {
	return fmt.Errorf("listen on %s: address already in use: stop what listens there, or set ASTERION_ADDR (make run ASTERION_ADDR=127.0.0.1:8081) or --addr", addr)
}

// portFree fails with addrInUse when another process listens on addr. Any other problem with
// addr is left to the listen that follows.
func portFree(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		if errors.Is(err, syscall.EADDRINUSE) {
			return addrInUse(addr)
		}
		return nil
	}
	return ln.Close()
}
