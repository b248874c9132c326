package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/chain"
	"asterion/jobs/deferred"
	"asterion/jobs/delivery"
	"asterion/jobs/jobstest"
	"asterion/secretbox"
)

// logBuffer collects every log line of a server, for the tests that search them.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ownerTestKey is the server secret key of startOwnerServer.
var ownerTestKey = func() secretbox.Key {
	k, _, err := secretbox.NewKey()
	if err != nil {
		panic(err)
	}
	return k
}()

// sealedTestSecret is a fresh webhook secret of org, sealed as the server stores it.
func sealedTestSecret(t *testing.T, org int64) string {
	t.Helper()
	secret, err := delivery.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	sealed, err := delivery.SealSecret(ownerTestKey, org, secret)
	if err != nil {
		t.Fatal(err)
	}
	return sealed
}

// ownerServerOpts configure startOwnerServer.
type ownerServerOpts struct {
	policy   deferred.Policy
	delivery delivery.Config
	logs     *logBuffer
}

// startOwnerServer is startLiveServerWith with a host policy, delivery settings and a
// debug-level logger writing into logs (when set): the whole application on a real listener,
// with the delivery owner registered and workers polling every 500 ms.
func startOwnerServer(t *testing.T, o ownerServerOpts) *liveServer {
	t.Helper()
	cfg := liveServerConfig{
		Jobs: func(c *jobs.Config) { c.Policy = o.policy },
		Service: func(svc *jobs.Service) {
			dcfg := o.delivery
			dcfg.Jobs = svc
			// The test receivers listen on 127.0.0.1, and their secrets are sealed with ownerTestKey.
			dcfg.SecretKey, dcfg.AllowPrivate = secretbox.Static(ownerTestKey), true
			if _, err := delivery.New(dcfg); err != nil {
				t.Fatalf("delivery owner: %v", err)
			}
		},
		Runtime: func(c *jobs.RuntimeConfig) { c.PollEvery = 500 * time.Millisecond },
	}
	if o.logs != nil {
		cfg.Logger = slog.New(slog.NewTextHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return startLiveServerWith(t, cfg)
}

// chainAccepted is the 202 answer to POST /chains.
type chainAccepted struct {
	ChainID   string          `json:"chain_id"`
	State     string          `json:"state"`
	ChainHref string          `json:"chain_href"`
	Operation json.RawMessage `json:"operation"`
	handle    map[string]any
}

// postChain posts a chain as u and requires 202 with a valid handle, Location and Retry-After.
func (f *liveServer) postChain(t *testing.T, u liveUser, body any, hdr ...string) chainAccepted {
	t.Helper()
	r := f.do(t, "POST", "/sa-core/v1/chains", u.Tok, body, hdr...)
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /chains: %s", r)
	}
	a := mustDecode[chainAccepted](t, r.Body)
	if err := deferred.ValidateHandle(a.Operation); err != nil {
		t.Fatalf("chain handle does not validate: %v\n%s", err, a.Operation)
	}
	a.handle = mustDecode[map[string]any](t, a.Operation)
	if got := r.Header.Get("Location"); got == "" || got != a.handle["status_href"] {
		t.Errorf("Location %q, status_href %v", got, a.handle["status_href"])
	}
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || float64(ra) != a.handle["retry_after_seconds"] {
		t.Errorf("Retry-After %q, retry_after_seconds %v", r.Header.Get("Retry-After"), a.handle["retry_after_seconds"])
	}
	if a.State != "running" || a.ChainHref != "/sa-core/v1/chains/"+a.ChainID || a.handle["kind"] != chain.Kind {
		t.Errorf("accepted chain %+v", a)
	}
	return a
}

// chainDoc is GET /chains/{id} as the tests read it.
type chainDoc struct {
	ChainID     string          `json:"chain_id"`
	State       string          `json:"state"`
	StepCount   int             `json:"step_count"`
	OperationID string          `json:"operation_id"`
	Operation   json.RawMessage `json:"operation"`
	Result      json.RawMessage `json:"result"`
	Diagnostic  json.RawMessage `json:"diagnostic"`
	Steps       []struct {
		Step            int     `json:"step"`
		State           string  `json:"state"`
		PromptID        *string `json:"prompt_id"`
		OperationID     *string `json:"operation_id"`
		OperationStatus *string `json:"operation_status"`
		ResponseID      *string `json:"response_id"`
	} `json:"steps"`
	status map[string]any
}

// getChain reads a chain as u, requires 200 and validates its embedded status document.
func (f *liveServer) getChain(t *testing.T, u liveUser, id string) chainDoc {
	t.Helper()
	r := f.do(t, "GET", "/sa-core/v1/chains/"+id, u.Tok, nil)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("GET chain %s: %s", id, r)
	}
	return decodeChainDoc(t, r)
}

