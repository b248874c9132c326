package db

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	// When the process runs as root the cluster runs as the postgres user, so Dir and every
	// directory above it must be open to that user (LocalClusterDir gives one that is).
	Dir string
	// BinDir holds initdb and pg_ctl. Default: the newest /usr/lib/postgresql/<version>/bin.
	BinDir string
	// Database is the database name the URL points at. Default "asterion".
	Database string
	// Port is the loopback port the server listens on. Default: a port free at the first start,
	// kept by every later start of the same LocalCluster.
	Port int
	// Settings are further server settings, each "name=value" (for example max_connections=300).
	Settings []string
	// NoSync makes initdb skip its fsync: for throwaway clusters whose data need not survive a
	// crash of the machine.
	NoSync bool
}

func (c *LocalClusterConfig) validate() error {
	if strings.TrimSpace(c.Dir) == "" {
		return errors.New("local cluster: Dir is required")
	}
	if c.Port < 0 || c.Port > 65535 {
		return fmt.Errorf("local cluster: Port %d is not a TCP port", c.Port)
	}
	for _, s := range c.Settings {
		if name, _, ok := strings.Cut(s, "="); !ok || strings.TrimSpace(name) == "" {
			return fmt.Errorf("local cluster: setting %q is not name=value", s)
		}
	}
	if c.Database == "" {
		c.Database = "asterion"
	}
	bin, err := PostgresPrograms(c.BinDir)
	if err != nil {
		return err
	}
	c.BinDir = bin
	return nil
}

// LocalCluster is a private PostgreSQL server run from the machine's own programs, listening
// on a loopback port only (no Unix socket, so nothing is shared with a system server).
type LocalCluster struct {
	cfg  LocalClusterConfig
	port int
	// asOwner runs a program as the data directory's owner: through runuser as the postgres
	// user when running as root (initdb and postgres refuse root), directly otherwise.
	asOwner func(ctx context.Context, name string, args ...string) *exec.Cmd
}

// NewLocalCluster prepares cfg.Dir (created, given to the postgres user when running as root,
// initialised with initdb when it holds no cluster) without starting a server.
func NewLocalCluster(ctx context.Context, cfg LocalClusterConfig) (*LocalCluster, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("local cluster directory %s: %w", cfg.Dir, err)
	}
	cfg.Dir = dir
	c := &LocalCluster{cfg: cfg, port: cfg.Port, asOwner: exec.CommandContext}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, &LocalClusterDirError{Dir: dir, Err: err}
	}
	if os.Geteuid() == 0 {
		if err := c.runAsPostgres(); err != nil {
			return nil, err
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "PG_VERSION")); errors.Is(err, os.ErrNotExist) {
		args := []string{"-D", dir, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C"}
		if cfg.NoSync {
			args = append(args, "--no-sync")
		}
		if err := c.run(ctx, "initdb", args...); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// StartLocalCluster prepares cfg.Dir as NewLocalCluster does, stops a server a previous run
// left behind on it, and starts the server.
func StartLocalCluster(ctx context.Context, cfg LocalClusterConfig) (*LocalCluster, error) {
	c, err := NewLocalCluster(ctx, cfg)
	if err != nil {
		return nil, err
	}
	// A server a killed run left behind would hold the directory: stop it first.
	if c.Running(ctx) {
		if err := c.Stop(ctx); err != nil {
			return nil, err
		}
	}
	if err := c.Start(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

// Start starts the server and waits until it accepts connections. Without a configured port
// it takes a free one, and tries another when that one was taken in the meantime.
func (c *LocalCluster) Start(ctx context.Context) error {
	for attempt := 0; ; attempt++ {
		picked := false
		if c.port == 0 {
			p, err := freeLoopbackPort()
			if err != nil {
				return err
			}
			c.port, picked = p, true
		}
		logStart := fileSize(c.LogPath())
		err := c.run(ctx, "pg_ctl", "-D", c.cfg.Dir, "-l", c.LogPath(), "-o", c.serverOptions(), "-w", "-t", "60", "start")
		if err == nil {
			return nil
		}
		problem := lastLogProblem(c.LogPath(), logStart)
		if picked && attempt < 3 && strings.Contains(problem, "in use") {
			c.port = 0
			continue
		}
		if problem != "" {
			return fmt.Errorf("start the private PostgreSQL in %s: %s (log: %s)", c.cfg.Dir, problem, c.LogPath())
		}
		return fmt.Errorf("start the private PostgreSQL in %s: %w", c.cfg.Dir, err)
	}
}

// serverOptions are the postgres options of every start: the port, loopback only, no socket.
func (c *LocalCluster) serverOptions() string {
	opts := fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=''", c.port)
	for _, s := range c.cfg.Settings {
		opts += " -c " + s
	}
	return opts
}

// Running reports whether a server runs on the data directory.
func (c *LocalCluster) Running(ctx context.Context) bool {
	return c.run(ctx, "pg_ctl", "-D", c.cfg.Dir, "status") == nil
}

// Stop shuts the server down cleanly (mode fast: clients are disconnected), waiting until it has.
func (c *LocalCluster) Stop(ctx context.Context) error {
	return c.run(ctx, "pg_ctl", "-D", c.cfg.Dir, "-m", "fast", "-w", "-t", "60", "stop")
}

// Abort shuts the server down at once (mode immediate: the next start recovers), for tests
// that throw the cluster away.
func (c *LocalCluster) Abort(ctx context.Context) error {
	return c.run(ctx, "pg_ctl", "-D", c.cfg.Dir, "-m", "immediate", "-w", "-t", "60", "stop")
}

// Restart stops the server with mode fast and starts it again on the same port.
func (c *LocalCluster) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	return c.Start(ctx)
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
func (c *LocalCluster) URL() string { return c.DatabaseURL(c.cfg.Database) }

// DatabaseURL is the connection URL of database name on the cluster.
func (c *LocalCluster) DatabaseURL(name string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, name)
}

// Addr is the address the server listens on.
func (c *LocalCluster) Addr() string { return "127.0.0.1:" + strconv.Itoa(c.port) }

// Dir is the cluster's data directory.
func (c *LocalCluster) Dir() string { return c.cfg.Dir }

// LogPath is the server's log file.
func (c *LocalCluster) LogPath() string { return filepath.Join(c.cfg.Dir, "server.log") }

// lastLogProblem is the last FATAL, PANIC or ERROR line the server logged past offset, without
// its timestamp, or "" when there is none.
func lastLogProblem(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return ""
	}
	lines := strings.Split(string(b[offset:]), "\n")
	for i := len(lines) - 1; i >= 0 && i >= len(lines)-50; i-- {
		for _, level := range []string{"FATAL:", "PANIC:", "ERROR:"} {
			if j := strings.Index(lines[i], level); j >= 0 {
				return strings.TrimSpace(lines[i][j:])
			}
		}
	}
	return ""
}

// fileSize is the size of the file at path, 0 when there is none.
func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
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
