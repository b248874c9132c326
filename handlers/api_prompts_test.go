package handlers

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs/deferred"
)

// checkAccepted checks a 202 answer carrying a deferred-operation.v1 handle: Location and
// Retry-After agree with the handle, the handle passes the schema, and exactly one of the two
// cancel keys is present.
func checkAccepted(t *testing.T, r liveResp) liveSubmitted {
	t.Helper()
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("status %d, want 202: %s", r.StatusCode, r.Body)
	}
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	body := mustDecode[map[string]json.RawMessage](t, r.Body)
	opRaw, ok := body["operation"]
	if !ok {
		t.Fatalf("no operation in %s", r.Body)
	}
	if err := deferred.ValidateHandle(opRaw); err != nil {
		t.Fatalf("operation does not validate: %v\n%s", err, opRaw)
	}
	op := mustDecode[map[string]any](t, opRaw)
	if got := r.Header.Get("Location"); got == "" || got != op["status_href"] {
		t.Errorf("Location %q, operation.status_href %v", got, op["status_href"])
	}
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	if err != nil || float64(ra) != op["retry_after_seconds"] {
		t.Errorf("Retry-After %q, operation.retry_after_seconds %v", r.Header.Get("Retry-After"), op["retry_after_seconds"])
	}
	_, hasHref := op["cancel_href"]
	reason, hasReason := op["cancel/unavailable-reason"]
	if hasHref == hasReason {
		t.Errorf("operation has cancel_href=%v and cancel/unavailable-reason=%v: want exactly one", hasHref, hasReason)
	}
	if hasReason && reason == "" {
		t.Errorf("empty cancel/unavailable-reason")
	}
	for _, k := range []string{"prompt_id", "job_id", "state"} {
		if _, ok := body[k]; !ok {
			t.Errorf("no %q in %s", k, r.Body)
		}
	}
	return mustDecode[liveSubmitted](t, r.Body)
}

func TestSubmitPromptContract(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "acme", "alice", identity.RoleMember)

	for _, hdr := range [][]string{nil, {"Prefer", "respond-async"}, {"Content-Type", "application/json; charset=utf-8"}} {
		r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok,
			map[string]any{"prompt": "  hello there  ", "priority": 7, "max_attempts": 2,
				"options": map[string]any{"model": "sim-1", "depth": 3}}, hdr...)
		got := checkAccepted(t, r)
		if _, err := uuid.Parse(got.PromptID); err != nil {
			t.Errorf("prompt_id %q: %v", got.PromptID, err)
		}
		if _, err := uuid.Parse(got.JobID); err != nil {
			t.Errorf("job_id %q: %v", got.JobID, err)
		}
		if got.State != "queued" {
			t.Errorf("state %q, want queued", got.State)
		}
		op := mustDecode[map[string]any](t, got.Operation)
		subj, _ := op["subject"].(map[string]any)
		if op["kind"] != "prompt.execute" || op["status"] != "pending" ||
			subj["prompt_id"] != got.PromptID || subj["job_id"] != got.JobID {
			t.Errorf("operation %s does not describe prompt %s job %s", got.Operation, got.PromptID, got.JobID)
		}
		// The job is real, kept its fields, and runs to the end on the simulated provider.
		j := f.waitJob(t, u, got.JobID, "succeeded")
		if j.Priority != 7 || j.MaxAttempts != 2 || j.Attempt != 1 || j.PromptID != got.PromptID || j.ResponseID == nil {
			t.Errorf("job %+v", j)
		}
	}
}

