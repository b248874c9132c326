package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// binaryServer is `asterion serve` run as a subprocess, so its memory can be read from /proc.
type binaryServer struct {
	BaseURL string
	Cmd     *exec.Cmd
	Stderr  *syncBuffer
}

// startBinaryServer runs the built binary's serve on a free port against a fresh database and
// waits for /readyz; the test's cleanup stops it with SIGTERM.
func startBinaryServer(t *testing.T, env map[string]string) *binaryServer {
	t.Helper()
	d := dbtest.New(t)
	addr := freeAddr(t)
	cmd := exec.Command(asterionBin(t), "serve", "--addr", addr, "--no-worker")
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "DATABASE_URL=") || strings.HasPrefix(kv, "ASTERION_") {
			continue
		}
		cmd.Env = append(cmd.Env, kv)
	}
	cmd.Env = append(cmd.Env, "DATABASE_URL="+d.URL.String(), "ASTERION_DB_WAIT=10s")
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	s := &binaryServer{BaseURL: "http://" + addr, Cmd: cmd, Stderr: &syncBuffer{}}
	cmd.Stdout, cmd.Stderr = &bytes.Buffer{}, s.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("serve did not stop within 15 s of SIGINT")
		}
	})
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	dbtest.WaitForDetail(t, 60*time.Second, "/readyz to answer 200", func() (bool, string) {
		select {
		case err := <-exited:
			exited <- err // for the cleanup, which waits for it too
			t.Fatalf("serve exited before it was ready: %v\n%s", err, s.Stderr)
		default:
		}
		resp, err := client.Get(s.BaseURL + "/readyz")
		if err != nil {
			return false, fmt.Sprintf("last: %v\n%s", err, s.Stderr)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("last: %d\n%s", resp.StatusCode, s.Stderr)
	})
	return s
}

// peakRSS is the process's high-water resident set size (VmHWM) in bytes.
func (s *binaryServer) peakRSS(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.Cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", v, err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmHWM in /proc status")
	return 0
}

// 300 concurrent wrong passwords for admin from one address: the server stays small and
// answers each, the limit refuses every attempt after the fifth (the right password too), and
// the right password works again once the window has passed. How long the answers took is
// logged, not asserted: it is the machine's speed, and the client's timeout bounds a hang.
func TestSignInFlood(t *testing.T) {
	t.Parallel()
	const window = 10 * time.Second
	adminPassword := "flood-admin-password"
	s := startBinaryServer(t, map[string]string{
		"ASTERION_ADMIN_PASSWORD": adminPassword,
		"ASTERION_LOGIN_WINDOW":   window.String(),
		"ASTERION_LOG_LEVEL":      "info",
		// One address opens 300 connections here; a per-address connection cap must not be
		// what answers them.
		"ASTERION_MAX_CONNS_PER_IP": "1000",
	})
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 300},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()

	// One login form (its CSRF cookie and field) serves every attempt, as a script would reuse it.
	resp, err := client.Get(s.BaseURL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	_, _ = page.ReadFrom(resp.Body)
	resp.Body.Close()
	m := loginCSRFRE.FindStringSubmatch(page.String())
	var csrfCookie *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "asterion_login_csrf" {
			csrfCookie = c
		}
	}
	if m == nil || csrfCookie == nil {
		t.Fatalf("login form without CSRF: %d", resp.StatusCode)
	}
	attempt := func(password string) (int, string, time.Duration) {
		form := url.Values{"csrf_token": {m[1]}, "username": {"admin"}, "password": {password}}
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, s.BaseURL+"/login", strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: csrfCookie.Name, Value: csrfCookie.Value})
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return 0, err.Error(), time.Since(start)
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		if resp.StatusCode == http.StatusTooManyRequests && resp.Header.Get("Retry-After") == "" {
			return resp.StatusCode, "429 without Retry-After", time.Since(start)
		}
		return resp.StatusCode, resp.Header.Get("Retry-After") + "|" + b.String(), time.Since(start)
	}

	const n = 300
	codes := make([]int, n)
	took := make([]time.Duration, n)
	notes := make([]string, n)
	var wg sync.WaitGroup
	startGate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-startGate
			codes[i], notes[i], took[i] = attempt("wrong-password-" + strconv.Itoa(i))
		}()
	}
	close(startGate)
	wg.Wait()
	counts := map[int]int{}
	for i := range n {
		counts[codes[i]]++
		if codes[i] != http.StatusUnauthorized && codes[i] != http.StatusTooManyRequests && codes[i] != http.StatusServiceUnavailable {
			t.Fatalf("attempt %d: %d %.300s", i, codes[i], notes[i])
		}
	}
	// Exactly five attempts were checked (401, or 503 if no hash slot came free in time); every
	// other one was refused before any hash.
	if counts[http.StatusUnauthorized]+counts[http.StatusServiceUnavailable] != 5 || counts[http.StatusUnauthorized] < 1 ||
		counts[http.StatusTooManyRequests] != n-5 {
		t.Fatalf("answers %v: want five checked and %d refused with 429", counts, n-5)
	}
	slowest := time.Duration(0)
	for _, d := range took {
		slowest = max(slowest, d)
	}
	rss := s.peakRSS(t)
	t.Logf("answers %v, slowest %s, peak RSS %d MiB", counts, slowest, rss>>20)
	if rss > 400<<20 {
		t.Fatalf("peak RSS %d MiB, want under 400 MiB", rss>>20)
	}

	// The right password is refused while the limit holds, and the page says when to retry.
	code, note, _ := attempt(adminPassword)
	if code != http.StatusTooManyRequests || !strings.Contains(note, "Try again at") {
		t.Fatalf("right password during the refusal: %d %.300s", code, note)
	}
	retry, err := strconv.Atoi(strings.SplitN(note, "|", 2)[0])
	if err != nil || retry < 1 || retry > int(window/time.Second)+1 {
		t.Fatalf("Retry-After %q, want 1..%d", strings.SplitN(note, "|", 2)[0], int(window/time.Second)+1)
	}
	// Wait as told, then the right password works. The sleep is the client obeying
	// Retry-After: the limiter's window is real time, and an attempt inside it proves nothing.
	time.Sleep(time.Duration(retry) * time.Second)
	dbtest.WaitForDetail(t, window, "the right password to work after the window", func() (bool, string) {
		code, note, _ = attempt(adminPassword)
		if code != http.StatusSeeOther && code != http.StatusTooManyRequests {
			t.Fatalf("right password after the window: %d %.300s", code, note)
		}
		return code == http.StatusSeeOther, fmt.Sprintf("last: %d %.300s", code, note)
	})
	// Every failure was logged at info with the user and the address.
	if got := strings.Count(s.Stderr.String(), `"msg":"sign-in failed"`); got != counts[http.StatusUnauthorized] {
		t.Errorf("%d failures logged, %d answered 401", got, counts[http.StatusUnauthorized])
	}
}
