package reliability

import (
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pgCluster is a private PostgreSQL server in a temporary directory, so a test may stop and
// restart it without touching the shared server at 5432.
type pgCluster struct {
	bin  string
	dir  string
	data string
	port int
	// settings are extra -c options of every start (see startPrivateClusterWith).
	settings string
	// asUser runs a command as the cluster's owner: through runuser when the tests run as
	// root (initdb refuses root), directly otherwise.
	asUser func(name string, args ...string) *exec.Cmd
}

// postgresBin finds PostgreSQL's server programs: ASTERION_PG_BIN, or the newest
// /usr/lib/postgresql/<version>/bin.
func postgresBin(t *testing.T) string {
	t.Helper()
	if b := os.Getenv("ASTERION_PG_BIN"); b != "" {
		return b
	}
	if fileExists("/usr/lib/postgresql/15/bin/initdb") {
		return "/usr/lib/postgresql/15/bin"
	}
	matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(matches) == 0 {
		t.Fatal("no PostgreSQL server programs found: install postgresql or set ASTERION_PG_BIN")
	}
	return filepath.Dir(matches[len(matches)-1])
}

// startPrivateCluster creates a cluster with initdb in a temporary directory, starts it on a
// free loopback port and stops it when the test ends. The data directory belongs to the
// postgres user when the tests run as root.
func startPrivateCluster(t *testing.T) *pgCluster {
	t.Helper()
	return startPrivateClusterWith(t, "")
}

// startPrivateClusterWith is startPrivateCluster with extra server settings ("-c name=value"
// options) on every start.
func startPrivateClusterWith(t *testing.T, settings string) *pgCluster {
	t.Helper()
	c := &pgCluster{bin: postgresBin(t), dir: t.TempDir(), settings: settings}
	c.data = filepath.Join(c.dir, "data")
	c.asUser = func(name string, args ...string) *exec.Cmd {
		return exec.Command(name, args...)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user for initdb: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		// t.TempDir's parent is private to root; the postgres user must be able to reach the
		// directory it owns.
		if err := os.Chmod(filepath.Dir(c.dir), 0o755); err != nil {
			t.Fatalf("open the temp dir's parent to postgres: %v", err)
		}
		if err := os.Chown(c.dir, uid, gid); err != nil {
			t.Fatalf("give the temp dir to postgres: %v", err)
		}
		runuser, err := exec.LookPath("runuser")
		if err != nil {
			t.Fatalf("running as root needs runuser: %v", err)
		}
		c.asUser = func(name string, args ...string) *exec.Cmd {
			return exec.Command(runuser, append([]string{"-u", "postgres", "--", name}, args...)...)
		}
	}
	c.run(t, "initdb", "-D", c.data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	c.port = freePort(t)
	c.start(t)
	t.Cleanup(func() {
		cmd := c.asUser(filepath.Join(c.bin, "pg_ctl"), "-D", c.data, "-m", "immediate", "-w", "stop")
		_ = cmd.Run()
		if t.Failed() {
			t.Logf("--- last lines of the private PostgreSQL's log:\n%s", tailFile(filepath.Join(c.dir, "postgres.log"), 30))
		}
	})
	return c
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	addr := freeAddr(t)
	i := strings.LastIndexByte(addr, ':')
	p, err := strconv.Atoi(addr[i+1:])
	if err != nil {
		t.Fatalf("port of %s: %v", addr, err)
	}
	return p
}

// URL is the connection URL of database name on the cluster.
func (c *pgCluster) URL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, name)
}

// run runs one of PostgreSQL's programs as the cluster's owner and fails t when it fails.
func (c *pgCluster) run(t *testing.T, program string, args ...string) {
	t.Helper()
	cmd := c.asUser(filepath.Join(c.bin, program), args...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", program, strings.Join(args, " "), err, out)
	}
}

// start starts the server and waits until it accepts connections. The socket directory is the
// temp dir, so nothing is shared with the system's server. fsync is off: every stop in these
// tests is a clean one, which loses nothing without it.
func (c *pgCluster) start(t *testing.T) {
	t.Helper()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200 -c fsync=off %s", c.port, c.dir, c.settings)
	c.run(t, "pg_ctl", "-D", c.data, "-l", filepath.Join(c.dir, "postgres.log"), "-o", opts, "-w", "-t", "60", "start")
}

// stop shuts the server down with mode fast (clients are disconnected, the shutdown is clean).
func (c *pgCluster) stop(t *testing.T) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data, "-m", "fast", "-w", "-t", "60", "stop")
}

// restart is pg_ctl restart -m fast: stop with mode fast and start again with the same options.
func (c *pgCluster) restart(t *testing.T) time.Duration {
	t.Helper()
	start := time.Now()
	c.run(t, "pg_ctl", "-D", c.data, "-l", filepath.Join(c.dir, "postgres.log"), "-m", "fast", "-w", "-t", "60", "restart")
	return time.Since(start)
}

// crash stops the server with mode immediate: every backend is killed at once with no
// checkpoint, as a crash of PostgreSQL would, and the next start runs crash recovery. A commit
// that did not wait for the WAL flush (synchronous_commit off) may be lost.
func (c *pgCluster) crash(t *testing.T) {
	t.Helper()
	c.run(t, "pg_ctl", "-D", c.data, "-m", "immediate", "-w", "-t", "60", "stop")
}