func decodeChainDoc(t *testing.T, r liveResp) chainDoc {
	t.Helper()
	c := mustDecode[chainDoc](t, r.Body)
	if err := deferred.ValidateStatus(c.Operation); err != nil {
		t.Fatalf("chain status does not validate: %v\n%s", err, c.Operation)
	}
	c.status = mustDecode[map[string]any](t, c.Operation)
	if terminal := c.status["terminal"] == true; terminal == (r.Header.Get("Retry-After") != "") {
		t.Errorf("terminal %v with Retry-After %q", terminal, r.Header.Get("Retry-After"))
	}
	return c
}

func (f *liveServer) waitChain(t *testing.T, u liveUser, id string, states ...string) chainDoc {
	t.Helper()
	var c chainDoc
	jobstest.WaitFor(t, 20*time.Second, fmt.Sprintf("chain %s to be one of %v", id, states), func() bool {
		c = f.getChain(t, u, id)
		return slices.Contains(states, c.State)
	})
	return c
}

// status reads GET <status_href> as u and validates it.
func (f *liveServer) status(t *testing.T, u liveUser, opID string) map[string]any {
	t.Helper()
	r := f.do(t, "GET", "/sa-core/v1/deferred-operations/"+opID+"/status", u.Tok, nil)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("status of %s: %s", opID, r)
	}
	if err := deferred.ValidateStatus(r.Body); err != nil {
		t.Fatalf("status does not validate: %v\n%s", err, r.Body)
	}
	return mustDecode[map[string]any](t, r.Body)
}

func chainSteps(texts ...string) []map[string]any {
	out := make([]map[string]any, len(texts))
	for i, s := range texts {
		out[i] = map[string]any{"prompt": s, "include_previous": i > 0}
	}
	return out
}

func TestChainAPIResumesInOrderAndFailsOnAFailingStep(t *testing.T) {
	t.Parallel()
	f := startOwnerServer(t, ownerServerOpts{})
	u := f.user(t, "acme", "alice", identity.RoleMember)

	a := f.postChain(t, u, map[string]any{"steps": chainSteps("alpha", "beta", "gamma"), "deferred_response_mode": "suspend"})
	c := f.waitChain(t, u, a.ChainID, "completed", "failed")
	if c.State != "completed" || c.status["status"] != "completed" || len(c.Steps) != 3 {
		t.Fatalf("chain %s: %s", c.State, c.Diagnostic)
	}
	var res struct {
		ChainID   string   `json:"chain_id"`
		Responses []string `json:"responses"`
	}
	if err := json.Unmarshal(c.Result, &res); err != nil || res.ChainID != a.ChainID || len(res.Responses) != 3 {
		t.Fatalf("result %s: %v", c.Result, err)
	}
	for i, st := range c.Steps {
		if st.Step != i+1 || st.State != "completed" || st.ResponseID == nil || *st.ResponseID != res.Responses[i] {
			t.Errorf("step %d: %+v", i+1, st)
		}
	}
	if st := f.status(t, u, c.OperationID); st["status"] != "completed" {
		t.Errorf("chain status %v", st)
	}
	// The last response echoes the last prompt, which carries the previous ones in order.
	var last string
	if err := f.DB.Bun.QueryRowContext(context.Background(), "SELECT body FROM sa_entity WHERE id = ?", res.Responses[2]).Scan(&last); err != nil {
		t.Fatal(err)
	}
	if want := "Simulated answer to: gamma Previous response: Simulated answer to: beta Previous response: Simulated answer to: alpha"; last != want {
		t.Errorf("last response %q, want %q", last, want)
	}

	b := f.postChain(t, u, map[string]any{"steps": chainSteps("one", "two #sim:fail=provider_4xx", "three")})
	c = f.waitChain(t, u, b.ChainID, "completed", "failed")
	var diag map[string]any
	_ = json.Unmarshal(c.Diagnostic, &diag)
	errObj, _ := c.status["error"].(map[string]any)
	if c.State != "failed" || diag["step"] != float64(2) || diag["status"] != "failed" || errObj["kind"] != "step_failed" ||
		!strings.Contains(fmt.Sprint(errObj["message"]), "step 2 of 3 ended failed") {
		t.Fatalf("failed chain %s, diagnostic %s, status %v", c.State, c.Diagnostic, c.status)
	}
	if c.Steps[2].State != "skipped" || c.Steps[2].PromptID != nil {
		t.Errorf("step 3 after a failed step 2: %+v", c.Steps[2])
	}
}

