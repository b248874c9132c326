package main

// The bench's own PostgreSQL: a private cluster started from the machine's PostgreSQL programs
// with the same settings everywhere, so that the figures of two machines (or of two runs on a
// machine whose shared server is tuned otherwise) are measured against the same database, and
// with pg_stat_statements loaded, so that what a job costs the database is read, not inferred.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"asterion/db"
)

// benchClusterSettings are the server settings of the bench's cluster beyond PostgreSQL's
// defaults: the statement statistics, autovacuum on (as a production server runs it), and room
// for the connections of every server and client the bench starts at once.
var benchClusterSettings = []string{
	"shared_preload_libraries=pg_stat_statements",
	"pg_stat_statements.max=5000",
	"pg_stat_statements.track=top",
	"autovacuum=on",
	"max_connections=400",
	"shared_buffers=256MB",
	"track_io_timing=on",
}

// startBenchCluster starts the bench's private cluster in dir (created and initialised when
// missing; a server a killed run left on it is stopped first) and returns it with the URL of
// its maintenance database. The caller stops it.
func startBenchCluster(ctx context.Context, dir string) (*db.LocalCluster, string, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, err := db.StartLocalCluster(ctx, db.LocalClusterConfig{Dir: dir, BinDir: os.Getenv("ASTERION_PG_BIN"),
		Database: "postgres", Settings: benchClusterSettings, NoSync: true})
	if err != nil {
		return nil, "", fmt.Errorf("start the bench's PostgreSQL: %w", err)
	}
	return c, c.URL(), nil
}

// benchClusterDir is the default directory of the bench's cluster: in the user's cache
// directory, named after the PostgreSQL version (a cluster of another version would not
// start); run as root, the directory db.LocalClusterDir keeps for the postgres user.
func benchClusterDir() (string, error) {
	bin, err := db.PostgresPrograms(os.Getenv("ASTERION_PG_BIN"))
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory for the bench's PostgreSQL (set HOME): %w", err)
	}
	name := "bench-postgres"
	if v := filepath.Base(filepath.Dir(bin)); v != "" && strings.Trim(v, "0123456789") == "" {
		name += "-" + v
	}
	return db.LocalClusterDir(filepath.Join(cache, "asterion", name), name)
}

// benchClusterLine says in the report which database the figures were measured against.
func benchClusterLine(private bool) string {
	if !private {
		return "the PostgreSQL at -admin-url (not the bench's own cluster: its settings are that server's)"
	}
	return "the bench's own PostgreSQL cluster (" + strings.Join(benchClusterSettings, ", ") + "; otherwise PostgreSQL's defaults)"
}
