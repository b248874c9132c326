package db

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// EnsureSharedLocalCluster finds the server running on cfg.Dir, or prepares the directory and
// starts one, and leaves it running for the next caller. Concurrent callers (go test runs each
// package in a process of its own) take turns on a lock file beside Dir, so one of them starts
// the server and the others find it. started says whether this call started it. A server that
// runs on Dir but does not answer at its port here (it was started in another network
// namespace, or hangs) is stopped and started again.
func EnsureSharedLocalCluster(ctx context.Context, cfg LocalClusterConfig) (c *LocalCluster, started bool, err error) {
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, false, fmt.Errorf("local cluster directory %s: %w", cfg.Dir, err)
	}
	cfg.Dir = dir
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, false, &LocalClusterDirError{Dir: dir, Err: err}
	}
	unlock, err := lockFile(ctx, dir+".lock")
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	c, err = NewLocalCluster(ctx, cfg)
	if err != nil {
		return nil, false, err
	}
	if c.Running(ctx) {
		if port, err := postmasterPort(dir); err == nil && Answers("127.0.0.1:"+strconv.Itoa(port), 2*time.Second) {
			c.port = port
			return c, false, nil
		}
		if err := c.Stop(ctx); err != nil {
			return nil, false, err
		}
	}
	if err := c.Start(ctx); err != nil {
		return nil, false, err
	}
	return c, true, nil
}

// postmasterPort reads the port of the running server from its postmaster.pid, whose fourth
// line it is.
func postmasterPort(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0, fmt.Errorf("read the private PostgreSQL's postmaster.pid: %w", err)
	}
	lines := strings.Split(string(b), "\n")
	if len(lines) < 4 {
		return 0, fmt.Errorf("postmaster.pid in %s names no port yet", dir)
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	if err != nil {
		return 0, fmt.Errorf("postmaster.pid in %s: port %q: %w", dir, lines[3], err)
	}
	return port, nil
}

// lockFile takes an exclusive lock on path, waiting for another holder as long as ctx allows,
// and returns its release. The kernel drops the lock when the process dies, so a killed
// holder blocks nobody.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the lock %s: %w", path, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if err != syscall.EWOULDBLOCK {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, fmt.Errorf("wait for the lock %s: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}