func TestChainAPIRejectAsFailureValidationAndVisibility(t *testing.T) {
	t.Parallel()
	f := startOwnerServer(t, ownerServerOpts{})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	peer := f.user(t, "acme", "bob", identity.RoleMember)
	op := f.user(t, "acme", "olga", identity.RoleOperator)
	stranger := f.user(t, "other", "eve", identity.RoleMember)

	// reject-as-failure: 201 with the failed chain, nothing submitted.
	r := f.do(t, "POST", "/sa-core/v1/chains", u.Tok, map[string]any{"steps": chainSteps("x", "y"),
		"deferred_response_mode": "reject-as-failure"})
	if r.StatusCode != http.StatusCreated {
		t.Fatalf("reject-as-failure: %s", r)
	}
	c := decodeChainDoc(t, r)
	errObj, _ := c.status["error"].(map[string]any)
	if c.State != "failed" || c.status["status"] != "failed" || errObj["kind"] != "deferred_rejected" ||
		r.Header.Get("Location") != "/sa-core/v1/chains/"+c.ChainID {
		t.Fatalf("rejected chain %s / %v / Location %q", c.State, c.status, r.Header.Get("Location"))
	}
	var prompts int
	_ = f.DB.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM sa_entity").Scan(&prompts)
	if prompts != 0 {
		t.Errorf("%d prompts written for a rejected chain", prompts)
	}

	// Visibility: the creator and the org's operator see it; another member and another org
	// get 404, like an id that does not exist.
	f.getChain(t, u, c.ChainID)
	f.getChain(t, op, c.ChainID)
	for _, who := range []liveUser{peer, stranger} {
		checkProblem(t, f.do(t, "GET", "/sa-core/v1/chains/"+c.ChainID, who.Tok, nil), http.StatusNotFound)
	}
	checkProblem(t, f.do(t, "GET", "/sa-core/v1/chains/"+uuid.NewString(), u.Tok, nil), http.StatusNotFound)
	checkProblem(t, f.do(t, "GET", "/sa-core/v1/chains/not-a-uuid", u.Tok, nil), http.StatusNotFound)
	checkProblem(t, f.do(t, "GET", "/sa-core/v1/chains/"+c.ChainID, "", nil), http.StatusUnauthorized)
	checkProblem(t, f.do(t, "POST", "/sa-core/v1/chains", "", map[string]any{"steps": chainSteps("x")}), http.StatusUnauthorized)

	// Strict decoding: 415, 400 and 422 as for POST /prompt.
	checkProblem(t, f.do(t, "POST", "/sa-core/v1/chains", u.Tok, `{"steps":[{"prompt":"x"}]}`, "Content-Type", "text/plain"),
		http.StatusUnsupportedMediaType)
	for name, body := range map[string]string{
		"malformed":          `{"steps": [`,
		"not an object":      `[1]`,
		"unknown field":      `{"steps":[{"prompt":"x"}],"loop":true}`,
		"unknown step field": `{"steps":[{"prompt":"x","model":"m"}]}`,
		"duplicate key":      `{"steps":[{"prompt":"x"}],"steps":[]}`,
		"trailing data":      `{"steps":[{"prompt":"x"}]} {}`,
	} {
		if p := checkProblem(t, f.do(t, "POST", "/sa-core/v1/chains", u.Tok, body), http.StatusBadRequest); p.Detail == "" {
			t.Errorf("%s: no detail", name)
		}
	}
	many := make([]map[string]any, 21)
	for i := range many {
		many[i] = map[string]any{"prompt": "p"}
	}
	for name, tc := range map[string]struct {
		body  any
		field string
	}{
		"no steps":             {map[string]any{}, "steps"},
		"empty steps":          {map[string]any{"steps": []any{}}, "steps"},
		"21 steps":             {map[string]any{"steps": many}, "steps"},
		"steps not an array":   {map[string]any{"steps": "p"}, "steps"},
		"step not an object":   {map[string]any{"steps": []any{"p"}}, "steps[0]"},
		"blank prompt":         {map[string]any{"steps": []any{map[string]any{"prompt": "  "}}}, "steps[0].prompt"},
		"prompt not a string":  {map[string]any{"steps": []any{map[string]any{"prompt": 5}}}, "steps[0].prompt"},
		"missing prompt":       {map[string]any{"steps": []any{map[string]any{"include_previous": false}}}, "steps[0].prompt"},
		"first includes prev":  {map[string]any{"steps": []any{map[string]any{"prompt": "a", "include_previous": true}}}, "steps[0].include_previous"},
		"include_previous str": {map[string]any{"steps": []any{map[string]any{"prompt": "a"}, map[string]any{"prompt": "b", "include_previous": "yes"}}}, "steps[1].include_previous"},
		"too long":             {map[string]any{"steps": []any{map[string]any{"prompt": strings.Repeat("x", jobs.MaxPromptChars+1)}}}, "steps[0].prompt"},
		"bad mode":             {map[string]any{"steps": chainSteps("a"), "deferred_response_mode": "later"}, "deferred_response_mode"},
		"priority 101":         {map[string]any{"steps": chainSteps("a"), "priority": 101}, "priority"},
		"priority a string":    {map[string]any{"steps": chainSteps("a"), "priority": "1"}, "priority"},
		"ttl 0":                {map[string]any{"steps": chainSteps("a"), "ttl_seconds": 0}, "ttl_seconds"},
	} {
		p := checkProblem(t, f.do(t, "POST", "/sa-core/v1/chains", u.Tok, tc.body), http.StatusUnprocessableEntity)
		if _, ok := p.Errors[tc.field]; !ok {
			t.Errorf("%s: errors %v, want %q named", name, p.Errors, tc.field)
		}
	}
}

