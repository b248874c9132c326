package openai

import (
	"bufio"
	"bytes"
	"strings"
	"testing"

	"github.com/google/uuid"

	"asterion/jobs"
)

// TestDecodeResponses: a string input is one user message, a list of messages keeps its roles
// (developer as system, text parts joined), the instructions go first as a system message,
// text.format becomes the chat response_format, and the echo keeps what GET answers with.
// Fields Asterion does not use are accepted.
func TestDecodeResponses(t *testing.T) {
	r, err := DecodeResponses([]byte(`{"model":"m","instructions":"be brief","input":[
		{"role":"developer","content":"dev"},
		{"type":"message","role":"user","content":[{"type":"input_text","text":"one"},{"type":"input_text","text":"two"}]},
		{"role":"assistant","content":[{"type":"output_text","text":"said"}]},
		{"role":"user","content":"last"}],
		"max_output_tokens":7,"temperature":0.5,"metadata":{"k":"v"},"background":true,"stream":true,
		"text":{"format":{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}},
		"tools":[],"store":false,"reasoning":{"effort":"low"},"previous_response_id":null,"truncation":"auto"}`))
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	sub := r.Submit(jobs.Viewer{OrgID: 1, UserID: 2})
	want := []jobs.Message{{Role: "system", Content: "be brief"}, {Role: "system", Content: "dev"},
		{Role: "user", Content: "one\ntwo"}, {Role: "assistant", Content: "said"}, {Role: "user", Content: "last"}}
	if len(sub.Messages) != len(want) {
		t.Fatalf("messages %+v", sub.Messages)
	}
	for i := range want {
		if sub.Messages[i] != want[i] {
			t.Errorf("message %d = %+v, want %+v", i, sub.Messages[i], want[i])
		}
	}
	o := sub.Options
	if o.Model != "m" || *o.MaxTokens != 7 || *o.Temperature != 0.5 || sub.Door != "front_door" || !r.Stream ||
		string(o.ResponseFormat) != `{"json_schema":{"name":"n","schema":{"type":"object"},"strict":true},"type":"json_schema"}` {
		t.Errorf("submit %+v (response_format %s)", sub, o.ResponseFormat)
	}
	opts := []byte(`{"echo":` + string(o.Echo) + `}`)
	echo, ok := ReadResponseEcho(opts)
	if !ok || !echo.Background || !echo.Instructions || echo.Metadata["k"] != "v" ||
		string(echo.Format) != `{"type":"json_schema","name":"n","schema":{"type":"object"},"strict":true}` {
		t.Errorf("echo %+v (%v)", echo, ok)
	}
	if _, ok := ReadResponseEcho([]byte(`{"model":"m"}`)); ok {
		t.Error("a job without an echo reads as a response")
	}
	s, err := DecodeResponses([]byte(`{"input":"just this"}`))
	if err != nil || len(s.Input) != 1 || s.Input[0] != (jobs.Message{Role: "user", Content: "just this"}) || s.Instructions != nil {
		t.Errorf("string input: %+v %v", s, err)
	}
}

