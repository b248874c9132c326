package reliability

// Shared machinery of the fault-injection suite: the suite's size (short or long), the asterion
// binary (built once, by internal/testbin), subprocesses (serve, run-worker) that can be
// killed, a member with an API token, an HTTP client for the prompt API, and SQL helpers (the
// guarantees' checks are in invariants_test.go). This file owns the package's TestMain; add
// no other.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/internal/testbin"
)

// Environment variables that size and gate the suite.
const (
	// envMode selects the suite's size: "short" (CI) or "long" (on demand). When it is empty
	// the suite is not run at all (see TestMain).
	envMode = "ASTERION_RELIABILITY"
	// envRaceBinary, when "1", builds the asterion binary under test with -race as well.
	envRaceBinary = "ASTERION_RELIABILITY_RACE_BINARY"
)

// suiteMode is the value of ASTERION_RELIABILITY, normalised to "", "short" or "long".
var suiteMode string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	switch v := strings.ToLower(strings.TrimSpace(os.Getenv(envMode))); v {
	case "":
	case "short", "1", "true", "ci":
		suiteMode = "short"
	case "long":
		suiteMode = "long"
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want short or long\n", envMode, v)
		return 2
	}
	defer testbin.Cleanup()
	if suiteMode != "" {
		// Built before any test starts, so that no test's time budget pays for the build.
		if _, err := testbin.Build(binFlags()...); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// binFlags are the go build flags of the binary under test: -race when
// ASTERION_RELIABILITY_RACE_BINARY=1.
func binFlags() []string {
	if os.Getenv(envRaceBinary) == "1" {
		return []string{"-race"}
	}
	return nil
}

// asterionBin is the asterion binary under test (built by TestMain).
func asterionBin(t testing.TB) string {
	t.Helper()
	return testbin.Asterion(t, binFlags()...)
}

// requireSuite skips t unless ASTERION_RELIABILITY selects a size. The suite starts real
// servers, worker processes and a private PostgreSQL and runs for minutes, so `go test ./...`
// leaves it out; `make reliability` (ASTERION_RELIABILITY=short) runs it.
func requireSuite(t *testing.T) {
	t.Helper()
	if suiteMode == "" {
		t.Skipf("the reliability suite runs only with %s=short or %s=long", envMode, envMode)
	}
}

// long reports whether the long (on-demand) size was asked for.
func long() bool { return suiteMode == "long" }

// pick returns short or long by the suite's size, unless the environment variable key holds
// an override.
func pick[T any](t *testing.T, key string, short, lng T, parse func(string) (T, error)) T {
	t.Helper()
	if v := strings.TrimSpace(os.Getenv(key)); v != "" {
		x, err := parse(v)
		if err != nil {
			t.Fatalf("%s=%q: %v", key, v, err)
		}
		return x
	}
	if long() {
		return lng
	}
	return short
}

// pickInt is pick for whole numbers.
func pickInt(t *testing.T, key string, short, lng int) int {
	t.Helper()
	return pick(t, key, short, lng, func(s string) (int, error) {
		n, err := strconv.Atoi(s)
		if err == nil && n <= 0 {
			err = errors.New("must be positive")
		}
		return n, err
	})
}

// pickDuration is pick for durations.
func pickDuration(t *testing.T, key string, short, lng time.Duration) time.Duration {
	t.Helper()
	return pick(t, key, short, lng, func(s string) (time.Duration, error) {
		d, err := time.ParseDuration(s)
		if err == nil && d <= 0 {
			err = errors.New("must be positive")
		}
		return d, err
	})
}

// randomHex returns 2n random hex digits.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// freeAddr returns a loopback address whose port was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// proc is a running asterion subprocess whose stderr goes to a log file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	// waitErr is the result of Wait, readable once done is closed.
	waitErr error
}

// baseEnv is this process's environment without DATABASE_URL and the ASTERION_ variables, which
// `make` and a developer's shell may export.
func baseEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "ASTERION_") {
			continue
		}
		out = append(out, kv)
	}
	return out
}

