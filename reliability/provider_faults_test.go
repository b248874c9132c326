package reliability

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
)

// fakeAPIKey is the key the server under test sends; the 401 case echoes it back so the test
// can check that no error message stores it.
const fakeAPIKey = "sk-reliability-0123456789abcdef"

// fakeModel is the model the server under test is configured with.
const fakeModel = "fake-model-1"

// fault is what the fake provider does on one attempt (1-based) of one prompt.
type fault func(w http.ResponseWriter, r *http.Request, attempt int)

// providerCall is one request the fake provider received.
type providerCall struct {
	start, end time.Time
}

// fakeProvider is an httptest server speaking the OpenAI chat-completions protocol. Each prompt
// carries "case:<name>" in its text; the fake looks up the case's fault and counts attempts.
type fakeProvider struct {
	srv *httptest.Server

	mu       sync.Mutex
	faults   map[string]fault
	calls    map[string][]providerCall
	problems []string
}

var caseRE = regexp.MustCompile(`case:([a-z0-9-]+)`)

func newFakeProvider(t *testing.T, faults map[string]fault) *fakeProvider {
	fp := &fakeProvider{faults: faults, calls: map[string][]providerCall{}}
	fp.srv = httptest.NewServer(http.HandlerFunc(fp.serve))
	t.Cleanup(fp.srv.Close)
	return fp
}

// serve checks that the request is a well-formed chat completion from the adapter, then applies
// the prompt's fault for this attempt.
func (fp *fakeProvider) serve(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	body, err := io.ReadAll(r.Body)
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
	}
	var problem string
	switch {
	case err != nil:
		problem = "read body: " + err.Error()
	case r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions":
		problem = "request to " + r.Method + " " + r.URL.Path
	case r.Header.Get("Authorization") != "Bearer "+fakeAPIKey:
		problem = "wrong Authorization header"
	case json.Unmarshal(body, &req) != nil || len(req.Messages) != 1 || req.Messages[0].Role != "user":
		problem = "body is not one user message: " + truncate(string(body), 200)
	case req.Model != fakeModel:
		problem = "model " + req.Model
	}
	var name string
	if problem == "" {
		if m := caseRE.FindStringSubmatch(req.Messages[0].Content); m != nil {
			name = m[1]
		} else {
			problem = "no case in prompt " + truncate(req.Messages[0].Content, 100)
		}
	}
	fp.mu.Lock()
	f, ok := fp.faults[name]
	if problem == "" && !ok {
		problem = "unknown case " + name
	}
	if problem != "" {
		fp.problems = append(fp.problems, problem)
		fp.mu.Unlock()
		http.Error(w, problem, http.StatusTeapot)
		return
	}
	fp.calls[name] = append(fp.calls[name], providerCall{start: start})
	attempt := len(fp.calls[name])
	fp.mu.Unlock()

	f(w, r, attempt)

	fp.mu.Lock()
	fp.calls[name][attempt-1].end = time.Now()
	fp.mu.Unlock()
}

// callsOf returns a copy of the calls made for a case.
func (fp *fakeProvider) callsOf(name string) []providerCall {
	fp.mu.Lock()
	defer fp.mu.Unlock()
	return append([]providerCall(nil), fp.calls[name]...)
}

// completion answers with a valid chat completion.
func completion(w http.ResponseWriter, r *http.Request, attempt int) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d-%d", time.Now().UnixNano(), attempt), "object": "chat.completion", "model": fakeModel,
		"choices": []map[string]any{{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": fmt.Sprintf("fake answer on attempt %d", attempt)}}},
		"usage": map[string]int{"prompt_tokens": 3, "completion_tokens": 4},
	})
}

