package handlers

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/identity"
)

// TestFrontDoorStreamFrames reads a streamed chat completion byte for byte: text/event-stream
// with the job's id in a header, every event exactly one "data: " line and a blank line, the
// assistant's role first, the usage chunk (no choices) next to last and "data: [DONE]" last.
func TestFrontDoorStreamFrames(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "fd-a", "fd-bytes", identity.RoleMember)
	r := f.do(t, "POST", "/v1/chat/completions", u.Tok, map[string]any{"stream": true,
		"stream_options": map[string]any{"include_usage": true},
		"messages":       []map[string]any{{"role": "user", "content": "#sim:latency=300ms #sim:tokens=5"}}})
	if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") || r.Header.Get(jobIDHeader) == "" {
		t.Fatalf("answer %d, Content-Type %q, %s %q", r.StatusCode, r.Header.Get("Content-Type"), jobIDHeader, r.Header.Get(jobIDHeader))
	}
	body := string(r.Body)
	if !strings.HasSuffix(body, "\n\ndata: [DONE]\n\n") {
		t.Fatalf("the stream does not end with data: [DONE]: %q", body)
	}
	frames := strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n")
	type chunk struct {
		Object  string `json:"object"`
		Choices []struct {
			Delta struct {
				Role    string  `json:"role"`
				Content *string `json:"content"`
			} `json:"delta"`
		} `json:"choices"`
		Usage *struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	var text strings.Builder
	for i, fr := range frames {
		if strings.Contains(fr, "\n") || !strings.HasPrefix(fr, "data: ") {
			t.Fatalf("frame %d is not one data line: %q", i, fr)
		}
		data := strings.TrimPrefix(fr, "data: ")
		if i == len(frames)-1 {
			if data != "[DONE]" {
				t.Errorf("last frame %q", data)
			}
			break
		}
		var c chunk
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("frame %d: %q (%v)", i, data, err)
		}
		switch {
		case i == 0 && (len(c.Choices) != 1 || c.Choices[0].Delta.Role != "assistant"):
			t.Errorf("first chunk %q, want the assistant's role", data)
		case i == len(frames)-2 && (len(c.Choices) != 0 || c.Usage == nil || c.Usage.TotalTokens == 0):
			t.Errorf("next-to-last chunk %q, want the usage with no choices", data)
		case i < len(frames)-2 && !strings.HasSuffix(data, `,"usage":null}`):
			t.Errorf("chunk %d %q, want \"usage\": null before the usage chunk, as OpenAI sends it", i, data)
		case i > 0 && i < len(frames)-2 && len(c.Choices) == 1 && c.Choices[0].Delta.Content != nil:
			text.WriteString(*c.Choices[0].Delta.Content)
		}
	}
	if n := len(strings.Fields(text.String())); n != 5 {
		t.Errorf("content %q, want the 5 words", text.String())
	}
}

// TestFrontDoorChatOutlivesTheRequestDeadline: a caller waits for its chat completion for as
// long as the job runs, past the deadline every other request has.
func TestFrontDoorChatOutlivesTheRequestDeadline(t *testing.T) {
	cfg := frontDoorConfig(t)
	withHub := cfg.Deps
	cfg.Deps = func(d *dbtest.DB, deps *Deps) {
		withHub(d, deps)
		deps.Limits.RequestTimeout = 300 * time.Millisecond
	}
	f := startLiveServerWith(t, cfg)
	u := f.user(t, "fd-a", "fd-patient", identity.RoleMember)
	r := f.do(t, "POST", "/v1/chat/completions", u.Tok, map[string]any{
		"messages": []map[string]any{{"role": "user", "content": "#sim:latency=1500ms slow"}}})
	if r.StatusCode != http.StatusOK || !strings.Contains(string(r.Body), `"object":"chat.completion"`) {
		t.Fatalf("a chat slower than the request deadline: %s", r)
	}
}

// TestSubmitMessagesThroughTheAPI: POST /prompt takes messages and the output options, the job
// document shows the conversation, and a key unknown inside a message or a value of the wrong
// type is refused.
func TestSubmitMessagesThroughTheAPI(t *testing.T) {
	f := startLiveServer(t)
	u := f.user(t, "acme", "msg-member", identity.RoleMember)
	r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{
		"messages": []map[string]any{{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"}},
		"options":  map[string]any{"max_tokens": 3, "temperature": 1.5, "response_format": map[string]any{"type": "text"}}})
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("submit messages: %s", r)
	}
	sub := mustDecode[liveSubmitted](t, r.Body)
	f.waitJob(t, u, sub.JobID, "succeeded")
	doc := mustDecode[struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}](t, f.do(t, "GET", "/sa-core/v1/jobs/"+sub.JobID, u.Tok, nil).Body)
	if len(doc.Messages) != 2 || doc.Messages[0].Role != "system" || doc.Messages[1].Content != "hello there" {
		t.Errorf("job document messages %+v", doc.Messages)
	}
	plain := f.submit(t, u, "plain text")
	if strings.Contains(string(f.do(t, "GET", "/sa-core/v1/jobs/"+plain.JobID, u.Tok, nil).Body), `"messages"`) {
		t.Error("a prompt submitted as text has messages in its job document")
	}
	for _, tc := range []struct {
		body   string
		status int
	}{
		{`{"messages":[{"role":"user","content":"x","name":"n"}]}`, 400},
		{`{"messages":[{"role":"user","content":"x"}],"options":{"seed":1}}`, 400},
		{`{"messages":[{"role":"user","content":5}]}`, 422},
		{`{"messages":[{"role":"user","content":"x"}],"options":{"max_tokens":"3"}}`, 422},
		{`{"messages":[{"role":"user","content":"x"}],"options":{"max_tokens":0}}`, 422},
		{`{"prompt":"p","messages":[{"role":"user","content":"x"}]}`, 422},
		{`{"messages":[{"role":"assistant","content":"x"}]}`, 422},
	} {
		if r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, tc.body); r.StatusCode != tc.status {
			t.Errorf("%s: %s, want %d", tc.body, r, tc.status)
		}
	}
}