// startProc starts the asterion binary with args and env on top of baseEnv. Its stderr (the
// JSON log) goes to a file that is printed, tail first, when the test fails. The process is
// stopped when the test ends.
func startProc(t *testing.T, name string, env map[string]string, args ...string) *proc {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		t.Fatalf("create log of %s: %v", name, err)
	}
	cmd := exec.Command(asterionBin(t), args...)
	cmd.Env = baseEnv()
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatalf("start %s (asterion %s): %v", name, strings.Join(args, " "), err)
	}
	p := &proc{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("--- last lines of %s's log (%s):\n%s", name, logPath, tailFile(logPath, 40))
		}
	})
	return p
}

// pid is the subprocess's process id.
func (p *proc) pid() int { return p.cmd.Process.Pid }

// exited reports whether the process has ended.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// stop asks the process to shut down gracefully (SIGTERM) and kills it after 15 s.
func (p *proc) stop() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		p.kill()
	}
}

// logText returns the whole log written so far.
func (p *proc) logText() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// tailFile returns the last n lines of the file at path.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(unreadable: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// checkNoPanic fails t when a process log shows a Go panic or a data race report.
func checkNoPanic(t *testing.T, procs ...*proc) {
	t.Helper()
	for _, p := range procs {
		text := p.logText()
		for _, bad := range []string{"panic:", "goroutine ", "WARNING: DATA RACE", "fatal error:"} {
			if strings.Contains(text, bad) {
				i := strings.Index(text, bad)
				t.Errorf("%s's log shows %q:\n%s", p.name, bad, text[max(0, i-200):min(len(text), i+2000)])
				break
			}
		}
	}
}

// server is `asterion serve` running as a subprocess.
type server struct {
	*proc
	// base is http://127.0.0.1:PORT.
	base string
}

