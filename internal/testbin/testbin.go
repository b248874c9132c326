// Package testbin builds the asterion binary for the tests that run it as a subprocess (the
// command's own end-to-end tests and the fault-injection suite), once per test process and
// only when a test asks for it, so that both build it the same way and a run of unit tests
// alone builds nothing.
package testbin

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// build is one variant of the binary (by its build flags), built at most once.
type build struct {
	once sync.Once
	// n keeps the file names of the variants apart.
	n    int
	path string
	err  error
}

var (
	mu     sync.Mutex
	dir    string
	builds = map[string]*build{}
)

// Asterion returns the path of the asterion binary built with the given extra go build flags
// (none, or "-race"), building it on the first call for those flags. It fails t when the build
// fails; every later call with the same flags fails the same way without building again.
func Asterion(t testing.TB, flags ...string) string {
	t.Helper()
	path, err := Build(flags...)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Build is Asterion for a TestMain that wants the build done before any test starts its
// clock: it returns the path, or the build's error.
func Build(flags ...string) (string, error) {
	key := strings.Join(flags, " ")
	mu.Lock()
	b, ok := builds[key]
	if !ok {
		b = &build{n: len(builds)}
		builds[key] = b
	}
	mu.Unlock()
	b.once.Do(func() { b.path, b.err = buildAsterion(flags, b.n) })
	return b.path, b.err
}

// buildAsterion runs go build into this process's temporary directory, as file asterion-n.
func buildAsterion(flags []string, n int) (string, error) {
	mu.Lock()
	if dir == "" {
		d, err := os.MkdirTemp("", "asterion-testbin-")
		if err != nil {
			mu.Unlock()
			return "", fmt.Errorf("make a directory for the asterion binary: %w", err)
		}
		dir = d
	}
	out := filepath.Join(dir, fmt.Sprintf("asterion-%d", n))
	mu.Unlock()
	args := append([]string{"build", "-o", out}, flags...)
	cmd := exec.Command(GoTool(), append(args, "asterion/cmd/asterion")...)
	if text, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build asterion (go %s): %w\n%s", strings.Join(args, " "), err, text)
	}
	return out, nil
}

// Cleanup removes the binaries built so far. A package's TestMain calls it after m.Run.
func Cleanup() {
	mu.Lock()
	defer mu.Unlock()
	if dir != "" {
		_ = os.RemoveAll(dir)
		dir = ""
	}
}

// GoTool finds the go command that runs these tests: the one on PATH, else the usual install.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}