// slowBody sends 200 and the start of a body, then trickles a byte every 200 ms until the
// client gives up: a timeout while reading the body.
func slowBody(w http.ResponseWriter, r *http.Request, _ int) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = io.WriteString(w, `{"id":"slow","object":"chat.completion","choices":[`)
	fl, _ := w.(http.Flusher)
	for i := 0; i < 300; i++ {
		if fl != nil {
			fl.Flush()
		}
		select {
		case <-r.Context().Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
		if _, err := io.WriteString(w, " "); err != nil {
			return
		}
	}
}

// slowHeaders never answers until the client gives up: a timeout before any byte.
func slowHeaders(_ http.ResponseWriter, r *http.Request, _ int) {
	select {
	case <-r.Context().Done():
	case <-time.After(60 * time.Second):
	}
}

// status answers with code, the given headers and an OpenAI-style error body.
func status(code int, headers map[string]string, message string) fault {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		for k, v := range headers {
			w.Header().Set(k, v)
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": message, "type": "test"}})
	}
}

// raw answers 200 with a body that is not a chat completion.
func raw(contentType, body string) fault {
	return func(w http.ResponseWriter, _ *http.Request, _ int) {
		w.Header().Set("Content-Type", contentType)
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, body)
	}
}

// reset takes over the connection after reading the request and closes it with a TCP reset.
func reset(w http.ResponseWriter, _ *http.Request, _ int) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("fake provider: response writer cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = conn.Close()
}

// failFirst applies bad on the first k attempts and answers normally after.
func failFirst(k int, bad fault) fault {
	return func(w http.ResponseWriter, r *http.Request, attempt int) {
		if attempt <= k {
			bad(w, r, attempt)
			return
		}
		completion(w, r, attempt)
	}
}

// cycle applies the faults in turn, one per attempt, and repeats the last.
func cycle(fs ...fault) fault {
	return func(w http.ResponseWriter, r *http.Request, attempt int) {
		fs[min(attempt, len(fs))-1](w, r, attempt)
	}
}

// step is one change-feed entry of a job: "state/attempt/error_kind" ("-" for none), or
// "running/attempt".
type step string

// window bounds the delay the job recorded between a failed attempt and the next one.
type window struct{ min, max time.Duration }

// faultCase is one prompt with a known expected behaviour.
type faultCase struct {
	name        string
	fault       fault
	maxAttempts int
	// steps is the exact change-feed history of the job, from submit to where it ends.
	steps []step
	// delays are the bounds of each retry's recorded delay (scheduled_at minus the time of the
	// re-queue), in order; only the last can be read from the row, earlier ones are checked on
	// the provider's side.
	delays []window
	// terminal is false for a case that is left waiting (a 60 s rate-limit floor in short mode).
	terminal bool
	// messageHas is a fragment the final error_message must contain ("" for none).
	messageHas string
}

// Backoff windows of the retry rules ("5s + random(0, 5s)", "25s + random(0, 15s)"),
// with a millisecond of slack for the recorded rounding.
var (
	backoff2 = window{5 * time.Second, 10 * time.Second}
	backoff3 = window{25 * time.Second, 40 * time.Second}
)

// exact is a window of one value.
func exact(d time.Duration) window { return window{d, d} }