// startServe starts `asterion serve` on a free port against databaseURL, with env on top of the
// defaults below, and waits for /readyz.
func startServe(t *testing.T, name, databaseURL string, env map[string]string, args ...string) *server {
	t.Helper()
	addr := freeAddr(t)
	full := map[string]string{
		"DATABASE_URL":            databaseURL,
		"ASTERION_ADMIN_PASSWORD": "admin-" + randomHex(8),
		"ASTERION_LOG_LEVEL":      "warn",
		"ASTERION_DB_WAIT":        "30s",
		// Every client of the suite is this process, on one address.
		"ASTERION_MAX_CONNS_PER_IP": "100000",
	}
	for k, v := range env {
		full[k] = v
	}
	p := startProc(t, name, full, append([]string{"serve", "--addr", addr}, args...)...)
	s := &server{proc: p, base: "http://" + addr}
	client := &http.Client{Timeout: 3 * time.Second}
	defer client.CloseIdleConnections()
	dbtest.WaitForDetail(t, 60*time.Second, name+"'s /readyz to answer 200", func() (bool, string) {
		if p.exited() {
			t.Fatalf("%s ended before it was ready (%v); log:\n%s", name, p.waitErr, tailFile(p.logPath, 40))
		}
		resp, err := client.Get(s.base + "/readyz")
		if err != nil {
			return false, fmt.Sprintf("last error %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("last status %d", resp.StatusCode)
	})
	return s
}

// startWorker starts `asterion run-worker` against databaseURL with env on top of the defaults.
func startWorker(t *testing.T, name, databaseURL string, env map[string]string, args ...string) *proc {
	t.Helper()
	full := map[string]string{"DATABASE_URL": databaseURL, "ASTERION_LOG_LEVEL": "warn", "ASTERION_DB_WAIT": "30s"}
	for k, v := range env {
		full[k] = v
	}
	return startProc(t, name, full, append([]string{"run-worker"}, args...)...)
}

// member is a user of role member with an API token, in an org of its own.
type member struct {
	OrgID, UserID int64
	Token         string
}

// newMember creates an org, a member and the member's API token directly in the database.
func newMember(t *testing.T, bunDB *bun.DB) member {
	t.Helper()
	ctx := context.Background()
	ids := identity.NewService(bunDB)
	suffix := randomHex(4)
	org, err := ids.CreateOrg(ctx, "reliability-"+suffix)
	if err != nil {
		t.Fatalf("create org: %v", err)
	}
	u, err := ids.CreateUser(ctx, org.Name, "rel-user-"+suffix, identity.RoleMember, "")
	if err != nil {
		t.Fatalf("create member: %v", err)
	}
	tok, err := ids.CreateToken(ctx, u.Name)
	if err != nil {
		t.Fatalf("create token: %v", err)
	}
	return member{OrgID: org.ID, UserID: u.ID, Token: tok}
}

// api calls the prompt API as one user.
type api struct {
	base  string
	token string
	hc    *http.Client
}

// newAPI returns a client for base with the user's token. Connections are pooled generously so
// an open-loop load does not open a connection per request.
func newAPI(t *testing.T, base, token string) *api {
	tr := &http.Transport{MaxIdleConns: 512, MaxIdleConnsPerHost: 512, IdleConnTimeout: 30 * time.Second,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	a := &api{base: base, token: token, hc: &http.Client{Transport: tr, Timeout: 15 * time.Second}}
	t.Cleanup(tr.CloseIdleConnections)
	return a
}

// submitResult is the outcome of one POST /sa-core/v1/prompt.
type submitResult struct {
	// Status is the HTTP status, 0 when no answer came.
	Status   int
	PromptID string
	JobID    string
	// Err is a transport error or an unreadable 202.
	Err error
}

// submit posts one prompt with the given extra fields.
func (a *api) submit(ctx context.Context, prompt string, fields map[string]any) submitResult {
	body := map[string]any{"prompt": prompt}
	for k, v := range fields {
		body[k] = v
	}
	b, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.base+"/sa-core/v1/prompt", bytes.NewReader(b))
	if err != nil {
		return submitResult{Err: fmt.Errorf("build submit request: %w", err)}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+a.token)
	resp, err := a.hc.Do(req)
	if err != nil {
		return submitResult{Err: fmt.Errorf("submit: %w", err)}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	r := submitResult{Status: resp.StatusCode}
	if err != nil {
		r.Err = fmt.Errorf("read submit answer (status %d): %w", resp.StatusCode, err)
		return r
	}
	if resp.StatusCode != http.StatusAccepted {
		r.Err = fmt.Errorf("submit answered %d: %s", resp.StatusCode, truncate(string(data), 300))
		return r
	}
	var out struct {
		PromptID string `json:"prompt_id"`
		JobID    string `json:"job_id"`
		State    string `json:"state"`
	}
	if err := json.Unmarshal(data, &out); err != nil || out.PromptID == "" || out.JobID == "" || out.State != "queued" {
		r.Err = fmt.Errorf("202 body is not a queued handle (%v): %s", err, truncate(string(data), 300))
		return r
	}
	r.PromptID, r.JobID = out.PromptID, out.JobID
	return r
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// queryInt runs a query returning one integer.
func queryInt(ctx context.Context, db bun.IDB, query string, args ...any) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, query, args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", strings.Join(strings.Fields(query), " "), err)
	}
	return n, nil
}

// mustInt is queryInt that fails t on error.
func mustInt(t *testing.T, db bun.IDB, query string, args ...any) int {
	t.Helper()
	n, err := queryInt(context.Background(), db, query, args...)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// stateCounts returns how many jobs are in each state, for logs and failure messages.
func stateCounts(ctx context.Context, db bun.IDB) (map[string]int, error) {
	rows, err := db.QueryContext(ctx, "SELECT state, count(*) FROM sa_job GROUP BY state")
	if err != nil {
		return nil, fmt.Errorf("count jobs by state: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var s string
		var n int
		if err := rows.Scan(&s, &n); err != nil {
			return nil, fmt.Errorf("scan job counts: %w", err)
		}
		out[s] = n
	}
	return out, rows.Err()
}

// percentile returns the p-th percentile (0..100) of sorted durations by nearest rank.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted))*p/100+0.999999) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// readRSS reads VmRSS of pid from /proc, in bytes.
func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("open status of %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			fields := strings.Fields(rest)
			if len(fields) != 2 || fields[1] != "kB" {
				return 0, fmt.Errorf("unexpected VmRSS line %q", line)
			}
			kb, err := strconv.ParseInt(fields[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS %q: %w", line, err)
			}
			return kb * 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read status of %d: %w", pid, err)
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
