package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// TestMakeRunStartsAPrivateDatabase runs `make run` with no DATABASE_URL while nothing answers
// at the address it tries first: it starts a private PostgreSQL, says so in one line, serves
// /readyz, and on SIGTERM stops the server and the cluster, leaving no process behind.
func TestMakeRunStartsAPrivateDatabase(t *testing.T) {
	t.Parallel()
	makePath, err := exec.LookPath("make")
	if err != nil {
		t.Fatalf("make is needed for `make run`: %v", err)
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	// Made directly in the temporary directory, which every user may enter: run as root, the
	// cluster belongs to the postgres user (t.TempDir's parent is private to root).
	dataDir, err := os.MkdirTemp("", "asterion-localdb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dataDir) })
	addr := freeAddr(t)
	cmd := exec.Command(makePath, "--no-print-directory", "-C", root, "run")
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "ASTERION_") || strings.HasPrefix(kv, "MAKE") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "ASTERION_ADDR="+addr, "ASTERION_DEFAULT_DB_ADDR="+freeAddr(t),
		"ASTERION_LOCAL_DB_DIR="+dataDir, "ASTERION_ADMIN_PASSWORD=local-db-password", "ASTERION_LOG_LEVEL=warn")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	announced := make(chan string, 1)
	var logs syncBuffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			logs.Write([]byte(line + "\n"))
			if strings.Contains(line, "running a private PostgreSQL") {
				announced <- line
			}
		}
		exited <- cmd.Wait()
	}()
	killed := false
	t.Cleanup(func() {
		if !killed {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})

	select {
	case line := <-announced:
		if !strings.HasPrefix(line, "asterion: nothing answers on ") || !strings.Contains(line, dataDir) {
			t.Errorf("announcement %q", line)
		}
	case err := <-exited:
		t.Fatalf("make run exited (%v) before starting a database; stderr:\n%s", err, logs.String())
	case <-time.After(3 * time.Minute):
		t.Fatalf("no private database announced; stderr:\n%s", logs.String())
	}
	waitReady(t, "http://"+addr, 2*time.Minute, &logs)

	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	killed = true
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatalf("make run did not stop within a minute of SIGTERM; stderr:\n%s", logs.String())
	}
	if _, err := os.Stat(filepath.Join(dataDir, "postmaster.pid")); !os.IsNotExist(err) {
		t.Errorf("postmaster.pid still there after the stop (%v): the cluster was not stopped", err)
	}
	if procs := processesMentioning(dataDir); len(procs) > 0 {
		t.Errorf("processes left behind: %v", procs)
	}
}

// waitReady polls base/readyz until it answers 200.
func waitReady(t *testing.T, base string, within time.Duration, logs *syncBuffer) {
	t.Helper()
	dbtest.WaitForDetail(t, within, base+"/readyz to answer 200", func() (bool, string) {
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, fmt.Sprintf("last: %v; stderr:\n%s", err, logs)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("last: %d; stderr:\n%s", resp.StatusCode, logs)
	})
}

// processesMentioning lists the command lines of live processes that name s.
func processesMentioning(s string) []string {
	var out []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if cl := strings.ReplaceAll(string(b), "\x00", " "); strings.Contains(cl, s) {
			out = append(out, e.Name()+": "+cl)
		}
	}
	return out
}

// TestLocalDatabaseWithoutPostgresProgramsSaysWhatToInstall: with no server programs to be
// found, serve --local-database fails with one line naming the package.
func TestLocalDatabaseWithoutPostgresProgramsSaysWhatToInstall(t *testing.T) {
	t.Parallel()
	r := runBinary(t, map[string]string{"ASTERION_DEFAULT_DB_ADDR": freeAddr(t), "ASTERION_PG_BIN": t.TempDir(),
		"ASTERION_LOCAL_DB_DIR": filepath.Join(t.TempDir(), "pg")}, "", "serve", "--local-database", "--addr", freeAddr(t))
	if r.code != 1 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 ||
		!strings.Contains(r.stderr, "apt-get install postgresql") {
		t.Errorf("exit %d, stderr %q: want 1 and one line naming the package", r.code, r.stderr)
	}
}

// TestLocalDatabaseFailuresSayWhatToDo: when the private cluster cannot be had, serve
// --local-database fails with one line that says what to do, and starts nothing: a listen
// address another process holds, a cluster directory that cannot be created, one the postgres
// user cannot reach when run as root.
func TestLocalDatabaseFailuresSayWhatToDo(t *testing.T) {
	t.Parallel()
	held, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, addr, dir string
		want            []string
	}{
		{"port taken", held.Addr().String(), filepath.Join(t.TempDir(), "pg"), []string{"address already in use", "ASTERION_ADDR"}},
		{"directory not creatable", freeAddr(t), filepath.Join(file, "pg"), []string{"create the private PostgreSQL's directory", "ASTERION_LOCAL_DB_DIR"}},
	}
	if os.Geteuid() == 0 {
		// t.TempDir's parent is private to root.
		cases = append(cases, struct {
			name, addr, dir string
			want            []string
		}{"unreachable by postgres", freeAddr(t), filepath.Join(t.TempDir(), "pg"), []string{"the postgres user cannot reach", "point ASTERION_LOCAL_DB_DIR at a directory every user may enter"}})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runBinary(t, map[string]string{"ASTERION_DEFAULT_DB_ADDR": freeAddr(t), "ASTERION_LOCAL_DB_DIR": tc.dir},
				"", "serve", "--local-database", "--addr", tc.addr)
			line := wantFailure(t, r, 1)
			for _, w := range tc.want {
				if !strings.Contains(line, w) {
					t.Errorf("the line %q does not say %q", line, w)
				}
			}
			if _, err := os.Stat(filepath.Join(tc.dir, "PG_VERSION")); err == nil {
				t.Errorf("a cluster was initialised in %s", tc.dir)
			}
		})
	}
}
