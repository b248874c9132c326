//go:build baremachine

package main

// Helpers of the bare-machine tests (make test-bare-machine): a network namespace of the
// test's own, in which nothing answers on 127.0.0.1:5432; users to run as; a clone of the
// working tree in a private directory; the real server as a process, and a prompt through it.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"asterion/db"
	"asterion/db/dbtest"
)

// netnsChildEnv marks the test binary re-run inside a network namespace of its own.
const netnsChildEnv = "ASTERION_BARE_NETNS"

// inOwnNetns runs scenario inside a new network namespace with only its loopback interface up,
// so the machine's PostgreSQL is out of reach: the test binary runs itself again there, under
// unshare -n, for this test alone.
func inOwnNetns(t *testing.T, scenario func(t *testing.T)) {
	t.Helper()
	if os.Getenv(netnsChildEnv) == "1" {
		if db.Answers("127.0.0.1:5432", time.Second) {
			t.Fatal("127.0.0.1:5432 answers inside the namespace: the machine's server is not out of reach")
		}
		scenario(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Fatal("the bare-machine tests must run as root: they make network namespaces and run as other users (sudo make test-bare-machine)")
	}
	var pattern []string
	for _, part := range strings.Split(t.Name(), "/") {
		pattern = append(pattern, "^"+regexp.QuoteMeta(part)+"$")
	}
	cmd := exec.Command("unshare", "-n", "--", "sh", "-c", `ip link set lo up && exec "$0" "$@"`,
		os.Args[0], "-test.run", strings.Join(pattern, "/"), "-test.v", "-test.count=1", "-test.timeout=15m")
	cmd.Env = append(os.Environ(), netnsChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in a network namespace of its own (%v):\n%s", err, out)
	}
	t.Logf("in a network namespace of its own:\n%s", out)
}

// runner is a user the scenario runs as.
type runner struct {
	name     string
	uid, gid int
}

func (r runner) root() bool { return r.uid == 0 }

// apply makes cmd run as r.
func (r runner) apply(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if !r.root() {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: uint32(r.uid), Gid: uint32(r.gid), Groups: []uint32{}}
	}
}

// rootRunner is root; nobodyRunner is the unprivileged user nobody, or a reason it cannot be
// had.
var rootRunner = runner{name: "root"}

func nobodyRunner() (runner, string) {
	u, err := user.Lookup("nobody")
	if err != nil {
		return runner{}, "this machine has no user nobody to run as (" + err.Error() + ")"
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if uid == 0 {
		return runner{}, "the user nobody is root here"
	}
	return runner{name: "nobody", uid: uid, gid: gid}, ""
}

// privateDir makes a directory of mode 0700 that belongs to r and is removed when t ends.
func privateDir(t *testing.T, r runner) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "asterion-bare-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, r.uid, r.gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// cloneWorkTree copies the files git knows of (committed or not, but not ignored) into dst, as
// a fresh clone of the working tree would hold them.
func cloneWorkTree(t *testing.T, dst string) {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		t.Fatalf("list the working tree's files: %v", err)
	}
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, rel)
		st, err := os.Lstat(src)
		if err != nil || !st.Mode().IsRegular() {
			continue // deleted in the working tree, or not a plain file
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dst, rel)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, rel), b, st.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
}

// cleanEnv is this process's environment without DATABASE_URL, the ASTERION_ and MAKE
// settings, plus extra.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "ASTERION_") || strings.HasPrefix(kv, "MAKE") ||
			strings.HasPrefix(kv, "XDG_CACHE_HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// proc is a long-running child (make run, serve) whose stderr is watched line by line.
type proc struct {
	cmd    *exec.Cmd
	logs   *syncBuffer
	lines  chan string
	exited chan error
}

// startProc starts cmd in a process group of its own and kills the group when t ends.
func startProc(t *testing.T, cmd *exec.Cmd) *proc {
	t.Helper()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	p := &proc{cmd: cmd, logs: &syncBuffer{}, lines: make(chan string, 1000), exited: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.logs.Write([]byte(sc.Text() + "\n"))
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		p.exited <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) })
	return p
}

