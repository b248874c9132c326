package openai

import (
	"testing"

	"asterion/jobs"
)

// TestDecodeChat: OpenAI's request shapes are read into a conversation (developer as system,
// text parts joined, a null assistant content empty), max_completion_tokens wins over
// max_tokens, and fields Asterion does not use are accepted.
func TestDecodeChat(t *testing.T) {
	r, err := DecodeChat([]byte(`{"model":"m","messages":[
		{"role":"developer","content":"be brief"},
		{"role":"user","content":[{"type":"text","text":"part one"},{"type":"text","text":"part two"}],"name":"ann"},
		{"role":"assistant","content":null},
		{"role":"user","content":"last"}],
		"max_tokens":9,"max_completion_tokens":5,"temperature":0,"response_format":{"type":"json_object"},
		"stream":true,"stream_options":{"include_usage":true},"metadata":{"k":"v"},
		"n":1,"top_p":0.5,"stop":["x"],"user":"u","seed":3,"tools":[],"logprobs":false,"store":false}`))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	want := []jobs.Message{{Role: "system", Content: "be brief"}, {Role: "user", Content: "part one\npart two"},
		{Role: "assistant", Content: ""}, {Role: "user", Content: "last"}}
	if len(r.Messages) != len(want) {
		t.Fatalf("messages %+v", r.Messages)
	}
	for i := range want {
		if r.Messages[i] != want[i] {
			t.Errorf("message %d = %+v, want %+v", i, r.Messages[i], want[i])
		}
	}
	if r.Model != "m" || r.MaxTokens == nil || *r.MaxTokens != 5 || r.Temperature == nil || *r.Temperature != 0 ||
		string(r.ResponseFormat) != `{"type":"json_object"}` || !r.Stream || !r.IncludeUsage || r.Metadata["k"] != "v" {
		t.Errorf("decoded %+v", r)
	}
	sub := r.Submit(jobs.Viewer{OrgID: 1, UserID: 2})
	if sub.Door != "front_door" || sub.Options.Model != "m" || *sub.Options.MaxTokens != 5 || len(sub.Messages) != 4 || sub.Prompt != "" {
		t.Errorf("submit %+v", sub)
	}
}

// TestDecodeChatErrors: each malformed request is a 400 invalid_request_error naming the
// parameter.
func TestDecodeChatErrors(t *testing.T) {
	for _, tc := range []struct{ body, param string }{
		{`not json`, ""},
		{`[]`, ""},
		{`{}`, "messages"},
		{`{"messages":[]}`, "messages"},
		{`{"messages":"hi"}`, "messages"},
		{`{"messages":[{"content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"tool","content":"x"}]}`, "messages[0].role"},
		{`{"messages":[{"role":"user","content":5}]}`, "messages[0].content"},
		{`{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "messages[0].content[0].type"},
		{`{"messages":[{"role":"user","content":"x"}],"model":5}`, "model"},
		{`{"messages":[{"role":"user","content":"x"}],"max_tokens":"5"}`, "max_tokens"},
		{`{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}`, "temperature"},
		{`{"messages":[{"role":"user","content":"x"}],"response_format":"json"}`, "response_format"},
		{`{"messages":[{"role":"user","content":"x"}],"stream":"yes"}`, "stream"},
	} {
		_, err := DecodeChat([]byte(tc.body))
		if err == nil {
			t.Errorf("%s: accepted", tc.body)
			continue
		}
		param := ""
		if err.Err.Param != nil {
			param = *err.Err.Param
		}
		if err.Status != 400 || err.Err.Type != TypeInvalidRequest || param != tc.param {
			t.Errorf("%s: %d %s param %q, want 400 invalid_request_error param %q", tc.body, err.Status, err.Err.Type, param, tc.param)
		}
	}
}

// TestFieldsError: a jobs field rule answers with the OpenAI parameter it concerns; an
// unknown model is OpenAI's 404 model_not_found.
func TestFieldsError(t *testing.T) {
	e := FieldsError(map[string]string{"options.max_tokens": "must be between 1 and 1000000", "options.temperature": "x"}, "")
	if e.Status != 400 || *e.Err.Param != "max_tokens" {
		t.Errorf("max_tokens: %+v", e)
	}
	if e := FieldsError(map[string]string{"prompt": "is required"}, ""); *e.Err.Param != "messages" {
		t.Errorf("prompt: %+v", e)
	}
	if e := FieldsError(map[string]string{"options.model": "must be one of a"}, "gpt-x"); e.Status != 404 || *e.Err.Code != "model_not_found" {
		t.Errorf("model: %+v", e)
	}
}
