package db

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// clusterTempDir is a fresh directory directly under the temporary directory, which every user
// may enter: run as root, a cluster belongs to the postgres user (t.TempDir's parent is
// private to root).
func clusterTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "asterion-db-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// TestLocalClusterDirAsRoot: run as root, the cluster meant for a directory in a private place
// lives under /var/lib/asterion, in a directory open to the postgres user, the same one for
// the same place and another for another place; otherwise it is the directory itself.
func TestLocalClusterDirAsRoot(t *testing.T) {
	t.Parallel()
	private := t.TempDir()
	want := filepath.Join(private, ".data", "postgres")
	got, err := LocalClusterDir(want, "my clone")
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if got != want {
			t.Fatalf("not root: LocalClusterDir = %s, want %s", got, want)
		}
		return
	}
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(got)) })
	if !strings.HasPrefix(got, rootClusterHome+"/my_clone-") || filepath.Base(got) != "postgres" {
		t.Fatalf("root: LocalClusterDir = %s, want %s/my_clone-<hash>/postgres", got, rootClusterHome)
	}
	for _, d := range []string{rootClusterHome, filepath.Dir(got)} {
		if st, err := os.Stat(d); err != nil || st.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, mode %v: want 0755, open to the postgres user", d, err, st.Mode().Perm())
		}
	}
	if again, _ := LocalClusterDir(want, "my clone"); again != got {
		t.Errorf("a second call gives %s, the first %s", again, got)
	}
	other, _ := LocalClusterDir(filepath.Join(t.TempDir(), ".data", "postgres"), "my clone")
	t.Cleanup(func() { _ = os.RemoveAll(filepath.Dir(other)) })
	if other == got {
		t.Errorf("two places share the cluster directory %s", got)
	}
}

// TestLocalClusterUnreachableAsRoot: run as root, a data directory below a directory the
// postgres user cannot enter is refused, naming that directory, before anything is written.
func TestLocalClusterUnreachableAsRoot(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("only root hands the cluster to the postgres user")
	}
	private := t.TempDir() // its parent is private to root
	_, err := NewLocalCluster(context.Background(), LocalClusterConfig{Dir: filepath.Join(private, "pg")})
	var ue *UnreachableDirError
	if !errors.As(err, &ue) || ue.Blocked != filepath.Dir(private) {
		t.Fatalf("NewLocalCluster: %v, want the postgres user cannot reach, blocked at %s", err, filepath.Dir(private))
	}
}

// TestLocalClusterStartFailureNamesTheCause: a server that will not start is reported by the
// cause its log gives, not pg_ctl's "examine the log output".
func TestLocalClusterStartFailureNamesTheCause(t *testing.T) {
	t.Parallel()
	_, err := StartLocalCluster(context.Background(), LocalClusterConfig{Dir: clusterTempDir(t), NoSync: true,
		Settings: []string{"max_connections=lots"}})
	if err == nil || !strings.Contains(err.Error(), `invalid value for parameter "max_connections"`) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("start with a bad setting: %v, want one line naming the bad setting", err)
	}
}

// TestEnsureSharedLocalCluster: callers that ask at once get one server, started by exactly one
// of them with the given settings; a later caller finds it running; after it stopped, the next
// caller starts it again on the same data.
func TestEnsureSharedLocalCluster(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cfg := LocalClusterConfig{Dir: filepath.Join(clusterTempDir(t), "pg"), Database: "postgres", NoSync: true,
		Settings: []string{"max_connections=123"}}
	if os.Geteuid() == 0 {
		// The lock file sits beside the data directory, in a directory root made.
		if err := os.Chmod(filepath.Dir(cfg.Dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		c       *LocalCluster
		started bool
		err     error
	}
	results := make([]result, 4)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, started, err := EnsureSharedLocalCluster(ctx, cfg)
			results[i] = result{c, started, err}
		}()
	}
	wg.Wait()
	starts := 0
	for _, r := range results {
		if r.err != nil {
			t.Fatalf("EnsureSharedLocalCluster: %v", r.err)
		}
		if r.started {
			starts++
		}
		if r.c.URL() != results[0].c.URL() {
			t.Errorf("callers got %s and %s", r.c.URL(), results[0].c.URL())
		}
	}
	c := results[0].c
	t.Cleanup(func() { _ = c.Abort(context.Background()) })
	if starts != 1 {
		t.Errorf("%d of %d concurrent callers started the server, want 1", starts, len(results))
	}
	conn, err := pgx.Connect(ctx, c.URL())
	if err != nil {
		t.Fatal(err)
	}
	var maxConns string
	if err := conn.QueryRow(ctx, "SHOW max_connections").Scan(&maxConns); err != nil || maxConns != "123" {
		t.Errorf("max_connections %q (%v), want the configured 123", maxConns, err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE kept"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)

	if err := c.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	again, started, err := EnsureSharedLocalCluster(ctx, cfg)
	if err != nil || !started {
		t.Fatalf("after a stop: started %v, %v; want started again", started, err)
	}
	conn, err = pgx.Connect(ctx, again.DatabaseURL("kept"))
	if err != nil {
		t.Fatalf("the database made before the stop: %v", err)
	}
	conn.Close(ctx)
}
