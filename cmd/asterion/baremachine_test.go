//go:build baremachine

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"asterion/internal/testbin"
)

// The bare-machine tests (make test-bare-machine) run where PostgreSQL's programs are
// installed but no server answers, each in a network namespace of its own, from a clone in a
// directory of mode 0700, as root (the usual case in a container) and as the user nobody.

var announceRE = regexp.MustCompile(`^asterion: nothing answers on 127\.0\.0\.1:5432; running a private PostgreSQL in (\S+) on (127\.0\.0\.1:\d+) until the server stops$`)

// TestBareMachineMakeRun: `make run` (as root, from a fresh clone; as nobody, the built
// binary's serve --local-database, which is what make run runs) starts a private cluster,
// answers a prompt submitted with a token the CLI made, stops the cluster with the server, and
// on the next start finds the same cluster and the same data. As root the cluster belongs to
// the postgres user under /var/lib/asterion and .data stays private.
func TestBareMachineMakeRun(t *testing.T) {
	t.Run("root", func(t *testing.T) {
		inOwnNetns(t, func(t *testing.T) { makeRunScenario(t, rootRunner) })
	})
	t.Run("nobody", func(t *testing.T) {
		r, why := nobodyRunner()
		if why != "" {
			t.Skip(why)
		}
		inOwnNetns(t, func(t *testing.T) { makeRunScenario(t, r) })
	})
}

func makeRunScenario(t *testing.T, r runner) {
	private := privateDir(t, r)
	clone := filepath.Join(private, "clone")
	addr := freeAddr(t)
	env := cleanEnv("ASTERION_ADDR="+addr, "ASTERION_ADMIN_PASSWORD=bare-machine-password", "ASTERION_LOG_LEVEL=warn",
		"ASTERION_SIM_LATENCY=0-0", "HOME="+private)
	var start func() *exec.Cmd
	if r.root() {
		cloneWorkTree(t, clone)
		makePath, err := exec.LookPath("make")
		if err != nil {
			t.Fatalf("make is needed for `make run`: %v", err)
		}
		// The clone builds offline from this machine's module cache; -trimpath lets it reuse
		// the compiled packages of any other clone.
		env = append(env, goEnv(t, "GOMODCACHE", "GOCACHE", "GOPATH")...)
		env = append(env, "GOFLAGS=-trimpath")
		start = func() *exec.Cmd { return exec.Command(makePath, "--no-print-directory", "-C", clone, "run") }
	} else {
		bin := filepath.Join(clone, "bin", "asterion")
		copyExecutable(t, asterionBin(t), bin)
		chownTree(t, clone, r)
		start = func() *exec.Cmd { return exec.Command(bin, "serve", "--local-database") }
	}

	var clusterDir string
	t.Cleanup(func() {
		if clusterDir == "" {
			return
		}
		stopClusterAt(clusterDir)
		if r.root() {
			_ = os.RemoveAll(filepath.Dir(clusterDir))
		}
	})
	serveOnce := func() (dir, dbAddr string, p *proc) {
		cmd := start()
		cmd.Dir, cmd.Env = clone, env
		r.apply(cmd)
		p = startProc(t, cmd)
		m := p.waitLine(t, announceRE, 10*time.Minute)
		clusterDir = m[1]
		waitServing(t, "http://"+addr, p)
		return m[1], m[2], p
	}

	dir, dbAddr, p := serveOnce()
	if r.root() {
		if !strings.HasPrefix(dir, "/var/lib/asterion/clone-") {
			t.Errorf("as root the cluster is in %s, want a directory under /var/lib/asterion", dir)
		}
		if note, err := os.ReadFile(filepath.Join(filepath.Dir(dir), "for")); err != nil || strings.TrimSpace(string(note)) != filepath.Join(clone, ".data", "postgres") {
			t.Errorf("the note beside the cluster names %q (%v), want the clone's .data/postgres", note, err)
		}
	} else if dir != filepath.Join(clone, ".data", "postgres") {
		t.Errorf("as %s the cluster is in %s, want the clone's .data/postgres", r.name, dir)
	}
	if owner := ownerOf(t, dir); r.root() && owner == 0 || !r.root() && owner != r.uid {
		t.Errorf("the cluster's directory belongs to uid %d", owner)
	}
	token := cliToken(t, "postgres://postgres@"+dbAddr+"/asterion?sslmode=disable")
	id := submitAndWait(t, "http://"+addr, token)
	p.stop(t)
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("postmaster.pid still there after the server stopped (%v): the cluster was not stopped", err)
	}
	if st, err := os.Stat(filepath.Join(clone, ".data")); err == nil && st.Mode().Perm() != 0o700 {
		t.Errorf(".data has mode %o, want 0700: it holds the secret key", st.Mode().Perm())
	}

	dir2, _, p := serveOnce()
	if dir2 != dir {
		t.Errorf("the second start uses %s, the first used %s", dir2, dir)
	}
	if state := jobState(t, "http://"+addr, token, id); state != "succeeded" {
		t.Errorf("after a restart the first start's job is %q, want succeeded", state)
	}
	submitAndWait(t, "http://"+addr, token)
	p.stop(t)
}

