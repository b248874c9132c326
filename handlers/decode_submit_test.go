package handlers

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/google/uuid"

	"asterion/jobs"
)

func TestDecodeSubmit(t *testing.T) {
	t.Parallel()
	three, seven := 3, 7
	parent := uuid.MustParse("8f4e2c9a-1b3d-4e5f-9a7b-6c5d4e3f2a1b")
	ok := []struct {
		body string
		want jobs.SubmitRequest
	}{
		{`{"prompt":"hi"}`, jobs.SubmitRequest{Prompt: "hi"}},
		{" \n{\"prompt\":\"hi\"}\n ", jobs.SubmitRequest{Prompt: "hi"}},
		{`{"prompt":"  spaced  "}`, jobs.SubmitRequest{Prompt: "  spaced  "}}, // trimming is the jobs package's rule
		{`{"prompt":null}`, jobs.SubmitRequest{}},
		{`{"prompt":"p","priority":7,"max_attempts":3}`, jobs.SubmitRequest{Prompt: "p", Priority: &seven, MaxAttempts: &three}},
		{`{"prompt":"p","priority":null,"max_attempts":null,"parent_id":null,"options":null}`, jobs.SubmitRequest{Prompt: "p"}},
		{`{"prompt":"p","parent_id":"8F4E2C9A-1B3D-4E5F-9A7B-6C5D4E3F2A1B"}`, jobs.SubmitRequest{Prompt: "p", ParentID: &parent}},
		{`{"prompt":"p","options":{"model":"m","prefer_provider":"sim","router_model":"r","depth":3}}`,
			jobs.SubmitRequest{Prompt: "p", Options: jobs.ExecutionOptions{Model: "m", PreferProvider: "sim", RouterModel: "r", Depth: &three}}},
		{`{"prompt":"p","options":{}}`, jobs.SubmitRequest{Prompt: "p"}},
		{`{"prompt":"\u00e9\ud83d\ude00"}`, jobs.SubmitRequest{Prompt: "é😀"}},
	}
	for _, tc := range ok {
		got, err := decodeSubmit([]byte(tc.body))
		if err != nil {
			t.Errorf("decodeSubmit(%s): %v", tc.body, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("decodeSubmit(%s) = %+v, want %+v", tc.body, got, tc.want)
		}
	}

	bad := []struct {
		body   string
		status int
		field  string
	}{
		{``, 400, ""},
		{`null`, 400, ""},
		{`"prompt"`, 400, ""},
		{`[]`, 400, ""},
		{`{`, 400, ""},
		{`{"prompt":"a",}`, 400, ""},
		{`{"prompt" "a"}`, 400, ""},
		{`{"prompt":"a" "priority":1}`, 400, ""},
		{`{"prompt":"a"}x`, 400, ""},
		{`{"prompt":"a"}}`, 400, ""},
		{`{"prompt":"a"}]`, 400, ""},
		{`{"prompt":"a"} {}`, 400, ""},
		{`{"prompt":"a"} null`, 400, ""},
		{`{"prompt":"a"}` + "\x00", 400, ""},
		{`{"prompt":"a","prompt":"b"}`, 400, ""},
		{`{"prompt":"a","extra":1}`, 400, ""},
		{`{"Prompt":"a"}`, 400, ""},
		{`{"prompt":"a","options":{"seed":1}}`, 400, ""},
		{`{"prompt":1}`, 422, "prompt"},
		{`{"prompt":["a"]}`, 422, "prompt"},
		{`{"priority":1}`, 422, "prompt"},
		{`{"prompt":"a","priority":"1"}`, 422, "priority"},
		{`{"prompt":"a","priority":1.5}`, 422, "priority"},
		{`{"prompt":"a","priority":1e2}`, 422, "priority"},
		{`{"prompt":"a","priority":7.0}`, 422, "priority"},
		{`{"prompt":"a","priority":true}`, 422, "priority"},
		{`{"prompt":"a","priority":99999999999}`, 422, "priority"},
		{`{"prompt":"a","max_attempts":{}}`, 422, "max_attempts"},
		{`{"prompt":"a","parent_id":"x"}`, 422, "parent_id"},
		{`{"prompt":"a","parent_id":"8f4e2c9a1b3d4e5f9a7b6c5d4e3f2a1b"}`, 422, "parent_id"},
		{`{"prompt":"a","parent_id":"{8f4e2c9a-1b3d-4e5f-9a7b-6c5d4e3f2a1b}"}`, 422, "parent_id"},
		{`{"prompt":"a","parent_id":1}`, 422, "parent_id"},
		{`{"prompt":"a","options":"x"}`, 422, "options"},
		{`{"prompt":"a","options":[]}`, 422, "options"},
		{`{"prompt":"a","options":{"depth":"2"}}`, 422, "options.depth"},
		{`{"prompt":"a","options":{"model":2}}`, 422, "options.model"},
	}
	for _, tc := range bad {
		_, err := decodeSubmit([]byte(tc.body))
		if err == nil {
			t.Errorf("decodeSubmit(%q) accepted it", tc.body)
			continue
		}
		if err.status != tc.status {
			t.Errorf("decodeSubmit(%q): status %d, want %d (%s)", tc.body, err.status, tc.status, err.detail)
		}
		if tc.field != "" {
			if _, ok := err.fields[tc.field]; !ok {
				t.Errorf("decodeSubmit(%q): fields %v, want %q named", tc.body, err.fields, tc.field)
			}
		}
		if strings.TrimSpace(err.detail) == "" {
			t.Errorf("decodeSubmit(%q): empty detail", tc.body)
		}
	}
}

// reencodeSubmit writes the fields decodeSubmit read back as a request body.
func reencodeSubmit(r jobs.SubmitRequest) ([]byte, error) {
	m := map[string]any{"prompt": r.Prompt}
	if r.Messages != nil {
		m = map[string]any{"messages": r.Messages}
		if r.Prompt != "" {
			m["prompt"] = r.Prompt
		}
	}
	if r.ParentID != nil {
		m["parent_id"] = r.ParentID.String()
	}
	if r.Priority != nil {
		m["priority"] = *r.Priority
	}
	if r.MaxAttempts != nil {
		m["max_attempts"] = *r.MaxAttempts
	}
	o := map[string]any{}
	if r.Options.Model != "" {
		o["model"] = r.Options.Model
	}
	if r.Options.PreferProvider != "" {
		o["prefer_provider"] = r.Options.PreferProvider
	}
	if r.Options.RouterModel != "" {
		o["router_model"] = r.Options.RouterModel
	}
	if r.Options.Depth != nil {
		o["depth"] = *r.Options.Depth
	}
	if r.Options.MaxTokens != nil {
		o["max_tokens"] = *r.Options.MaxTokens
	}
	if r.Options.Temperature != nil {
		o["temperature"] = *r.Options.Temperature
	}
	if r.Options.ResponseFormat != nil {
		o["response_format"] = r.Options.ResponseFormat
	}
	if len(o) > 0 {
		m["options"] = o
	}
	return json.Marshal(m)
}

var submitErrorFields = map[string]bool{"prompt": true, "parent_id": true, "priority": true, "max_attempts": true,
	"options": true, "options.model": true, "options.prefer_provider": true, "options.router_model": true, "options.depth": true,
	"options.max_tokens": true, "options.temperature": true, "options.response_format": true, "messages": true}

func FuzzDecodeSubmit(f *testing.F) {
	for _, s := range []string{
		`{"prompt":"hi"}`,
		`{"prompt":"p","priority":7,"max_attempts":3,"parent_id":"8f4e2c9a-1b3d-4e5f-9a7b-6c5d4e3f2a1b"}`,
		`{"prompt":"p","options":{"model":"m","depth":2}}`,
		`{"prompt":"a"} x`,
		`{"prompt":1,"priority":"x"}`,
		`{"messages":[{"role":"user","content":"hi"}],"options":{"max_tokens":5,"temperature":0.5,"response_format":{"type": "json_object"}}}`,
		`{"messages":[{"role":"user"},{"content":3}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, derr := decodeSubmit(body)
		if derr != nil {
			switch derr.status {
			case 400:
				if derr.detail == "" {
					t.Fatalf("400 without detail for %q", body)
				}
			case 422:
				if len(derr.fields) == 0 {
					t.Fatalf("422 naming no field for %q", body)
				}
				for k, msg := range derr.fields {
					if !submitErrorFields[k] && !strings.HasPrefix(k, "messages[") || msg == "" {
						t.Fatalf("422 names %q: %q for %q", k, msg, body)
					}
				}
			default:
				t.Fatalf("status %d for %q", derr.status, body)
			}
			return
		}
		// Accepted: the body was one valid JSON object.
		if !json.Valid(body) {
			t.Fatalf("accepted invalid JSON %q", body)
		}
		again, err := reencodeSubmit(req)
		if err != nil {
			t.Fatalf("re-encode %+v: %v", req, err)
		}
		req2, derr := decodeSubmit(again)
		if derr != nil {
			t.Fatalf("the re-encoded %s of %q is refused: %d %s %v", again, body, derr.status, derr.detail, derr.fields)
		}
		if !reflect.DeepEqual(req, req2) {
			t.Fatalf("round trip of %q changed the request:\n%+v\n%+v", body, req, req2)
		}
	})
}