// waitLine waits for a stderr line matching re and returns its submatches.
func (p *proc) waitLine(t *testing.T, re *regexp.Regexp, within time.Duration) []string {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case line := <-p.lines:
			if m := re.FindStringSubmatch(line); m != nil {
				return m
			}
		case err := <-p.exited:
			p.exited <- err // for stop, which waits for it too
			t.Fatalf("%s exited (%v) before saying %q; stderr:\n%s", p.cmd.Path, err, re, p.logs)
		case <-deadline:
			t.Fatalf("%s did not say %q within %v; stderr:\n%s", p.cmd.Path, re, within, p.logs)
		}
	}
}

// stop sends SIGTERM to the process group and waits for the process to end.
func (p *proc) stop(t *testing.T) {
	t.Helper()
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s did not stop within 2 min of SIGTERM; stderr:\n%s", p.cmd.Path, p.logs)
	}
}

// waitServing polls base/readyz until it answers 200.
func waitServing(t *testing.T, base string, p *proc) {
	t.Helper()
	dbtest.WaitForDetail(t, 3*time.Minute, base+"/readyz to answer 200", func() (bool, string) {
		select {
		case err := <-p.exited:
			p.exited <- err // for stop, which waits for it too
			t.Fatalf("the server exited (%v) before it was ready; stderr:\n%s", err, p.logs)
		default:
		}
		resp, err := http.Get(base + "/readyz")
		if err != nil {
			return false, fmt.Sprintf("last: %v; stderr:\n%s", err, p.logs)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("last: %d; stderr:\n%s", resp.StatusCode, p.logs)
	})
}

// cliToken makes an API token for admin with the CLI, against databaseURL.
func cliToken(t *testing.T, databaseURL string) string {
	t.Helper()
	r := runBinary(t, map[string]string{"DATABASE_URL": databaseURL}, "", "token", "create", "--user", "admin")
	if r.code != 0 {
		t.Fatalf("token create: exit %d: %s", r.code, r.stderr)
	}
	return strings.TrimSpace(r.stdout)
}

// apiCall sends one JSON request with the token and decodes the answer.
func apiCall(t *testing.T, method, u, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	var out map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

// submitAndWait submits a prompt over the API and waits until its job has succeeded.
func submitAndWait(t *testing.T, base, token string) string {
	t.Helper()
	code, sub := apiCall(t, "POST", base+"/sa-core/v1/prompt", token, `{"prompt":"hello from a bare machine"}`)
	id, _ := sub["job_id"].(string)
	if code != http.StatusAccepted || id == "" {
		t.Fatalf("submit: %d %v", code, sub)
	}
	dbtest.WaitForDetail(t, 2*time.Minute, "job "+id+" to succeed", func() (bool, string) {
		state := jobState(t, base, token, id)
		return state == "succeeded", "it is " + state
	})
	return id
}

// jobState is the state of job id as the API reports it.
func jobState(t *testing.T, base, token, id string) string {
	t.Helper()
	code, job := apiCall(t, "GET", base+"/sa-core/v1/jobs/"+id, token, "")
	if code != http.StatusOK {
		t.Fatalf("GET job %s: %d %v", id, code, job)
	}
	state, _ := job["state"].(string)
	return state
}

// stopClusterAt stops, at once, a server left running on the data directory dir, as the
// directory's owner; nothing happens when none runs.
func stopClusterAt(dir string) {
	if _, err := os.Stat(filepath.Join(dir, "postmaster.pid")); err != nil {
		return
	}
	bin, err := db.PostgresPrograms(os.Getenv("ASTERION_PG_BIN"))
	if err != nil {
		return
	}
	owner, err := os.Stat(dir)
	if err != nil {
		return
	}
	sys := owner.Sys().(*syscall.Stat_t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_ctl"), "-D", dir, "-m", "immediate", "-w", "stop")
	cmd.Dir = "/"
	runner{uid: int(sys.Uid), gid: int(sys.Gid)}.apply(cmd)
	_ = cmd.Run()
}
