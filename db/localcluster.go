package db

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ErrNoPostgresPrograms means no PostgreSQL server programs (initdb, pg_ctl) were found, so
// no private cluster can be started. Its text says which package to install.
var ErrNoPostgresPrograms = errors.New("no PostgreSQL server programs found: install Debian's postgresql package (apt-get install postgresql) or set DATABASE_URL")

// LocalClusterConfig configures a private PostgreSQL cluster for a machine that runs none.
type LocalClusterConfig struct {
	// Dir is the cluster's data directory, created and initialised when missing. Required.
	Dir string
	// BinDir holds initdb and pg_ctl. Default: the newest /usr/lib/postgresql/<version>/bin.
	BinDir string
	// Database is the database name the URL points at. Default "asterion".
	Database string
}

func (c *LocalClusterConfig) validate() error {
	if strings.TrimSpace(c.Dir) == "" {
		return errors.New("local cluster: Dir is required")
	}
	if c.Database == "" {
		c.Database = "asterion"
	}
	if c.BinDir == "" {
		matches, _ := filepath.Glob("/usr/lib/postgresql/*/bin/pg_ctl")
		sort.Slice(matches, func(i, j int) bool { return versionOf(matches[i]) < versionOf(matches[j]) })
		if len(matches) == 0 {
			return ErrNoPostgresPrograms
		}
		c.BinDir = filepath.Dir(matches[len(matches)-1])
	}
	for _, p := range []string{"initdb", "pg_ctl"} {
		if _, err := os.Stat(filepath.Join(c.BinDir, p)); err != nil {
			return fmt.Errorf("%w (looked in %s)", ErrNoPostgresPrograms, c.BinDir)
		}
	}
	return nil
}

// versionOf is the major version in a /usr/lib/postgresql/<version>/bin path.
func versionOf(path string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(path))))
	return v
}

// LocalCluster is a private PostgreSQL server run from the machine's own programs, listening
// on a free loopback port only (no Unix socket, so nothing is shared with a system server).
type LocalCluster struct {
	cfg  LocalClusterConfig
	port int
	// asOwner runs a program as the data directory's owner: through runuser as the postgres
	// user when running as root (initdb and postgres refuse root), directly otherwise.
	asOwner func(ctx context.Context, name string, args ...string) *exec.Cmd
}

// StartLocalCluster initialises cfg.Dir when it holds no cluster, stops a server a previous
// run left behind on it, and starts the server on a free port.
func StartLocalCluster(ctx context.Context, cfg LocalClusterConfig) (*LocalCluster, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("local cluster directory %s: %w", cfg.Dir, err)
	}
	cfg.Dir = dir
	c := &LocalCluster{cfg: cfg, asOwner: exec.CommandContext}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create local cluster directory %s: %w", dir, err)
	}
	if os.Geteuid() == 0 {
		if err := c.runAsPostgres(); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		if err := c.run(ctx, "initdb", "-D", dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"); err != nil {
			return nil, err
		}
	}
	// A server a killed run left behind would hold the directory: stop it first.
	if c.run(ctx, "pg_ctl", "-D", dir, "status") == nil {
		if err := c.run(ctx, "pg_ctl", "-D", dir, "-m", "fast", "-w", "-t", "60", "stop"); err != nil {
			return nil, err
		}
	}
	if c.port, err = freeLoopbackPort(); err != nil {
		return nil, err
	}
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=''", c.port)
	if err := c.run(ctx, "pg_ctl", "-D", dir, "-l", filepath.Join(dir, "server.log"), "-o", opts, "-w", "-t", "60", "start"); err != nil {
		return nil, err
	}
	return c, nil
}

// runAsPostgres makes the directory the postgres user's and runs the programs as that user.
func (c *LocalCluster) runAsPostgres() error {
	u, err := user.Lookup("postgres")
	if err != nil {
		return fmt.Errorf("local cluster as root needs a postgres user: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(c.cfg.Dir, uid, gid); err != nil {
		return fmt.Errorf("give %s to the postgres user: %w", c.cfg.Dir, err)
	}
	for p := filepath.Dir(c.cfg.Dir); p != "/"; p = filepath.Dir(p) {
		if st, err := os.Stat(p); err == nil && st.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("the postgres user cannot reach %s: %s is not searchable by others", c.cfg.Dir, p)
		}
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		return fmt.Errorf("local cluster as root needs runuser: %w", err)
	}
	c.asOwner = func(ctx context.Context, name string, args ...string) *exec.Cmd {
		return exec.CommandContext(ctx, runuser, append([]string{"-u", "postgres", "--", name}, args...)...)
	}
	return nil
}

// run runs one of PostgreSQL's programs and returns its output in the error when it fails.
func (c *LocalCluster) run(ctx context.Context, program string, args ...string) error {
	cmd := c.asOwner(ctx, filepath.Join(c.cfg.BinDir, program), args...)
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", program, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// URL is the connection URL of the cluster's database.
func (c *LocalCluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, c.cfg.Database)
}

// Addr is the address the server listens on.
func (c *LocalCluster) Addr() string { return "127.0.0.1:" + strconv.Itoa(c.port) }

// Dir is the cluster's data directory.
func (c *LocalCluster) Dir() string { return c.cfg.Dir }

// Stop shuts the server down cleanly, waiting until it has.
func (c *LocalCluster) Stop(ctx context.Context) error {
	return c.run(ctx, "pg_ctl", "-D", c.cfg.Dir, "-m", "fast", "-w", "-t", "60", "stop")
}

// freeLoopbackPort returns a loopback TCP port that was free a moment ago.
func freeLoopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port for the local cluster: %w", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// Answers reports whether something accepts TCP connections at addr within timeout.
func Answers(addr string, timeout time.Duration) bool {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return false
	}
	_ = conn.Close()
	return true
}
