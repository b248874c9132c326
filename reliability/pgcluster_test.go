package reliability

import (
	"context"
	"os"
	"testing"
	"time"

	"asterion/db"
)

// pgCluster is a private PostgreSQL server in a temporary directory, so a test may stop and
// restart it without touching the shared server at 5432. It is db.LocalCluster, the cluster
// `make run` starts on a machine without a server, with settings for a busy throwaway one.
type pgCluster struct {
	c *db.LocalCluster
}

// startPrivateCluster creates a cluster in a temporary directory, starts it on a free loopback
// port and stops it when the test ends. The directory is made directly under the temporary
// directory, not by t.TempDir, whose parent is private: run as root, the cluster belongs to
// the postgres user, which must be able to reach it. fsync is off: every stop in these tests is
// a clean one, which loses nothing without it.
func startPrivateCluster(t *testing.T) *pgCluster {
	t.Helper()
	return startPrivateClusterWith(t)
}

// startPrivateClusterWith is startPrivateCluster with extra server settings ("name=value") on
// every start.
func startPrivateClusterWith(t *testing.T, settings ...string) *pgCluster {
	t.Helper()
	dir, err := os.MkdirTemp("", "asterion-reliability-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := db.NewLocalCluster(ctx, db.LocalClusterConfig{Dir: dir, BinDir: os.Getenv("ASTERION_PG_BIN"), NoSync: true,
		Settings: append([]string{"max_connections=200", "fsync=off"}, settings...)})
	if err != nil {
		t.Fatalf("private PostgreSQL: %v", err)
	}
	pg := &pgCluster{c: c}
	t.Cleanup(func() {
		actx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = c.Abort(actx)
		if t.Failed() {
			t.Logf("--- last lines of the private PostgreSQL's log:\n%s", tailFile(c.LogPath(), 30))
		}
	})
	pg.start(t)
	return pg
}

// URL is the connection URL of database name on the cluster.
func (pg *pgCluster) URL(name string) string {
	return pg.c.DatabaseURL(name)
}

// start starts the server on its port and waits until it accepts connections.
func (pg *pgCluster) start(t *testing.T) {
	t.Helper()
	pg.do(t, "start", pg.c.Start)
}

// stop shuts the server down with mode fast (clients are disconnected, the shutdown is clean).
func (pg *pgCluster) stop(t *testing.T) {
	t.Helper()
	pg.do(t, "stop", pg.c.Stop)
}

// restart stops the server with mode fast and starts it again on the same port, and returns
// how long that took.
func (pg *pgCluster) restart(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	pg.do(t, "restart", pg.c.Restart)
	return time.Since(start)
}

func (pg *pgCluster) do(t *testing.T, what string, f func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := f(ctx); err != nil {
		t.Fatalf("%s the private PostgreSQL: %v", what, err)
	}
}

// crash stops the server with mode immediate: every backend is killed at once with no
// checkpoint, as a crash of PostgreSQL would, and the next start runs crash recovery. A commit
// that did not wait for the WAL flush (synchronous_commit off) may be lost.
func (pg *pgCluster) crash(t *testing.T) {
	t.Helper()
	pg.do(t, "crash", pg.c.Abort)
}
