package provider

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// TestOpenAISendsConversationAndOptions: a prompt given as messages goes out as those messages,
// in order and with their roles, with max_tokens, temperature and response_format as given; a
// prompt without them sends none of these keys.
func TestOpenAISendsConversationAndOptions(t *testing.T) {
	t.Parallel()
	srv := newChatServer(t, reply(200, successBody))
	o := newTestOpenAI(t, srv.URL, time.Second)
	temp := 0.25
	format := json.RawMessage(`{"type":"json_object"}`)
	msgs := []Message{{Role: "system", Content: "Be terse."}, {Role: "user", Content: "Hi"},
		{Role: "assistant", Content: "Hello."}, {Role: "user", Content: "What is six times seven?"}}
	if _, err := o.Complete(context.Background(), Request{JobID: "j", Attempt: 1, Text: msgs[3].Content, Messages: msgs,
		Options: Options{MaxTokens: 7, Temperature: &temp, ResponseFormat: format}}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if _, err := o.Complete(context.Background(), Request{JobID: "k", Attempt: 1, Text: "plain"}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	reqs := srv.requests()
	if len(reqs) != 2 || reqs[0].DecodeErr != nil {
		t.Fatalf("server saw %d requests (%v)", len(reqs), reqs[0].DecodeErr)
	}
	got := reqs[0].Body
	if len(got.Messages) != len(msgs) {
		t.Fatalf("sent %d messages, want %d: %+v", len(got.Messages), len(msgs), got.Messages)
	}
	for i, m := range msgs {
		if got.Messages[i] != chatMessage(m) {
			t.Errorf("message %d = %+v, want %+v", i, got.Messages[i], m)
		}
	}
	if got.MaxTokens != 7 || got.Temperature == nil || *got.Temperature != 0.25 || string(got.ResponseFormat) != `{"type":"json_object"}` {
		t.Errorf("options sent: max_tokens %d, temperature %v, response_format %s", got.MaxTokens, got.Temperature, got.ResponseFormat)
	}
	plain := reqs[1].Body
	if len(plain.Messages) != 1 || plain.Messages[0] != (chatMessage{Role: "user", Content: "plain"}) ||
		plain.MaxTokens != 0 || plain.Temperature != nil || plain.ResponseFormat != nil {
		t.Errorf("a plain prompt sent %+v", plain)
	}
}

// TestSimHonoursMaxTokens: the sim writes at most max_tokens words, in its answer, its output
// pieces and its usage.
func TestSimHonoursMaxTokens(t *testing.T) {
	t.Parallel()
	sim := NewSim(SimConfig{})
	for _, tc := range []struct {
		text string
		max  int
		want int
	}{
		{"#sim:tokens=30", 5, 5},
		{"#sim:tokens=3", 5, 3},
		{"a long prompt with many words to echo back here", 2, 2},
		{"#sim:tokens=12", 0, 12},
	} {
		var pieces strings.Builder
		resp, err := sim.Complete(context.Background(), Request{JobID: "j", Attempt: 1, Text: tc.text,
			Options: Options{MaxTokens: tc.max}, Output: func(p string) { pieces.WriteString(p) }})
		if err != nil {
			t.Fatalf("%q: %v", tc.text, err)
		}
		if n := len(strings.Fields(resp.Text)); n != tc.want || resp.CompletionTokens != tc.want {
			t.Errorf("%q max %d: %d words (usage %d), want %d: %q", tc.text, tc.max, n, resp.CompletionTokens, tc.want, resp.Text)
		}
		if pieces.String() != resp.Text {
			t.Errorf("%q: pieces %q, answer %q", tc.text, pieces.String(), resp.Text)
		}
	}
}

// TestSimReadsDirectivesFromTheLastUserMessage: a directive in an earlier message of the
// conversation (a system prompt, an assistant's turn) does nothing; the last user message's do.
func TestSimReadsDirectivesFromTheLastUserMessage(t *testing.T) {
	t.Parallel()
	sim := NewSim(SimConfig{})
	msgs := []Message{{Role: "system", Content: "#sim:fail=auth"}, {Role: "assistant", Content: "#sim:hang"},
		{Role: "user", Content: "four words please #sim:tokens=4"}}
	resp, err := sim.Complete(context.Background(), Request{JobID: "j", Attempt: 1, Text: msgs[2].Content, Messages: msgs})
	if err != nil {
		t.Fatalf("a directive of an earlier message applied: %v", err)
	}
	if n := len(strings.Fields(resp.Text)); n != 4 {
		t.Errorf("answer %q, want the 4 words of the last user message's directive", resp.Text)
	}
	// The usage counts every message's words (the directives of the last one aside).
	if want := 1 + 1 + 3; resp.PromptTokens != want {
		t.Errorf("prompt tokens %d, want %d", resp.PromptTokens, want)
	}
}