// TestProviderFaults runs the real server against a fake OpenAI-compatible provider that injects
// timeouts, rate limits with and without Retry-After, 5xx bursts, garbage bodies, connection
// resets and 4xx answers, and checks each job's exact history of states, attempts and
// error_kind against the retry rules (timeout, rate_limit, provider_5xx and unknown
// retry with backoff or Retry-After; provider_4xx, parse and auth fail at once), the delays it
// recorded, the number of calls the provider saw, and that no error message holds the API key.
//
// The adapter timeout (180 s) has no setting of its own (provider.FromEnv always uses
// provider.DefaultOpenAITimeout), so the test bounds the call with ASTERION_JOB_TIMEOUT=2s: the
// worker's context deadline ends the call the same way and is classified as timeout.
//
// Long mode adds the cases that wait for the 25–40 s third-attempt backoff and the 60 s floor
// of a rate limit without Retry-After.
func TestProviderFaults(t *testing.T) {
	requireSuite(t)
	t.Parallel()
	retryAfterDate := func(w http.ResponseWriter, r *http.Request, attempt int) {
		status(http.StatusTooManyRequests, map[string]string{"Retry-After": time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)}, "slow down")(w, r, attempt)
	}
	cases := []faultCase{
		{name: "ok", fault: completion, maxAttempts: 3, terminal: true,
			steps: []step{"queued/1/-", "running/1", "succeeded/1/-"}},
		{name: "slow-body-once", fault: failFirst(1, slowBody), maxAttempts: 2, terminal: true, delays: []window{backoff2},
			steps: []step{"queued/1/-", "running/1", "queued/2/timeout", "running/2", "succeeded/2/-"}},
		{name: "slow-body-always", fault: slowBody, maxAttempts: 1, terminal: true, messageHas: "timed out",
			steps: []step{"queued/1/-", "running/1", "failed/1/timeout"}},
		{name: "slow-headers-always", fault: slowHeaders, maxAttempts: 1, terminal: true, messageHas: "timed out",
			steps: []step{"queued/1/-", "running/1", "failed/1/timeout"}},
		{name: "rate-limit-retry-after-once", fault: failFirst(1, status(http.StatusTooManyRequests, map[string]string{"Retry-After": "1"}, "slow down")),
			maxAttempts: 3, terminal: true, delays: []window{exact(time.Second)},
			steps: []step{"queued/1/-", "running/1", "queued/2/rate_limit", "running/2", "succeeded/2/-"}},
		{name: "rate-limit-retry-after-date-once", fault: failFirst(1, retryAfterDate),
			maxAttempts: 3, terminal: true, delays: []window{{time.Second, 3 * time.Second}},
			steps: []step{"queued/1/-", "running/1", "queued/2/rate_limit", "running/2", "succeeded/2/-"}},
		{name: "rate-limit-retry-after-always", fault: status(http.StatusTooManyRequests, map[string]string{"Retry-After": "1"}, "quota exhausted"),
			maxAttempts: 2, terminal: true, delays: []window{exact(time.Second)}, messageHas: "quota exhausted",
			steps: []step{"queued/1/-", "running/1", "queued/2/rate_limit", "running/2", "failed/2/rate_limit"}},
		{name: "rate-limit-no-retry-after-last-attempt", fault: status(http.StatusTooManyRequests, nil, "slow down"),
			maxAttempts: 1, terminal: true,
			steps: []step{"queued/1/-", "running/1", "failed/1/rate_limit"}},
		{name: "server-error-once", fault: failFirst(1, status(http.StatusServiceUnavailable, nil, "overloaded")),
			maxAttempts: 3, terminal: true, delays: []window{backoff2},
			steps: []step{"queued/1/-", "running/1", "queued/2/provider_5xx", "running/2", "succeeded/2/-"}},
		{name: "server-error-always", fault: cycle(status(http.StatusInternalServerError, nil, "boom"), status(http.StatusBadGateway, nil, "bad gateway")),
			maxAttempts: 2, terminal: true, delays: []window{backoff2}, messageHas: "bad gateway",
			steps: []step{"queued/1/-", "running/1", "queued/2/provider_5xx", "running/2", "failed/2/provider_5xx"}},
		{name: "garbage-html", fault: raw("text/html", "<html><body>502 from a proxy</body></html>"), maxAttempts: 3, terminal: true,
			steps: []step{"queued/1/-", "running/1", "failed/1/parse"}},
		{name: "garbage-no-choices", fault: raw("application/json", `{"id":"x","object":"chat.completion","choices":[]}`), maxAttempts: 3, terminal: true,
			steps: []step{"queued/1/-", "running/1", "failed/1/parse"}},
		{name: "garbage-truncated", fault: raw("application/json", `{"id":"x","choices":[{"message":{"content":"hal`), maxAttempts: 3, terminal: true,
			steps: []step{"queued/1/-", "running/1", "failed/1/parse"}},
		{name: "reset-once", fault: failFirst(1, reset), maxAttempts: 3, terminal: true, delays: []window{backoff2},
			steps: []step{"queued/1/-", "running/1", "queued/2/unknown", "running/2", "succeeded/2/-"}},
		{name: "reset-always", fault: reset, maxAttempts: 1, terminal: true,
			steps: []step{"queued/1/-", "running/1", "failed/1/unknown"}},
		{name: "auth-401", fault: status(http.StatusUnauthorized, nil, "invalid api key "+fakeAPIKey), maxAttempts: 3, terminal: true,
			messageHas: "[redacted]", steps: []step{"queued/1/-", "running/1", "failed/1/auth"}},
		{name: "auth-403", fault: status(http.StatusForbidden, nil, "forbidden"), maxAttempts: 3, terminal: true,
			steps: []step{"queued/1/-", "running/1", "failed/1/auth"}},
		{name: "client-error-400", fault: status(http.StatusBadRequest, nil, "bad request"), maxAttempts: 3, terminal: true,
			messageHas: "bad request", steps: []step{"queued/1/-", "running/1", "failed/1/provider_4xx"}},
		{name: "client-error-404", fault: status(http.StatusNotFound, nil, "no such model"), maxAttempts: 3, terminal: true,
			steps: []step{"queued/1/-", "running/1", "failed/1/provider_4xx"}},
	}
	if long() {
		cases = append(cases,
			faultCase{name: "rate-limit-no-retry-after-once", fault: failFirst(1, status(http.StatusTooManyRequests, nil, "slow down")),
				maxAttempts: 3, terminal: true, delays: []window{exact(60 * time.Second)},
				steps: []step{"queued/1/-", "running/1", "queued/2/rate_limit", "running/2", "succeeded/2/-"}},
			faultCase{name: "server-error-twice", fault: failFirst(2, cycle(status(http.StatusBadGateway, nil, "a"), status(http.StatusGatewayTimeout, nil, "b"))),
				maxAttempts: 3, terminal: true, delays: []window{backoff2, backoff3},
				steps: []step{"queued/1/-", "running/1", "queued/2/provider_5xx", "running/2",
					"queued/3/provider_5xx", "running/3", "succeeded/3/-"}},
			faultCase{name: "timeout-always-three", fault: slowBody, maxAttempts: 3, terminal: true, delays: []window{backoff2, backoff3},
				steps: []step{"queued/1/-", "running/1", "queued/2/timeout", "running/2",
					"queued/3/timeout", "running/3", "failed/3/timeout"}},
		)
	} else {
		// Short mode checks the 60 s floor of a rate limit without Retry-After on the re-queued
		// row instead of waiting for it.
		cases = append(cases, faultCase{name: "rate-limit-no-retry-after-once", fault: failFirst(1, status(http.StatusTooManyRequests, nil, "slow down")),
			maxAttempts: 3, terminal: false, delays: []window{exact(60 * time.Second)},
			steps: []step{"queued/1/-", "running/1", "queued/2/rate_limit"}})
	}
	// The fence is one more good prompt, sent once every case has played out: by the time it
	// has succeeded the workers have claimed everything due before it, so an unexpected extra
	// attempt of a case would show in that case's history.
	const fence = "fence"
	faults := map[string]fault{fence: completion}
	for _, c := range cases {
		faults[c.name] = c.fault
	}
	fp := newFakeProvider(t, faults)

	d := dbtest.New(t)
	m := newMember(t, d.Bun)
	srv := startServe(t, "serve", d.URL.String(), map[string]string{
		"ASTERION_PROVIDER":        "openai",
		"ASTERION_OPENAI_BASE_URL": fp.srv.URL + "/v1",
		"ASTERION_OPENAI_API_KEY":  fakeAPIKey,
		"ASTERION_OPENAI_MODEL":    fakeModel,
		"ASTERION_JOB_TIMEOUT":     "2s",
		"ASTERION_WORKERS":         "8",
	})
	client := newAPI(t, srv.base, m.Token)
	ctx := context.Background()
	jobOf := map[string]string{}
	for _, c := range cases {
		r := client.submit(ctx, "case:"+c.name+" please answer", map[string]any{"max_attempts": c.maxAttempts})
		if r.Err != nil {
			t.Fatalf("submit %s: %v", c.name, r.Err)
		}
		jobOf[c.name] = r.JobID
	}

	history := func(jobID string) ([]step, []time.Time, error) {
		rows, err := d.Bun.QueryContext(ctx, `SELECT payload->>'state', (payload->>'attempt')::int, coalesce(payload->>'error_kind', '-'),
 (payload->>'updated_at')::timestamptz FROM sa_event WHERE topic = 'job' AND job_id = ? ORDER BY id`, jobID)
		if err != nil {
			return nil, nil, fmt.Errorf("read history of job %s: %w", jobID, err)
		}
		defer rows.Close()
		var steps []step
		var at []time.Time
		for rows.Next() {
			var st, kind string
			var attempt int
			var ts time.Time
			if err := rows.Scan(&st, &attempt, &kind, &ts); err != nil {
				return nil, nil, fmt.Errorf("scan history of job %s: %w", jobID, err)
			}
			// A running job keeps the error_kind of its previous attempt until it ends; nothing
			// depends on it, so the history compares running steps without it.
			if st == "running" {
				steps = append(steps, step(fmt.Sprintf("%s/%d", st, attempt)))
			} else {
				steps = append(steps, step(fmt.Sprintf("%s/%d/%s", st, attempt, kind)))
			}
			at = append(at, ts)
		}
		return steps, at, rows.Err()
	}
	done := func(c faultCase) (bool, string) {
		steps, _, err := history(jobOf[c.name])
		if err != nil {
			return false, err.Error()
		}
		if len(steps) < len(c.steps) {
			return false, fmt.Sprintf("%s so far: %v", c.name, steps)
		}
		if !c.terminal {
			return true, ""
		}
		var state string
		if err := d.Bun.QueryRowContext(ctx, "SELECT state FROM sa_job WHERE id = ?", jobOf[c.name]).Scan(&state); err != nil {
			return false, err.Error()
		}
		return strings.Contains(terminalStates, "'"+state+"'"), c.name + " is " + state
	}
	wait := pickDuration(t, "ASTERION_RELIABILITY_FAULTS_WAIT", 90*time.Second, 4*time.Minute)
	dbtest.WaitForDetail(t, wait, "every fault case to play out", func() (bool, string) {
		for _, c := range cases {
			if ok, note := done(c); !ok {
				return false, note
			}
		}
		return true, ""
	})
	fenced := client.submit(ctx, "case:"+fence+" please answer", map[string]any{"max_attempts": 1})
	if fenced.Err != nil {
		t.Fatalf("submit the fence: %v", fenced.Err)
	}
	dbtest.WaitForDetail(t, wait, "the fence prompt to succeed", func() (bool, string) {
		var state string
		if err := d.Bun.QueryRowContext(ctx, "SELECT state FROM sa_job WHERE id = ?", fenced.JobID).Scan(&state); err != nil {
			return false, err.Error()
		}
		return state == "succeeded", "the fence is " + state
	})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			jobID := jobOf[c.name]
			steps, at, err := history(jobID)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(steps) != fmt.Sprint(c.steps) {
				t.Errorf("history %v, want %v", steps, c.steps)
			}
			var (
				state, kind, msg string
				attempt          int
				responses        int
			)
			// The provider's own words are in the operators' detail; error_message is the members' text.
			err = d.Bun.QueryRowContext(ctx, `SELECT state, attempt, coalesce(error_kind, '-'),
 CASE WHEN error_message IS NULL THEN '' ELSE coalesce((SELECT x.detail FROM sa_job_error x WHERE x.job_id = j.id), error_message) END,
 (SELECT count(*) FROM sa_entity e WHERE e.kind = 'response' AND e.parent_id = j.prompt_id)
 FROM sa_job j WHERE id = ?`, jobID).Scan(&state, &attempt, &kind, &msg, &responses)
			if err != nil {
				t.Fatalf("read job: %v", err)
			}
			last := string(c.steps[len(c.steps)-1])
			if got := fmt.Sprintf("%s/%d/%s", state, attempt, kind); got != last {
				t.Errorf("job is %s, want %s", got, last)
			}
			wantResponses := 0
			if strings.HasPrefix(last, "succeeded/") {
				wantResponses = 1
			}
			if responses != wantResponses {
				t.Errorf("%d response entities, want %d", responses, wantResponses)
			}
			if strings.Contains(msg, fakeAPIKey) {
				t.Errorf("error_message holds the API key: %q", msg)
			}
			if c.messageHas != "" && !strings.Contains(msg, c.messageHas) {
				t.Errorf("error_message %q does not contain %q", msg, c.messageHas)
			}
			if kind == "-" && msg != "" && state == "succeeded" {
				t.Errorf("succeeded job keeps error_message %q", msg)
			}

			// Each re-queue recorded its delay: scheduled_at minus the re-queue's own time. The
			// row keeps the last one; the queued event with attempt > 1 gives the re-queue time.
			if len(c.delays) > 0 {
				var requeuedAt time.Time
				for i, s := range steps {
					if strings.HasPrefix(string(s), "queued/") && i > 0 {
						requeuedAt = at[i]
					}
				}
				var scheduled time.Time
				if err := d.Bun.QueryRowContext(ctx, "SELECT scheduled_at FROM sa_job WHERE id = ?", jobID).Scan(&scheduled); err != nil {
					t.Fatalf("read scheduled_at: %v", err)
				}
				delay := scheduled.Sub(requeuedAt)
				w := c.delays[len(c.delays)-1]
				if delay < w.min-time.Millisecond || delay > w.max+time.Millisecond {
					t.Errorf("last retry delay %s, want %s..%s", delay, w.min, w.max)
				}
			}

			// The provider saw exactly one call per attempt, and every retry came after its delay.
			calls := fp.callsOf(c.name)
			wantCalls := 0
			for _, s := range c.steps {
				if strings.HasPrefix(string(s), "running/") {
					wantCalls++
				}
			}
			if len(calls) != wantCalls {
				t.Errorf("the provider saw %d calls, want %d (one per attempt)", len(calls), wantCalls)
			}
			for i := 1; i < len(calls) && i-1 < len(c.delays); i++ {
				gap := calls[i].start.Sub(calls[i-1].end)
				w := c.delays[i-1]
				// The failure is recorded after the provider's answer ends, so the gap is at
				// least the delay less a little clock and scheduling noise: the code decides
				// that no retry starts early. How soon after being due it starts is the
				// machine's business, so the upper side is only logged.
				if gap < w.min-250*time.Millisecond {
					t.Errorf("attempt %d started %s after attempt %d ended, before its delay of at least %s", i+1, gap.Round(time.Millisecond), i, w.min)
				} else {
					t.Logf("attempt %d started %s after attempt %d ended (window %s..%s)", i+1, gap.Round(time.Millisecond), i, w.min, w.max)
				}
			}
		})
	}
	fp.mu.Lock()
	problems := append([]string(nil), fp.problems...)
	fp.mu.Unlock()
	if len(problems) > 0 {
		t.Errorf("the fake provider received %d malformed requests: %v", len(problems), problems)
	}
	checkNoPanic(t, srv.proc)
}
