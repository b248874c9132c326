package main

// Shared client helpers of the Asterion-only phases: API calls with a bearer token, page
// requests with a session cookie (after a real form login), Server-Sent Events streams each on
// its own connection, the server process's resident memory, the open-files limit, and
// latency quantiles.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// apiClient talks to one asterion server. Ordinary requests share a keep-alive pool; every
// SSE stream gets a connection of its own, as a browser tab or an API client would.
type apiClient struct {
	base string
	// token is the bearer token of API calls, and of page requests when cookie is empty.
	token string
	// cookie is the session cookie ("asterion_session=…") of page requests, set by login.
	cookie string
	http   *http.Client
	stream *http.Client
}

func newAPIClient(base, token string) *apiClient {
	pool := &http.Transport{MaxIdleConns: 256, MaxIdleConnsPerHost: 256, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute,
		DisableCompression: true}
	// A streaming response holds its connection for as long as it is open, so the stream
	// transport has no per-host cap and keeps nothing idle.
	streams := &http.Transport{MaxIdleConns: 4000, MaxIdleConnsPerHost: 4000, MaxConnsPerHost: 0, IdleConnTimeout: time.Minute,
		DisableCompression: true, ResponseHeaderTimeout: 30 * time.Second}
	noRedirect := func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &apiClient{base: base, token: token,
		http:   &http.Client{Transport: pool, Timeout: 60 * time.Second, CheckRedirect: noRedirect},
		stream: &http.Client{Transport: streams, CheckRedirect: noRedirect}}
}

// withToken returns a client of the same server acting as another token holder.
func (c *apiClient) withToken(token string) *apiClient {
	cp := *c
	cp.token, cp.cookie = token, ""
	return &cp
}