func TestRegistryClampsAndDeterministicIDsThroughAPI(t *testing.T) {
	t.Parallel()
	f := startOwnerServer(t, ownerServerOpts{policy: deferred.Policy{MaxTTL: 5 * time.Minute}})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	ttlOf := func(h map[string]any) time.Duration {
		a, _ := time.Parse(time.RFC3339Nano, h["accepted_at"].(string))
		e, _ := time.Parse(time.RFC3339Nano, h["expires_at"].(string))
		return e.Sub(a)
	}
	for _, tc := range []struct {
		ttl  any
		want time.Duration
	}{{nil, 5 * time.Minute}, {7200, 5 * time.Minute}, {60, time.Minute}} {
		body := map[string]any{"steps": chainSteps("#sim:hang clamp")}
		if tc.ttl != nil {
			body["ttl_seconds"] = tc.ttl
		}
		a := f.postChain(t, u, body)
		if got := ttlOf(a.handle); got != tc.want {
			t.Errorf("ttl_seconds %v: TTL %s, want %s", tc.ttl, got, tc.want)
		}
		// The hint follows the server's estimate of when the work ends when it has one, else
		// it is the kind's default.
		wantRetry := float64(jobs.DefaultRetryAfterSeconds)
		if eta, ok := a.handle["eta_seconds"].(float64); ok {
			wantRetry = min(max(eta, 1), 60)
		}
		if a.handle["retry_after_seconds"] != wantRetry {
			t.Errorf("retry_after_seconds %v, eta_seconds %v", a.handle["retry_after_seconds"], a.handle["eta_seconds"])
		}
		want := deferred.OperationID(chain.Kind, chain.OwnerName, map[string]string{"chain_id": a.ChainID}, "")
		if a.handle["operation_id"] != want.String() {
			t.Errorf("chain operation id %v, want the deterministic %s", a.handle["operation_id"], want)
		}
	}
	// A prompt asks for nothing and gets the host maximum; its id is deterministic too.
	sub := checkAccepted(t, f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "#sim:hang p"}))
	h := mustDecode[map[string]any](t, sub.Operation)
	if got := ttlOf(h); got != 5*time.Minute {
		t.Errorf("prompt TTL %s, want the configured 5 min", got)
	}
	if want := deferred.OperationID(jobs.KindPromptExecute, jobs.OwnerPromptRuntime,
		map[string]string{"prompt_id": sub.PromptID, "job_id": sub.JobID}, ""); h["operation_id"] != want.String() {
		t.Errorf("prompt operation id %v, want %s", h["operation_id"], want)
	}
	// Idempotency-Key: the id derives from the key; the same body replays, another is 409.
	body := map[string]any{"steps": chainSteps("#sim:hang keyed", "second")}
	a := f.postChain(t, u, body, "Idempotency-Key", "chain-key-1")
	want := deferred.OperationID(chain.Kind, chain.OwnerName, nil, fmt.Sprintf("%d:%s", u.ID, "chain-key-1"))
	if a.handle["operation_id"] != want.String() {
		t.Errorf("keyed chain operation id %v, want %s", a.handle["operation_id"], want)
	}
	again := f.postChain(t, u, body, "Idempotency-Key", "chain-key-1")
	// The replay is the same operation read again: every field is the same but the live
	// estimate (eta_seconds and the retry hint that follows it), which moves as the queue does.
	if again.ChainID != a.ChainID || !reflect.DeepEqual(withoutEstimate(again.handle), withoutEstimate(a.handle)) {
		t.Errorf("replay gave chain %s %s, want %s %s", again.ChainID, again.Operation, a.ChainID, a.Operation)
	}
	checkProblem(t, f.do(t, "POST", "/sa-core/v1/chains", u.Tok, map[string]any{"steps": chainSteps("other")},
		"Idempotency-Key", "chain-key-1"), http.StatusConflict)
	var chains int
	_ = f.DB.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM sa_chain").Scan(&chains)
	if chains != 4 {
		t.Errorf("%d chains, want 4 (the replay and the conflict write nothing)", chains)
	}
}

