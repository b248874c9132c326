package jobs_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// TestSubmitMessages: a prompt submitted as messages keeps its conversation with the prompt
// (its text is the last user message), the provider receives the conversation and the output
// options, a retry runs the same conversation, and the reservation, the submit's and the
// retry's alike, counts the whole conversation and max_tokens.
func TestSubmitMessages(t *testing.T) {
	fake := newFake(nil)
	e := newEnv(t, fake)
	temp := 0.5
	msgs := []jobs.Message{{Role: "system", Content: "Be terse."}, {Role: "user", Content: "first question"},
		{Role: "assistant", Content: "first answer"}, {Role: "user", Content: "  the second question  "}}
	sub := e.Submit("", func(r *jobs.SubmitRequest) {
		r.Messages = msgs
		r.Options.MaxTokens = intp(40)
		r.Options.Temperature = &temp
		r.Options.ResponseFormat = json.RawMessage(`{"type":"json_object"}`)
	})
	var prompt db.Entity
	if err := e.D.Bun.NewSelect().Model(&prompt).Where("id = ?", sub.PromptID).Scan(context.Background()); err != nil {
		t.Fatal(err)
	}
	stored, err := jobs.PromptMessages(prompt.Messages)
	if err != nil || len(stored) != len(msgs) || stored[3] != msgs[3] {
		t.Fatalf("stored messages %+v (%v), want %+v", stored, err, msgs)
	}
	if prompt.Body != "the second question" {
		t.Errorf("prompt text %q, want the last user message", prompt.Body)
	}
	job := e.Job(sub.JobID)
	want := provider.EstimateTokens(jobs.ConversationText(msgs)) + 40
	if want == provider.EstimateTokens("the second question")+40 {
		t.Fatal("the conversation's estimate is its last message's: the check below could not fail")
	}
	if job.BudgetTokens != want {
		t.Errorf("reservation %d, want the conversation's estimate plus max_tokens, %d", job.BudgetTokens, want)
	}
	jobstest.StartRuntime(t, e.D.Pool, e.S, 1)
	e.WaitState(sub.JobID, jobs.StateSucceeded, 30*time.Second)
	retried, err := e.S.Retry(context.Background(), e.V, sub.JobID, jobs.Actor{Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if got := e.Job(retried.Job.ID).BudgetTokens; got != want {
		t.Errorf("the retry reserved %d, want what its submit did, %d", got, want)
	}
	e.WaitState(retried.Job.ID, jobs.StateSucceeded, 30*time.Second)
	calls := fake.Calls()
	if len(calls) != 2 {
		t.Fatalf("%d provider calls, want 2", len(calls))
	}
	for _, c := range calls {
		r := c.req
		if len(r.Messages) != 4 || r.Messages[0] != (provider.Message{Role: "system", Content: "Be terse."}) ||
			r.Messages[3].Content != msgs[3].Content || r.Text != "the second question" {
			t.Errorf("provider got messages %+v and text %q", r.Messages, r.Text)
		}
		if r.Options.MaxTokens != 40 || r.Options.Temperature == nil || *r.Options.Temperature != 0.5 ||
			compactJSON(r.Options.ResponseFormat) != `{"type":"json_object"}` {
			t.Errorf("provider got options %+v", r.Options)
		}
	}
}

// TestSubmitMessagesRules: each rule of the conversation and the output options is a field
// error naming the field, and nothing is written.
func TestSubmitMessagesRules(t *testing.T) {
	e := newEnv(t, jobstest.InstantSim())
	user := func(s string) jobs.Message { return jobs.Message{Role: jobs.RoleUser, Content: s} }
	many := make([]jobs.Message, jobs.MaxMessages+1)
	for i := range many {
		many[i] = user("x")
	}
	half := strings.Repeat("a", jobs.MaxPromptChars/2+1)
	tests := []struct {
		name  string
		mod   func(*jobs.SubmitRequest)
		field string
	}{
		{"both prompt and messages", func(r *jobs.SubmitRequest) { r.Prompt, r.Messages = "p", []jobs.Message{user("m")} }, "prompt"},
		{"no messages", func(r *jobs.SubmitRequest) { r.Messages = []jobs.Message{} }, "messages"},
		{"too many", func(r *jobs.SubmitRequest) { r.Messages = many }, "messages"},
		{"too long in all", func(r *jobs.SubmitRequest) { r.Messages = []jobs.Message{user(half), user(half)} }, "messages"},
		{"unknown role", func(r *jobs.SubmitRequest) {
			r.Messages = []jobs.Message{{Role: "tool", Content: "t"}, user("u")}
		}, "messages[0].role"},
		{"last not user", func(r *jobs.SubmitRequest) {
			r.Messages = []jobs.Message{user("u"), {Role: jobs.RoleAssistant, Content: "a"}}
		}, "messages[1].role"},
		{"no user message at OpenAI's door", func(r *jobs.SubmitRequest) {
			r.Door = admit.DoorFrontDoor
			r.Messages = []jobs.Message{{Role: jobs.RoleSystem, Content: "s"}, {Role: jobs.RoleAssistant, Content: "a"}}
		}, "messages"},
		{"blank last user", func(r *jobs.SubmitRequest) {
			r.Messages = []jobs.Message{{Role: jobs.RoleSystem, Content: "s"}, user("  ")}
		}, "messages[1].content"},
		{"control character", func(r *jobs.SubmitRequest) {
			r.Messages = []jobs.Message{{Role: jobs.RoleSystem, Content: "a\x00b"}, user("u")}
		}, "messages[0].content"},
		{"max_tokens 0", func(r *jobs.SubmitRequest) { r.Prompt, r.Options.MaxTokens = "p", intp(0) }, "options.max_tokens"},
		{"max_tokens too big", func(r *jobs.SubmitRequest) { r.Prompt, r.Options.MaxTokens = "p", intp(jobs.MaxOutputTokens+1) }, "options.max_tokens"},
		{"temperature", func(r *jobs.SubmitRequest) { t := 2.5; r.Prompt, r.Options.Temperature = "p", &t }, "options.temperature"},
		{"response_format", func(r *jobs.SubmitRequest) {
			r.Prompt, r.Options.ResponseFormat = "p", json.RawMessage(`"json"`)
		}, "options.response_format"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req := jobs.SubmitRequest{Viewer: e.V}
			tt.mod(&req)
			_, err := e.S.Submit(context.Background(), req)
			var ve *jobs.ValidationError
			if !errors.As(err, &ve) || ve.Fields[tt.field] == "" {
				t.Fatalf("got %v, want a field error on %s", err, tt.field)
			}
		})
	}
	if n := e.Count("SELECT count(*) FROM sa_job"); n != 0 {
		t.Errorf("%d jobs written by refused submits", n)
	}
}

// TestOpenAIDoorsTakeAConversationEndingInAnyRole: OpenAI's door takes a conversation whose
// last message is not the user's, as OpenAI does; the prompt's text is its last user message
// and the provider reads the whole conversation. The submit door still refuses it.
func TestOpenAIDoorsTakeAConversationEndingInAnyRole(t *testing.T) {
	e := newEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	msgs := []jobs.Message{{Role: jobs.RoleUser, Content: "the question"}, {Role: jobs.RoleAssistant, Content: "an answer"},
		{Role: jobs.RoleSystem, Content: "be brief"}}
	out, err := e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Messages: msgs, Door: admit.DoorFrontDoor})
	if err != nil {
		t.Fatalf("front door: %v", err)
	}
	var text string
	var stored []jobs.Message
	var raw json.RawMessage
	if err := e.D.Bun.QueryRowContext(ctx, "SELECT body, messages FROM sa_entity WHERE id = ?", out.PromptID).Scan(&text, &raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &stored); err != nil || text != "the question" || len(stored) != 3 || stored[2].Role != jobs.RoleSystem {
		t.Errorf("prompt %q with messages %s (%v), want the last user message and the whole conversation", text, raw, err)
	}
	_, err = e.S.Submit(ctx, jobs.SubmitRequest{Viewer: e.V, Messages: msgs})
	var ve *jobs.ValidationError
	if !errors.As(err, &ve) || ve.Fields["messages[2].role"] == "" {
		t.Errorf("submit door: %v, want a field error on messages[2].role", err)
	}
}

// compactJSON is raw without insignificant white space (jsonb adds some).
func compactJSON(raw json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return string(raw)
	}
	return b.String()
}