// authorize sets the request's credentials: the session cookie when page is true and one is
// held, else the bearer token.
func (c *apiClient) authorize(req *http.Request, page bool) {
	if page && c.cookie != "" {
		req.Header.Set("Cookie", c.cookie)
		return
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
}

// submitted is what POST /sa-core/v1/prompt answered.
type submitted struct {
	PromptID  string `json:"prompt_id"`
	JobID     string `json:"job_id"`
	Operation struct {
		OperationID string `json:"operation_id"`
	} `json:"operation"`
}

// submit posts one prompt with the bearer token and expects 202.
func (c *apiClient) submit(ctx context.Context, text string) (submitted, error) {
	body, _ := json.Marshal(map[string]string{"prompt": text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/sa-core/v1/prompt", bytes.NewReader(body))
	if err != nil {
		return submitted{}, fmt.Errorf("build submit request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	c.authorize(req, false)
	resp, err := c.http.Do(req)
	if err != nil {
		return submitted{}, fmt.Errorf("submit prompt: %w", err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		return submitted{}, fmt.Errorf("submit prompt: status %d: %.200s", resp.StatusCode, raw)
	}
	var out submitted
	if err := json.Unmarshal(raw, &out); err != nil {
		return submitted{}, fmt.Errorf("decode submit answer: %w", err)
	}
	return out, nil
}

// login signs in through the real form: GET /login sets the login CSRF cookie whose value the
// form echoes, POST /login answers 303 with the session cookie, which page requests then carry.
func (c *apiClient) login(ctx context.Context, user, password string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/login", nil)
	if err != nil {
		return fmt.Errorf("build login form request: %w", err)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("get login form: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var csrf string
	for _, ck := range resp.Cookies() {
		if ck.Name == "asterion_login_csrf" {
			csrf = ck.Value
		}
	}
	if csrf == "" {
		return errors.New("login form set no CSRF cookie")
	}
	form := url.Values{"username": {user}, "password": {password}, "csrf_token": {csrf}, "next": {"/admin/deferred-operations"}}
	req, err = http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/login", strings.NewReader(form.Encode()))
	if err != nil {
		return fmt.Errorf("build login request: %w", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Cookie", "asterion_login_csrf="+csrf)
	resp, err = c.http.Do(req)
	if err != nil {
		return fmt.Errorf("post login form: %w", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	for _, ck := range resp.Cookies() {
		if ck.Name == "asterion_session" && ck.Value != "" {
			c.cookie = ck.Name + "=" + ck.Value
			return nil
		}
	}
	return fmt.Errorf("login as %s: status %d and no session cookie", user, resp.StatusCode)
}

// get requests path as a page (session cookie when held) and reads the whole body; the
// duration runs from sending the request to the last byte of the body.
func (c *apiClient) get(ctx context.Context, path string) (status int, size int, d time.Duration, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("build request for %s: %w", path, err)
	}
	c.authorize(req, true)
	start := time.Now()
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, 0, time.Since(start), fmt.Errorf("get %s: %w", path, err)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	d = time.Since(start)
	resp.Body.Close()
	if err != nil {
		return resp.StatusCode, int(n), d, fmt.Errorf("read %s: %w", path, err)
	}
	return resp.StatusCode, int(n), d, nil
}

// fetch requests path as a page and returns its body; an answer other than 200 is an error.
func (c *apiClient) fetch(ctx context.Context, path string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		return "", fmt.Errorf("build request for %s: %w", path, err)
	}
	c.authorize(req, true)
	resp, err := c.http.Do(req)
	if err != nil {
		return "", fmt.Errorf("get %s: %w", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("read %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("get %s: status %d: %.200s", path, resp.StatusCode, raw)
	}
	return string(raw), nil
}

// sseEvent is one event of a stream, or one comment line (Name "comment").
type sseEvent struct {
	Name string
	ID   string
	Data string
	// At is when the event's closing blank line was read.
	At time.Time
}

// sseStream is one open SSE connection; its events go to the handler given to openStream,
// called from the stream's own goroutine, in order.
type sseStream struct {
	cancel context.CancelFunc
	done   chan struct{}
	// ready is closed when the first line arrives (the stream's own greeting).
	ready chan struct{}
	err   error
}

// openStream opens path as an SSE stream with the page credentials and returns once the
// response headers arrived (200 and text/event-stream); handle then receives every event.
func (c *apiClient) openStream(ctx context.Context, path string, handle func(sseEvent)) (*sseStream, error) {
	sctx, cancel := context.WithCancel(ctx)
	req, err := http.NewRequestWithContext(sctx, http.MethodGet, c.base+path, nil)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("build stream request for %s: %w", path, err)
	}
	req.Header.Set("Accept", "text/event-stream")
	c.authorize(req, true)
	resp, err := c.stream.Do(req)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("open stream %s: %w", path, err)
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("open stream %s: status %d, content type %q: %s", path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	s := &sseStream{cancel: cancel, done: make(chan struct{}), ready: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		s.err = readSSE(resp.Body, s.ready, handle)
	}()
	return s, nil
}

// readSSE parses an event stream until it ends, closing ready at the first line.
func readSSE(r io.Reader, ready chan struct{}, handle func(sseEvent)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var ev sseEvent
	var data []string
	first := true
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return err
		}
		if first {
			close(ready)
			first = false
		}
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "":
			if ev.Name != "" || len(data) > 0 {
				if ev.Name == "" {
					ev.Name = "message"
				}
				ev.Data, ev.At = strings.Join(data, "\n"), time.Now()
				handle(ev)
			}
			ev, data = sseEvent{}, data[:0]
		case strings.HasPrefix(line, ":"):
			handle(sseEvent{Name: "comment", Data: strings.TrimSpace(line[1:]), At: time.Now()})
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				ev.Name = value
			case "data":
				data = append(data, value)
			case "id":
				ev.ID = value
			}
		}
	}
}

// Close ends the stream and waits for its reader.
func (s *sseStream) Close() {
	s.cancel()
	<-s.done
}

// openStreams opens n streams of path, at most 50 connecting at once, and waits until each
// has sent its first line. handle(i, ev) receives stream i's events. On an error every stream
// opened so far is closed.
func (c *apiClient) openStreams(ctx context.Context, n int, path string, handle func(i int, ev sseEvent)) ([]*sseStream, error) {
	out := make([]*sseStream, n)
	errs := make([]error, n)
	sem := make(chan struct{}, 50)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			s, err := c.openStream(ctx, path, func(ev sseEvent) { handle(i, ev) })
			if err != nil {
				errs[i] = err
				return
			}
			select {
			case <-s.ready:
				out[i] = s
			case <-s.done:
				errs[i] = fmt.Errorf("stream %d of %s ended before its first line: %v", i, path, s.err)
			case <-time.After(30 * time.Second):
				s.Close()
				errs[i] = fmt.Errorf("stream %d of %s sent nothing in 30 s", i, path)
			}
		}(i)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		closeStreams(out)
		return nil, err
	}
	return out, nil
}

// closeStreams closes every non-nil stream.
func closeStreams(ss []*sseStream) {
	for _, s := range ss {
		if s != nil {
			s.Close()
		}
	}
}

// vmRSSKiB reads a process's resident set size (VmRSS) in KiB from /proc.
func vmRSSKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read status of process %d: %w", pid, err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 0 {
				break
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse VmRSS of process %d: %w", pid, err)
			}
			return n, nil
		}
	}
	return 0, fmt.Errorf("process %d reports no VmRSS", pid)
}

// cpuTime reads the user plus system CPU time a process has used so far, from /proc (clock
// ticks of 10 ms, Linux's USER_HZ).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read stat of process %d: %w", pid, err)
	}
	// The command name (field 2) may hold spaces; the fields after it start past its ')'.
	rest := string(b)
	if i := strings.LastIndexByte(rest, ')'); i >= 0 {
		rest = rest[i+1:]
	}
	f := strings.Fields(rest)
	if len(f) < 13 {
		return 0, fmt.Errorf("stat of process %d has %d fields", pid, len(f))
	}
	// utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name.
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("parse CPU times of process %d: %w", pid, err)
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// raiseOpenFiles lifts this process's soft RLIMIT_NOFILE to at least want (within the hard
// limit), so the load generator can hold thousands of connections; subprocesses started
// afterwards inherit it.
func raiseOpenFiles(want uint64) error {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("read open-files limit: %w", err)
	}
	if lim.Cur >= want {
		return nil
	}
	lim.Cur = min(want, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return fmt.Errorf("raise open-files limit to %d: %w", lim.Cur, err)
	}
	return nil
}

// latency is a distribution of latencies in milliseconds.
type latency struct {
	N     int     `json:"n"`
	P50ms float64 `json:"p50_ms"`
	P95ms float64 `json:"p95_ms"`
	P99ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// quantiles summarises ds (sorted in place); nearest-rank on the sorted sample.
func quantiles(ds []time.Duration) latency {
	if len(ds) == 0 {
		return latency{}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	q := func(p float64) float64 {
		return float64(ds[int(p*float64(len(ds)-1))].Microseconds()) / 1000
	}
	return latency{N: len(ds), P50ms: q(0.50), P95ms: q(0.95), P99ms: q(0.99), MaxMs: q(1)}
}