// TestMarkerNeverInRegistryOrChainAnswersOrLogs plants markers in a chain's continuation (a
// step not yet submitted) and in prompt payloads, then reads every registry and chain answer
// and the server's whole debug log: no marker appears anywhere.
func TestMarkerNeverInRegistryOrChainAnswersOrLogs(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	f := startOwnerServer(t, ownerServerOpts{logs: logs})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	op := f.user(t, "acme", "olga", identity.RoleOperator)
	ctx := context.Background()
	// A webhook, so delivery operations are part of what is read.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hook.Close)
	if _, err := f.DB.Bun.ExecContext(ctx, "UPDATE orgs SET webhook_url = ?, webhook_secret = ? WHERE id = ?", hook.URL,
		sealedTestSecret(t, u.OrgID), u.OrgID); err != nil {
		t.Fatal(err)
	}

	contMarker := "CONTMARK-" + strings.ReplaceAll(uuid.NewString(), "-", "")
	payloadMarker := "PAYLOADMARK-" + strings.ReplaceAll(uuid.NewString(), "-", "")
	doneMarker := "DONEMARK-" + strings.ReplaceAll(uuid.NewString(), "-", "")
	markers := []string{contMarker, payloadMarker, doneMarker}
	var answers []string
	record := func(r liveResp) liveResp {
		answers = append(answers, fmt.Sprintf("%s %s", r.Request.URL.Path, r.Body))
		return r
	}

	// Chain A hangs on step 1; step 2's text lives only in the continuation.
	ra := record(f.do(t, "POST", "/sa-core/v1/chains", u.Tok, map[string]any{"steps": []any{
		map[string]any{"prompt": "#sim:hang " + payloadMarker},
		map[string]any{"prompt": "next " + contMarker, "include_previous": true}}}))
	a := mustDecode[chainAccepted](t, ra.Body)
	// Chain B runs to completion: its second step's text becomes a prompt payload.
	rb := record(f.do(t, "POST", "/sa-core/v1/chains", u.Tok, map[string]any{"steps": chainSteps("first "+payloadMarker, "second "+doneMarker)}))
	b := mustDecode[chainAccepted](t, rb.Body)
	sub := mustDecode[liveSubmitted](t, record(f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "plain " + payloadMarker})).Body)
	f.waitChain(t, u, b.ChainID, "completed")
	f.waitJob(t, u, sub.JobID, "succeeded")
	var inCont int
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_operation_continuation WHERE position(convert_to(?, 'UTF8') in data) > 0",
		contMarker).Scan(&inCont); err != nil || inCont != 1 {
		t.Fatalf("the continuation marker is in %d continuations (%v): the test would prove nothing", inCont, err)
	}
	// Let the deliveries of the succeeded prompts happen, so they are read too.
	jobstest.WaitFor(t, 20*time.Second, "the three deliveries to be delivered", func() bool {
		var open, all int
		_ = f.DB.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_delivery WHERE state <> 'delivered'").Scan(&open)
		_ = f.DB.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_delivery").Scan(&all)
		return open == 0 && all == 3
	})

	readAll := func() {
		for _, who := range []liveUser{u, op} {
			for _, q := range []string{"", "?kind=flow.chain", "?kind=artifact.delivery", "?kind=prompt.execute", "?status=running"} {
				if r := record(f.do(t, "GET", "/sa-core/v1/deferred-operations"+q, who.Tok, nil)); r.StatusCode != http.StatusOK {
					t.Fatalf("list %s: %s", q, r)
				}
			}
			r := record(f.do(t, "GET", "/sa-core/v1/deferred-operations?limit=500", who.Tok, nil))
			list := mustDecode[struct {
				Items []struct {
					OperationID string `json:"operation_id"`
				} `json:"items"`
			}](t, r.Body)
			if len(list.Items) != 9 { // 2 chains, their 3 steps, 1 prompt, 3 deliveries
				t.Fatalf("%s sees %d operations, want every one (chains, their steps, prompts, deliveries)", who.Name, len(list.Items))
			}
			for _, it := range list.Items {
				base := "/sa-core/v1/deferred-operations/" + it.OperationID
				for _, r := range []liveResp{
					record(f.do(t, "GET", base, who.Tok, nil)),
					record(f.do(t, "GET", base+"/status", who.Tok, nil)),
					record(f.do(t, "POST", base+"/poll", who.Tok, nil)),
				} {
					if r.StatusCode != http.StatusOK {
						t.Fatalf("%s %s: %s", r.Request.Method, r.Request.URL.Path, r)
					}
					if strings.HasSuffix(r.Request.URL.Path, "/status") || strings.HasSuffix(r.Request.URL.Path, "/poll") {
						if err := deferred.ValidateStatus(r.Body); err != nil {
							t.Fatalf("%s does not validate: %v\n%s", r.Request.URL.Path, err, r.Body)
						}
					}
				}
			}
			for _, id := range []string{a.ChainID, b.ChainID} {
				r := record(f.do(t, "GET", "/sa-core/v1/chains/"+id, who.Tok, nil))
				decodeChainDoc(t, r)
			}
		}
	}
	readAll()
	// Cancel chain A while it is suspended, and read everything again.
	rc := record(f.do(t, "POST", "/sa-core/v1/deferred-operations/"+mustDecode[map[string]any](t, a.Operation)["operation_id"].(string)+"/cancel", u.Tok, nil))
	if rc.StatusCode != http.StatusOK {
		t.Fatalf("cancel chain A: %s", rc)
	}
	if err := deferred.ValidateStatus(rc.Body); err != nil {
		t.Fatalf("cancel answer does not validate: %v", err)
	}
	f.waitChain(t, u, a.ChainID, "cancelled")
	readAll()

	for _, ans := range answers {
		for _, m := range markers {
			if strings.Contains(ans, m) {
				t.Errorf("an answer carries the marker %s: %.300s", m, ans)
			}
		}
	}
	all := logs.String()
	if len(all) == 0 {
		t.Fatal("the server logged nothing: the log check would prove nothing")
	}
	for _, m := range markers {
		if strings.Contains(all, m) {
			i := strings.Index(all, m)
			t.Errorf("the log carries the marker %s: …%s…", m, all[max(0, i-200):min(len(all), i+100)])
		}
	}
	t.Logf("searched %d answers and %d bytes of log", len(answers), len(all))
}