// TestDecodeResponsesErrors: each malformed request is a 400 invalid_request_error naming the
// parameter.
func TestDecodeResponsesErrors(t *testing.T) {
	pairs := make([]string, 17)
	for i := range pairs {
		pairs[i] = `"k` + string(rune('a'+i)) + `":"v"`
	}
	many := `{"input":"x","metadata":{` + strings.Join(pairs, ",") + "}}"
	for _, tc := range []struct{ body, param string }{
		{`not json`, ""},
		{`[]`, ""},
		{`{}`, "input"},
		{`{"input":[]}`, "input"},
		{`{"input":5}`, "input"},
		{`{"input":[{"content":"x"}]}`, "input[0].role"},
		{`{"input":[{"role":"tool","content":"x"}]}`, "input[0].role"},
		{`{"input":[{"role":"user"}]}`, "input[0].content"},
		{`{"input":[{"role":"user","content":[{"type":"input_image","image_url":"x"}]}]}`, "input[0].content[0].type"},
		{`{"input":[{"type":"function_call","name":"f"}]}`, "input[0].type"},
		{`{"input":"x","model":5}`, "model"},
		{`{"input":"x","instructions":{}}`, "instructions"},
		{`{"input":"x","max_output_tokens":"5"}`, "max_output_tokens"},
		{`{"input":"x","temperature":"hot"}`, "temperature"},
		{`{"input":"x","text":"json"}`, "text"},
		{`{"input":"x","text":{"format":{}}}`, "text.format.type"},
		{`{"input":"x","text":{"format":{"type":"yaml"}}}`, "text.format.type"},
		{`{"input":"x","metadata":{"k":1}}`, "metadata"},
		{many, "metadata"},
		{`{"input":"x","metadata":{"k":"` + strings.Repeat("v", 513) + `"}}`, "metadata"},
		{`{"input":"x","stream":"yes"}`, "stream"},
		{`{"input":"x","background":1}`, "background"},
	} {
		_, err := DecodeResponses([]byte(tc.body))
		if err == nil {
			t.Errorf("%.60s: accepted", tc.body)
			continue
		}
		param := ""
		if err.Err.Param != nil {
			param = *err.Err.Param
		}
		if err.Status != 400 || err.Err.Type != TypeInvalidRequest || param != tc.param {
			t.Errorf("%.60s: %d %s param %q, want 400 invalid_request_error param %q", tc.body, err.Status, err.Err.Type, param, tc.param)
		}
	}
}

// TestResponsesFieldsError: the jobs package's field names are answered as the responses
// parameters they come from, counting the instructions' message.
func TestResponsesFieldsError(t *testing.T) {
	instr := "i"
	for _, tc := range []struct {
		field        string
		instructions bool
		param        string
	}{
		{"messages[1].role", false, "input[1].role"},
		{"messages[1].role", true, "input[0].role"},
		{"messages[0].content", true, "instructions"},
		{"messages", false, "input"},
		{"prompt", false, "input"},
		{"options.max_tokens", false, "max_output_tokens"},
		{"options.temperature", false, "temperature"},
		{"options.response_format", false, "text.format"},
	} {
		r := ResponsesRequest{}
		if tc.instructions {
			r.Instructions = &instr
		}
		e := ResponsesFieldsError(map[string]string{tc.field: "is wrong"}, r)
		if e.Status != 400 || e.Err.Param == nil || *e.Err.Param != tc.param {
			t.Errorf("%s (instructions %v): %+v, want param %s", tc.field, tc.instructions, e.Err, tc.param)
		}
	}
	if e := ResponsesFieldsError(map[string]string{"options.model": "x"}, ResponsesRequest{Model: "nope"}); e.Status != 404 {
		t.Errorf("model: %+v", e)
	}
}

// TestResponseID: a response's id is its job's id in hex behind resp_, and only such a string
// names a job.
func TestResponseID(t *testing.T) {
	id := uuid.New()
	s := ResponseID(id)
	if s != "resp_"+strings.ReplaceAll(id.String(), "-", "") {
		t.Fatalf("id %s for job %s", s, id)
	}
	if back, ok := ParseResponseID(s); !ok || back != id {
		t.Errorf("parse %s: %s %v", s, back, ok)
	}
	for _, bad := range []string{"", "resp_", strings.ToUpper(s), "chatcmpl-" + s[5:], s + "0", s[:len(s)-1] + "g", "resp_" + id.String()} {
		if _, ok := ParseResponseID(bad); ok {
			t.Errorf("%q parsed as a response id", bad)
		}
	}
}