func TestSubmitPromptRejections(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "acme", "alice", identity.RoleMember)
	other := f.user(t, "globex", "gary", identity.RoleMember)

	// A prompt of another org, finished, so no background write changes the counts below.
	foreign := f.submit(t, other, "globex's own")
	f.waitJob(t, other, foreign.JobID, "succeeded")

	const path = "/sa-core/v1/prompt"
	big := `{"prompt":"` + strings.Repeat("a", BodyLimit) + `"}`
	cases := []struct {
		name   string
		tok    string
		body   any
		hdr    []string
		status int
		field  string // for 422: the field that must be named
	}{
		{"malformed JSON", u.Tok, `{"prompt":`, nil, 400, ""},
		{"not JSON at all", u.Tok, `prompt=hi`, nil, 400, ""},
		{"empty body", u.Tok, ``, nil, 400, ""},
		{"not an object", u.Tok, `["hi"]`, nil, 400, ""},
		{"unknown top-level field", u.Tok, `{"prompt":"hi","colour":"red"}`, nil, 400, ""},
		{"unknown options key", u.Tok, `{"prompt":"hi","options":{"model":"m","seed":1}}`, nil, 400, ""},
		{"duplicate key", u.Tok, `{"prompt":"hi","prompt":"ho"}`, nil, 400, ""},
		{"trailing garbage", u.Tok, `{"prompt":"hi"} garbage`, nil, 400, ""},
		{"trailing brace", u.Tok, `{"prompt":"hi"}}`, nil, 400, ""},
		{"trailing object", u.Tok, `{"prompt":"hi"}{"prompt":"ho"}`, nil, 400, ""},
		{"wrong Content-Type", u.Tok, `{"prompt":"hi"}`, []string{"Content-Type", "text/plain"}, 415, ""},
		{"form Content-Type", u.Tok, `{"prompt":"hi"}`, []string{"Content-Type", "application/x-www-form-urlencoded"}, 415, ""},
		{"no Content-Type", u.Tok, `{"prompt":"hi"}`, []string{"Content-Type", ""}, 415, ""},
		{"body over 256 KiB", u.Tok, big, nil, 413, ""},
		{"blank prompt", u.Tok, `{"prompt":"  \n\t "}`, nil, 422, "prompt"},
		{"missing prompt", u.Tok, `{"priority":5}`, nil, 422, "prompt"},
		{"prompt not a string", u.Tok, `{"prompt":5}`, nil, 422, "prompt"},
		{"prompt too long", u.Tok, `{"prompt":"` + strings.Repeat("é", 32769) + `"}`, nil, 422, "prompt"},
		{"priority x", u.Tok, `{"prompt":"hi","priority":"x"}`, nil, 422, "priority"},
		{"priority 101", u.Tok, `{"prompt":"hi","priority":101}`, nil, 422, "priority"},
		{"priority -1", u.Tok, `{"prompt":"hi","priority":-1}`, nil, 422, "priority"},
		{"priority 1.5", u.Tok, `{"prompt":"hi","priority":1.5}`, nil, 422, "priority"},
		{"max_attempts 0", u.Tok, `{"prompt":"hi","max_attempts":0}`, nil, 422, "max_attempts"},
		{"max_attempts 11", u.Tok, `{"prompt":"hi","max_attempts":11}`, nil, 422, "max_attempts"},
		{"parent_id not a uuid", u.Tok, `{"prompt":"hi","parent_id":"nope"}`, nil, 422, "parent_id"},
		{"parent_id a number", u.Tok, `{"prompt":"hi","parent_id":7}`, nil, 422, "parent_id"},
		{"parent of another org", u.Tok, `{"prompt":"hi","parent_id":"` + foreign.PromptID + `"}`, nil, 422, "parent_id"},
		{"parent that does not exist", u.Tok, `{"prompt":"hi","parent_id":"` + uuid.NewString() + `"}`, nil, 422, "parent_id"},
		{"options not an object", u.Tok, `{"prompt":"hi","options":[1]}`, nil, 422, "options"},
		{"options.depth a string", u.Tok, `{"prompt":"hi","options":{"depth":"deep"}}`, nil, 422, "options.depth"},
		{"options.depth 65", u.Tok, `{"prompt":"hi","options":{"depth":65}}`, nil, 422, "options.depth"},
		{"options.model a number", u.Tok, `{"prompt":"hi","options":{"model":1}}`, nil, 422, "options.model"},
		{"options.response_format with a NUL", u.Tok, `{"prompt":"hi","options":{"response_format":{"type":"json_object","x":"\u0000"}}}`, nil, 422, "options.response_format"},
		{"options.response_format with half a surrogate", u.Tok, `{"prompt":"hi","options":{"response_format":{"type":"json_object","x":"\ud800"}}}`, nil, 422, "options.response_format"},
		{"Idempotency-Key with a space", u.Tok, `{"prompt":"hi"}`, []string{"Idempotency-Key", "a b"}, 422, "Idempotency-Key"},
		{"Idempotency-Key too long", u.Tok, `{"prompt":"hi"}`, []string{"Idempotency-Key", strings.Repeat("k", 256)}, 422, "Idempotency-Key"},
		{"no token", "", `{"prompt":"hi"}`, nil, 401, ""},
		{"bad token", "not-a-token", `{"prompt":"hi"}`, nil, 401, ""},
	}
	var foreignParent, missingParent []byte
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := f.rowCounts(t)
			r := f.do(t, "POST", path, tc.tok, tc.body, tc.hdr...)
			p := checkProblem(t, r, tc.status)
			if tc.status == 422 {
				if _, ok := p.Errors[tc.field]; !ok {
					t.Errorf("422 does not name %q: %s", tc.field, r.Body)
				}
			}
			if tc.status == 401 && r.Header.Get("WWW-Authenticate") == "" {
				t.Errorf("401 without WWW-Authenticate")
			}
			if after := f.rowCounts(t); !reflect.DeepEqual(before, after) {
				t.Errorf("a rejected request wrote rows: before %v, after %v", before, after)
			}
			switch tc.name {
			case "parent of another org":
				foreignParent = r.Body
			case "parent that does not exist":
				missingParent = r.Body
			}
		})
	}
	// Another org's prompt as parent answers exactly like an id that does not exist.
	if foreignParent != nil && missingParent != nil && !bytes.Equal(foreignParent, missingParent) {
		t.Errorf("another org's parent answers %s, a missing one %s", foreignParent, missingParent)
	}

	// A present but empty Idempotency-Key is a broken rule too, not "no key".
	before := f.rowCounts(t)
	req := f.request(t, "POST", path, u.Tok, `{"prompt":"hi"}`)
	req.Header["Idempotency-Key"] = []string{""}
	if p := checkProblem(t, f.send(t, req), 422); p.Errors["Idempotency-Key"] == "" {
		t.Errorf("an empty Idempotency-Key: %+v", p)
	}
	if after := f.rowCounts(t); !reflect.DeepEqual(before, after) {
		t.Errorf("a rejected request wrote rows: before %v, after %v", before, after)
	}

	// The boundary cases are accepted.
	for _, body := range []string{
		`{"prompt":"x","priority":0,"max_attempts":1}`,
		`{"prompt":"x","priority":100,"max_attempts":10}`,
		`{"prompt":"` + strings.Repeat("é", 32768) + `"}`,
		`{"prompt":"x","parent_id":null,"options":null}`,
		"{\"prompt\":\"x\"}\n",
	} {
		checkAccepted(t, f.do(t, "POST", path, u.Tok, body))
	}
	// A prompt may continue a visible parent.
	parent := f.submit(t, u, "parent")
	checkAccepted(t, f.do(t, "POST", path, u.Tok, map[string]any{"prompt": "child", "parent_id": parent.PromptID}))
}