// TestDeliveryCancelRefusedThroughAPI: while the request is in flight the status carries
// cancel/unavailable-reason and POST …/cancel answers 409 with it.
func TestDeliveryCancelRefusedThroughAPI(t *testing.T) {
	t.Parallel()
	f := startOwnerServer(t, ownerServerOpts{delivery: delivery.Config{Timeout: 5 * time.Second}})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	arrived, release := make(chan struct{}, 1), make(chan struct{})
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		arrived <- struct{}{}
		<-release
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hook.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	if _, err := f.DB.Bun.ExecContext(context.Background(), "UPDATE orgs SET webhook_url = ?, webhook_secret = ? WHERE id = ?",
		hook.URL, sealedTestSecret(t, u.OrgID), u.OrgID); err != nil {
		t.Fatal(err)
	}
	f.submit(t, u, "deliver slowly")
	select {
	case <-arrived:
	case <-time.After(15 * time.Second):
		t.Fatal("no delivery arrived")
	}
	r := f.do(t, "GET", "/sa-core/v1/deferred-operations?kind=artifact.delivery", u.Tok, nil)
	list := mustDecode[struct {
		Items []struct {
			OperationID string `json:"operation_id"`
		} `json:"items"`
	}](t, r.Body)
	if len(list.Items) != 1 {
		t.Fatalf("delivery operations: %s", r)
	}
	id := list.Items[0].OperationID
	st := f.status(t, u, id)
	if st["status"] != "running" || st["cancel/unavailable-reason"] != delivery.InFlightReason || st["cancel_href"] != nil {
		t.Fatalf("status in flight %v", st)
	}
	rc := f.do(t, "POST", "/sa-core/v1/deferred-operations/"+id+"/cancel", u.Tok, nil)
	p := checkProblem(t, rc, http.StatusConflict)
	if reason := mustDecode[map[string]any](t, rc.Body)["cancel/unavailable-reason"]; reason != delivery.InFlightReason {
		t.Errorf("409 reason %v (%+v)", reason, p)
	}
	close(release)
	jobstest.WaitFor(t, 20*time.Second, "the delivery to complete after the receiver answered", func() bool {
		return f.status(t, u, id)["status"] == "completed"
	})
}

// withoutEstimate is a copy of an operation handle without its live estimate.
func withoutEstimate(h map[string]any) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		if k != "eta_seconds" && k != "retry_after_seconds" {
			out[k] = v
		}
	}
	return out
}