// TestResponseStatus: each job state has its response status; a success that used up
// max_output_tokens is incomplete.
func TestResponseStatus(t *testing.T) {
	four, kind := 4, "timeout"
	for _, tc := range []struct {
		state    string
		kind     *string
		response bool
		out      int64
		max      *int
		want     string
	}{
		{"queued", nil, false, 0, nil, "queued"},
		{"running", nil, false, 0, nil, "in_progress"},
		{"succeeded", nil, true, 9, nil, "completed"},
		{"succeeded", nil, true, 3, &four, "completed"},
		{"succeeded", nil, true, 4, &four, "incomplete"},
		{"failed", &kind, false, 0, nil, "failed"},
		{"cancelled", nil, false, 0, nil, "cancelled"},
		{"superseded", nil, true, 2, nil, "completed"},
		{"superseded", &kind, false, 0, nil, "failed"},
	} {
		if got := ResponseStatus(tc.state, tc.kind, tc.response, tc.out, tc.max); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.state, got, tc.want)
		}
	}
}

// TestResponseEventFrames: every event is "event: <type>", one "data: " line whose type is the
// same, and a blank line; its number comes from the chunk it carries, and the four that end a
// stream follow the last chunk's.
func TestResponseEventFrames(t *testing.T) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	ev := ResponseEvents{ResponseID: "resp_ab"}
	r := NewResponse(ResponseFacts{ID: "resp_ab", CreatedAt: 7, Status: StatusCompleted, Model: "m", Text: "two\nlines",
		Usage: &Usage{PromptTokens: 1, CompletionTokens: 2, TotalTokens: 3}})
	if err := WriteResponseEvent(w, ev.Delta(2, "two\n")); err != nil {
		t.Fatal(err)
	}
	done := ev.Done(2, "two\nlines", r)
	for _, e := range done {
		if err := WriteResponseEvent(w, e); err != nil {
			t.Fatal(err)
		}
	}
	_ = w.Flush()
	frames := strings.Split(strings.TrimSuffix(b.String(), "\n\n"), "\n\n")
	wantDelta := "event: response.output_text.delta\n" +
		`data: {"type":"response.output_text.delta","sequence_number":5,"output_index":0,"item_id":"msg_ab","content_index":0,"delta":"two\n","logprobs":[]}`
	if len(frames) != 5 || frames[0] != wantDelta {
		t.Fatalf("frames %q\nwant first %q", frames, wantDelta)
	}
	for i, typ := range []string{"response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed"} {
		fr := frames[i+1]
		if !strings.HasPrefix(fr, "event: "+typ+"\ndata: {\"type\":\""+typ+"\",\"sequence_number\":"+string(rune('6'+i))+",") ||
			strings.Count(fr, "\n") != 1 {
			t.Errorf("frame %d = %q, want %s numbered %d", i+1, fr, typ, 6+i)
		}
	}
	if !strings.Contains(frames[4], `"output":[{"id":"msg_ab","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"two\nlines","annotations":[]}]}]`) ||
		!strings.Contains(frames[4], `"usage":{"input_tokens":1,"input_tokens_details":{"cached_tokens":0},"output_tokens":2,`) ||
		!strings.Contains(frames[4], `"metadata":{}`) || !strings.Contains(frames[4], `"text":{"format":{"type":"text"}}`) {
		t.Errorf("response.completed %s", frames[4])
	}
	failed := ev.Done(0, "", NewResponse(ResponseFacts{ID: "resp_ab", Status: StatusFailed, ErrorCode: "timeout", ErrorMessage: "slow"}))
	if failed[0].SequenceNumber != 4 || failed[3].Type != "response.failed" || failed[2].Item.Status != "incomplete" ||
		failed[3].Response.Error.Code != "timeout" {
		t.Errorf("the end of a failed response: %+v", failed)
	}
	if c := ev.Done(0, "", NewResponse(ResponseFacts{ID: "resp_ab", Status: StatusCancelled})); c[3].Type != "response.cancelled" {
		t.Errorf("the end of a cancelled response: %s", c[3].Type)
	}
}