func TestSubmitPromptIdempotency(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "acme", "alice", identity.RoleMember)
	v := f.user(t, "acme", "bob", identity.RoleMember)
	const path = "/sa-core/v1/prompt"
	body := map[string]any{"prompt": "once only", "priority": 20}

	first := checkAccepted(t, f.do(t, "POST", path, u.Tok, body, "Idempotency-Key", "key-1"))
	before := f.rowCounts(t)
	again := f.do(t, "POST", path, u.Tok, body, "Idempotency-Key", "key-1")
	second := checkAccepted(t, again)
	if second.PromptID != first.PromptID || second.JobID != first.JobID {
		t.Errorf("same key and body: got prompt %s job %s, first was prompt %s job %s",
			second.PromptID, second.JobID, first.PromptID, first.JobID)
	}
	fo, so := mustDecode[map[string]any](t, first.Operation), mustDecode[map[string]any](t, second.Operation)
	if fo["operation_id"] != so["operation_id"] || fo["status_href"] != so["status_href"] {
		t.Errorf("same key and body: operation %v, first %v", so["operation_id"], fo["operation_id"])
	}
	// The same body spelled differently (key order, whitespace, the default made explicit) is the same request.
	respelled := f.do(t, "POST", path, u.Tok, `{ "priority": 20, "prompt": "once only", "max_attempts": 3 }`, "Idempotency-Key", "key-1")
	if got := checkAccepted(t, respelled); got.JobID != first.JobID {
		t.Errorf("the same request respelled got job %s, want %s", got.JobID, first.JobID)
	}
	if after := f.rowCounts(t); after["sa_job"] != before["sa_job"] || after["river_job"] != before["river_job"] {
		t.Errorf("a replayed key wrote rows: before %v, after %v", before, after)
	}

	// The same key with another body is a conflict and writes nothing.
	before = f.rowCounts(t)
	checkProblem(t, f.do(t, "POST", path, u.Tok, map[string]any{"prompt": "something else"}, "Idempotency-Key", "key-1"), 409)
	if after := f.rowCounts(t); after["sa_job"] != before["sa_job"] || after["sa_entity"] != before["sa_entity"] {
		t.Errorf("a conflicting key wrote rows: before %v, after %v", before, after)
	}

	// Keys are per user: another user's same key is a new submission.
	other := checkAccepted(t, f.do(t, "POST", path, v.Tok, body, "Idempotency-Key", "key-1"))
	if other.JobID == first.JobID || other.PromptID == first.PromptID {
		t.Errorf("another user's key returned the first user's submission")
	}

	// Twins racing with one new key both get the one submission.
	const twins = 6
	var wg sync.WaitGroup
	got := make([]liveResp, twins)
	errs := make([]error, twins)
	for i := range twins {
		req := f.request(t, "POST", path, u.Tok, map[string]any{"prompt": "twins"}, "Idempotency-Key", "race")
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := f.client.Do(req)
			if err != nil {
				errs[i] = err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			got[i], errs[i] = liveResp{Response: resp, Body: b}, err
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	var jobID string
	for _, r := range got {
		s := checkAccepted(t, r)
		if jobID == "" {
			jobID = s.JobID
		} else if s.JobID != jobID {
			t.Errorf("concurrent twins got jobs %s and %s", jobID, s.JobID)
		}
	}
	var n int
	if err := f.DB.Bun.QueryRow("SELECT count(*) FROM sa_entity WHERE kind = 'prompt' AND body = 'twins'").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("concurrent twins wrote %d prompts, want 1", n)
	}
}
