package dbtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"asterion/db"
)

const (
	// urlEnv names the server the tests use.
	urlEnv = "ASTERION_TEST_DATABASE_URL"
	// defaultAddr is where the tests look for a server when urlEnv is unset.
	defaultAddr = "127.0.0.1:5432"
	// pgBinEnv names the directory of PostgreSQL's server programs, as for serve.
	pgBinEnv = "ASTERION_PG_BIN"
	// maxConnections is what the suite needs of a server: packages run side by side, every test
	// with a database and pools of its own.
	maxConnections = 300
)

// BaseURL is the server the tests are configured to use: ASTERION_TEST_DATABASE_URL, or the
// local PostgreSQL. ServerURL is the one they do use.
func BaseURL() string {
	if u := os.Getenv(urlEnv); u != "" {
		return u
	}
	return "postgres://postgres@" + defaultAddr + "/postgres?sslmode=disable"
}

// Server is the server the tests use and how it was found.
type Server struct {
	// URL is the maintenance database's URL on the server.
	URL string
	// Private is set when the server is the tests' own cluster; Dir is its data directory and
	// Started whether this process started it (rather than finding it running).
	Private bool
	Dir     string
	Addr    string
	Started bool
}

// Line is the one line that says which server the tests use, for a person running them.
func (s Server) Line() string {
	if !s.Private {
		return "dbtest: the tests use the PostgreSQL at " + redact(s.URL)
	}
	how := "found it running"
	if s.Started {
		how = "started it"
	}
	return fmt.Sprintf("dbtest: nothing answers on %s; the tests use a private PostgreSQL in %s on %s (%s; it keeps running for the next run)",
		defaultAddr, s.Dir, s.Addr, how)
}

// redact drops a password from a URL for printing.
func redact(u string) string {
	if p, err := db.ParseURL(u); err == nil {
		return p.Redacted()
	}
	return "(unparsable URL)"
}

var (
	serverOnce sync.Once
	server     Server
	serverErr  error
)

// FindServer is the server the tests use: ASTERION_TEST_DATABASE_URL when set, else the
// PostgreSQL on 127.0.0.1:5432 when it answers, else the tests' own private cluster, started
// when it does not run yet and left running so that every test process (go test runs each
// package in its own) and the next run find the same one. It is found once per process.
func FindServer() (Server, error) {
	serverOnce.Do(func() { server, serverErr = findServer(context.Background()) })
	return server, serverErr
}

func findServer(ctx context.Context) (Server, error) {
	if u := os.Getenv(urlEnv); u != "" || db.Answers(defaultAddr, time.Second) {
		return Server{URL: BaseURL()}, nil
	}
	fail := func(err error) (Server, error) {
		return Server{}, fmt.Errorf("nothing answers on %s and no private PostgreSQL for the tests could be started: %w; or set %s", defaultAddr, err, urlEnv)
	}
	dir, err := privateClusterDir()
	if err != nil {
		return fail(err)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	c, started, err := db.EnsureSharedLocalCluster(ctx, db.LocalClusterConfig{Dir: dir, BinDir: os.Getenv(pgBinEnv),
		Database: "postgres", Settings: []string{fmt.Sprintf("max_connections=%d", maxConnections)}})
	if err != nil {
		return fail(err)
	}
	return Server{URL: c.URL(), Private: true, Dir: c.Dir(), Addr: c.Addr(), Started: started}, nil
}

// privateClusterDir is where the tests' own cluster lives: in the user's cache directory
// ($XDG_CACHE_HOME, or ~/.cache), named after the PostgreSQL version (a cluster of another
// version would not start), or, run as root, the directory of the postgres user's own that
// db.LocalClusterDir keeps for it.
func privateClusterDir() (string, error) {
	bin, err := db.PostgresPrograms(os.Getenv(pgBinEnv))
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find a cache directory for the tests' PostgreSQL (set HOME): %w", err)
	}
	name := "test-postgres"
	if v := filepath.Base(filepath.Dir(bin)); v != "" && strings.Trim(v, "0123456789") == "" {
		name += "-" + v
	}
	return db.LocalClusterDir(filepath.Join(cache, "asterion", name), name)
}