var harnessRE = regexp.MustCompile(`^dbtest: nothing answers on 127\.0\.0\.1:5432; the tests use a private PostgreSQL in (\S+) on (127\.0\.0\.1:\d+) \((started it|found it running); it keeps running for the next run\)$`)

// TestBareMachineTestHarness: the test harness's server lookup (dbtest.FindServer, through
// the command make test runs before the packages), in a namespace where nothing answers on
// 5432, starts one private cluster with room for the suite even when several test processes
// ask at once, which serves a prompt; the next lookup finds the same cluster, data and all.
func TestBareMachineTestHarness(t *testing.T) {
	t.Run("root", func(t *testing.T) {
		inOwnNetns(t, func(t *testing.T) { harnessScenario(t, rootRunner) })
	})
	t.Run("nobody", func(t *testing.T) {
		r, why := nobodyRunner()
		if why != "" {
			t.Skip(why)
		}
		inOwnNetns(t, func(t *testing.T) { harnessScenario(t, r) })
	})
}

func harnessScenario(t *testing.T, r runner) {
	private := privateDir(t, r)
	finder := filepath.Join(private, "testserver")
	build := exec.Command(testbin.GoTool(), "build", "-o", finder, "../../db/dbtest/testserver")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the test server finder: %v\n%s", err, out)
	}
	chownTree(t, private, r)
	var clusterDir string
	var mu sync.Mutex
	t.Cleanup(func() {
		if clusterDir == "" {
			return
		}
		stopClusterAt(clusterDir)
		if r.root() {
			_ = os.RemoveAll(filepath.Dir(clusterDir))
		}
	})
	// find runs the finder as go test runs a package: a process of its own, as r, in a
	// private working directory, with a cache directory of the test's own.
	find := func() (url, dir, how string) {
		cmd := exec.Command(finder)
		cmd.Dir = private
		cmd.Env = cleanEnv("HOME="+private, "XDG_CACHE_HOME="+filepath.Join(private, "cache"))
		r.apply(cmd)
		var stderr syncBuffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("the finder failed (%v): %s", err, stderr.String())
			return "", "", ""
		}
		ls := lines(stderr.String())
		m := harnessRE.FindStringSubmatch(strings.Join(ls, "\n"))
		if len(ls) != 1 || m == nil {
			t.Errorf("the finder did not say in one line where the tests' PostgreSQL is:\n%s", stderr.String())
			return strings.TrimSpace(string(out)), "", ""
		}
		mu.Lock()
		clusterDir = m[1]
		mu.Unlock()
		return strings.TrimSpace(string(out)), m[1], m[3]
	}

	// Three packages start at once: one starts the cluster, the others find it.
	type found struct{ url, dir, how string }
	results := make([]found, 3)
	var wg sync.WaitGroup
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, d, h := find()
			results[i] = found{u, d, h}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	starts := 0
	for _, f := range results {
		if f.how == "started it" {
			starts++
		}
		if f.url != results[0].url || f.dir != results[0].dir {
			t.Errorf("the finders disagree: %+v", results)
		}
	}
	if starts != 1 {
		t.Errorf("%d of three concurrent finders started a cluster, want exactly 1: %+v", starts, results)
	}
	base, dir := results[0].url, results[0].dir
	if r.root() {
		if !strings.HasPrefix(dir, "/var/lib/asterion/test-postgres") || ownerOf(t, dir) == 0 {
			t.Errorf("as root the tests' cluster is in %s (uid %d), want the postgres user's, under /var/lib/asterion", dir, ownerOf(t, dir))
		}
	} else if !strings.HasPrefix(dir, filepath.Join(private, "cache", "asterion", "test-postgres")) || ownerOf(t, dir) != r.uid {
		t.Errorf("as %s the tests' cluster is in %s (uid %d), want the user's own under its cache directory", r.name, dir, ownerOf(t, dir))
	}

	ctx := context.Background()
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		t.Fatalf("connect to the tests' cluster: %v", err)
	}
	var maxConns string
	if err := conn.QueryRow(ctx, "SHOW max_connections").Scan(&maxConns); err != nil {
		t.Fatal(err)
	}
	if n, _ := strconv.Atoi(maxConns); n < 300 {
		t.Errorf("the tests' cluster has max_connections %s, want at least 300", maxConns)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE asterion_bare"); err != nil {
		t.Fatal(err)
	}
	conn.Close(ctx)
	dbURL := strings.Replace(base, "/postgres?", "/asterion_bare?", 1)

	addr := freeAddr(t)
	serve := func() *proc {
		cmd := exec.Command(asterionBin(t), "serve", "--addr", addr)
		cmd.Env = cleanEnv("DATABASE_URL="+dbURL, "ASTERION_ADMIN_PASSWORD=bare-machine-password", "ASTERION_LOG_LEVEL=warn", "ASTERION_SIM_LATENCY=0-0")
		cmd.Dir = private
		rootRunner.apply(cmd)
		p := startProc(t, cmd)
		waitServing(t, "http://"+addr, p)
		return p
	}
	p := serve()
	token := cliToken(t, dbURL)
	id := submitAndWait(t, "http://"+addr, token)
	p.stop(t)

	url2, dir2, how := find()
	if url2 != base || dir2 != dir || how != "found it running" {
		t.Errorf("the next lookup: %s in %s (%s), want %s in %s, found running", url2, dir2, how, base, dir)
	}
	p = serve()
	if state := jobState(t, "http://"+addr, token, id); state != "succeeded" {
		t.Errorf("on the next lookup's cluster the job is %q, want succeeded", state)
	}
	p.stop(t)
}

// goEnv is NAME=value for each of the go command's settings names, as this process sees them.
func goEnv(t *testing.T, names ...string) []string {
	t.Helper()
	out, err := exec.Command(testbin.GoTool(), append([]string{"env"}, names...)...).Output()
	if err != nil {
		t.Fatalf("go env: %v", err)
	}
	values := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	var env []string
	for i, n := range names {
		env = append(env, n+"="+values[i])
	}
	return env
}

// copyExecutable copies the file src to dst with mode 0755, making dst's directories.
func copyExecutable(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// chownTree gives dir and everything in it to r.
func chownTree(t *testing.T, dir string, r runner) {
	t.Helper()
	err := filepath.Walk(dir, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, r.uid, r.gid)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// ownerOf is the uid that owns path, -1 when it cannot be read.
func ownerOf(t *testing.T, path string) int {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return int(st.Sys().(*syscall.Stat_t).Uid)
}
