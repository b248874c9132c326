package handlers

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/usage"
)

// sdkClient is the official OpenAI Go SDK pointed at the live server's front door with tok as
// its key, as an application would configure it; it does not retry, so each call is one job.
func (f *liveServer) sdkClient(tok string) sdk.Client {
	return sdk.NewClient(option.WithBaseURL(f.Base+"/v1/"), option.WithAPIKey(tok), option.WithMaxRetries(0))
}

// frontDoorConfig is a live server with live output and a usage meter (whose budget standing
// is read afresh on every check), as the binary serves the front door.
func frontDoorConfig(t *testing.T) liveServerConfig {
	cfg := liveOutputConfig(t)
	withOutput := cfg.Jobs
	cfg.Jobs = func(jc *jobs.Config) {
		withOutput(jc)
		m, err := usage.New(usage.Config{DB: jc.DB, StatusTTL: -1})
		if err != nil {
			t.Fatal(err)
		}
		jc.Usage = m
	}
	return cfg
}

// attemptsUsage is the sum of a job's attempts' usage, read from the table.
func (f *liveServer) attemptsUsage(t *testing.T, jobID string) (input, output int64) {
	t.Helper()
	if err := f.DB.Bun.QueryRowContext(context.Background(),
		"SELECT coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0) FROM sa_attempt WHERE job_id = ?", jobID).
		Scan(&input, &output); err != nil {
		t.Fatal(err)
	}
	return input, output
}

// asAPIError fails the test unless err is the SDK's API error with status, and returns it.
func asAPIError(t *testing.T, what string, err error, status int) *sdk.Error {
	t.Helper()
	var apierr *sdk.Error
	if !errors.As(err, &apierr) {
		t.Fatalf("%s: %v, want the SDK's API error", what, err)
	}
	if apierr.StatusCode != status {
		t.Fatalf("%s: status %d (%s), want %d", what, apierr.StatusCode, apierr.RawJSON(), status)
	}
	return apierr
}

// TestFrontDoorModelsAndChat: the SDK lists the admitted models (the default first) and runs a
// chat completion that is an Asterion job: the job exists with its operation, its prompt is the
// conversation (developer read as system), the answer is the job's response, capped at
// max_completion_tokens ("length"), and the usage is the sum of the job's attempts.
func TestFrontDoorModelsAndChat(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "fd-a", "fd-member", identity.RoleMember)
	client := f.sdkClient(u.Tok)
	ctx := context.Background()

	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatalf("models: %v", err)
	}
	models := f.Jobs.Admission().Models()
	if len(page.Data) != len(models) || page.Data[0].ID != models[0] || page.Data[0].Object != "model" {
		t.Fatalf("models %+v, want %v", page.Data, models)
	}

	var httpResp *http.Response
	got, err := client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
		Messages: []sdk.ChatCompletionMessageParamUnion{
			sdk.DeveloperMessage("Answer in few words."),
			sdk.UserMessage("an earlier question"),
			sdk.AssistantMessage("an earlier answer"),
			sdk.UserMessage("count for me #sim:tokens=9"),
		},
		MaxCompletionTokens: sdk.Int(4),
		Temperature:         sdk.Float(0.2),
		Metadata:            map[string]string{"app": "test"},
	}, option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatalf("chat: %v", err)
	}
	jobID := httpResp.Header.Get(jobIDHeader)
	if jobID == "" {
		t.Fatalf("no %s header", jobIDHeader)
	}
	job := f.job(t, u, jobID)
	if job.State != "succeeded" || job.ResponseID == nil {
		t.Fatalf("job %+v, want succeeded with a response", job)
	}
	var opCount int
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_job j JOIN sa_operation o ON o.id = j.operation_id WHERE j.id = ?",
		jobID).Scan(&opCount); err != nil || opCount != 1 {
		t.Errorf("the job's operation: %d rows (%v), want 1", opCount, err)
	}
	doc := mustDecode[struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}](t, f.do(t, "GET", "/sa-core/v1/jobs/"+jobID, u.Tok, nil).Body)
	if len(doc.Messages) != 4 || doc.Messages[0].Role != "system" || doc.Messages[3].Content != "count for me #sim:tokens=9" {
		t.Errorf("the job document's messages %+v", doc.Messages)
	}
	var response string
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT body FROM sa_entity WHERE id = ?", *job.ResponseID).Scan(&response); err != nil {
		t.Fatal(err)
	}
	if got.Object != "chat.completion" || len(got.Choices) != 1 || got.Choices[0].Message.Content != response ||
		got.Choices[0].Message.Role != "assistant" || got.Model != models[0] || !strings.HasPrefix(got.ID, "chatcmpl-") {
		t.Errorf("completion %+v, want the job's response %q", got, response)
	}
	if n := len(strings.Fields(response)); n != 4 || got.Choices[0].FinishReason != "length" {
		t.Errorf("answer %q (finish %q), want 4 words cut by max_completion_tokens", response, got.Choices[0].FinishReason)
	}
	in, out := f.attemptsUsage(t, jobID)
	if got.Usage.PromptTokens != in || got.Usage.CompletionTokens != out || got.Usage.TotalTokens != in+out || out == 0 {
		t.Errorf("usage %+v, want the attempts' %d + %d", got.Usage, in, out)
	}
}

// TestFrontDoorChatStream: a streamed completion's content chunks arrive as the model writes
// them and concatenate to the job's response; the usage chunk (no choices) carries the job's
// usage; the stream ends with [DONE] (the SDK ends without an error).
func TestFrontDoorChatStream(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "fd-a", "fd-streamer", identity.RoleMember)
	client := f.sdkClient(u.Tok)
	var httpResp *http.Response
	stream := client.Chat.Completions.NewStreaming(context.Background(), sdk.ChatCompletionNewParams{
		Messages:      []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("#sim:latency=1500ms #sim:tokens=12")},
		StreamOptions: sdk.ChatCompletionStreamOptionsParam{IncludeUsage: sdk.Bool(true)},
	}, option.WithResponseInto(&httpResp))
	defer stream.Close()
	var text strings.Builder
	contentChunks, usageChunks := 0, 0
	var usage sdk.CompletionUsage
	finish := ""
	for stream.Next() {
		c := stream.Current()
		if c.Object != "chat.completion.chunk" {
			t.Errorf("chunk object %q", c.Object)
		}
		if len(c.Choices) == 0 {
			usageChunks++
			usage = c.Usage
			continue
		}
		if d := c.Choices[0].Delta.Content; d != "" {
			contentChunks++
			text.WriteString(d)
		}
		if r := c.Choices[0].FinishReason; r != "" {
			finish = r
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	jobID := httpResp.Header.Get(jobIDHeader)
	job := f.job(t, u, jobID)
	var response string
	if err := f.DB.Bun.QueryRowContext(context.Background(), "SELECT body FROM sa_entity WHERE id = ?", *job.ResponseID).
		Scan(&response); err != nil {
		t.Fatal(err)
	}
	if text.String() != response || contentChunks < 2 || finish != "stop" {
		t.Errorf("%d content chunks %q (finish %q), want the job's response %q in pieces", contentChunks, text.String(), finish, response)
	}
	in, out := f.attemptsUsage(t, jobID)
	if usageChunks != 1 || usage.PromptTokens != in || usage.CompletionTokens != out || usage.TotalTokens != in+out {
		t.Errorf("%d usage chunks, usage %+v, want one with %d + %d", usageChunks, usage, in, out)
	}
}

// TestFrontDoorCallerThatLeavesCancelsItsJob: a caller that goes away, streaming or waiting,
// cancels its job (and with it the provider call, which would otherwise never end).
func TestFrontDoorCallerThatLeavesCancelsItsJob(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "fd-a", "fd-leaver", identity.RoleMember)
	client := f.sdkClient(u.Tok)
	for _, streamed := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		var httpResp *http.Response
		params := sdk.ChatCompletionNewParams{Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("wait forever #sim:hang")}}
		jobID := ""
		if streamed {
			stream := client.Chat.Completions.NewStreaming(ctx, params, option.WithResponseInto(&httpResp))
			if !stream.Next() {
				t.Fatalf("no first chunk: %v", stream.Err())
			}
			jobID = httpResp.Header.Get(jobIDHeader)
			f.waitJob(t, u, jobID, "running")
			cancel()
			stream.Close()
		} else {
			done := make(chan error, 1)
			go func() {
				_, err := client.Chat.Completions.New(ctx, params)
				done <- err
			}()
			// The caller waits with no header yet: find its job by its text.
			jobstest.WaitFor(t, 20*time.Second, "the waiting caller's job to run", func() bool {
				_ = f.DB.Bun.QueryRowContext(context.Background(), `SELECT j.id::text FROM sa_job j JOIN sa_entity p ON p.id = j.prompt_id
					WHERE p.body = 'wait forever #sim:hang' AND j.state = 'running' AND j.created_by = ?`, u.ID).Scan(&jobID)
				return jobID != ""
			})
			cancel()
			<-done
		}
		if j := f.waitJob(t, u, jobID, "cancelled"); j.State != "cancelled" {
			t.Errorf("streamed %v: job %s is %s", streamed, jobID, j.State)
		}
		// The attempt is recorded once the provider call returns, which a hanging sim call
		// does only when its context is cancelled.
		jobstest.WaitFor(t, 20*time.Second, fmt.Sprintf("the provider call of job %s (streamed %v) to return", jobID, streamed), func() bool {
			var attempts int
			if err := f.DB.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM sa_attempt WHERE job_id = ?", jobID).
				Scan(&attempts); err != nil {
				t.Fatal(err)
			}
			return attempts > 0
		})
	}
}

// TestFrontDoorErrors: each failure answers OpenAI's error object with OpenAI's status, so the
// SDK raises its own error for it: a bad key (401), a malformed body or a broken rule (400,
// naming the parameter), an unknown model or address (404), a spent budget (429 with
// Retry-After) and a job that failed (5xx).
func TestFrontDoorErrors(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "fd-a", "fd-errors", identity.RoleMember)
	spender := f.user(t, "fd-budget", "fd-spender", identity.RoleMember)
	ctx := context.Background()
	hello := []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("hello")}

	stranger := f.sdkClient("not-a-token")
	client := f.sdkClient(u.Tok)
	_, err := stranger.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Messages: hello})
	if e := asAPIError(t, "bad key", err, 401); e.Code != "invalid_api_key" || e.Type != "invalid_request_error" {
		t.Errorf("bad key: %s", e.RawJSON())
	}
	_, err = client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Messages: hello},
		option.WithJSONSet("messages", 5))
	if e := asAPIError(t, "messages of the wrong type", err, 400); e.Param != "messages" || e.Type != "invalid_request_error" {
		t.Errorf("messages of the wrong type: %s", e.RawJSON())
	}
	_, err = client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Messages: []sdk.ChatCompletionMessageParamUnion{
		sdk.SystemMessage("s"), sdk.AssistantMessage("a")}})
	if e := asAPIError(t, "no user message", err, 400); e.Param != "messages" {
		t.Errorf("no user message: %s", e.RawJSON())
	}
	// A conversation may end in another role than the user's, as OpenAI takes it; its text is
	// its last user message.
	var httpResp *http.Response
	got, err := client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Messages: []sdk.ChatCompletionMessageParamUnion{
		sdk.UserMessage("q #sim:tokens=2"), sdk.AssistantMessage("a"), sdk.SystemMessage("be brief")}},
		option.WithResponseInto(&httpResp))
	if err != nil || len(got.Choices) != 1 || got.Choices[0].Message.Content == "" {
		t.Fatalf("a conversation ending in a system message: %v", err)
	}
	var text string
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT e.body FROM sa_job j JOIN sa_entity e ON e.id = j.prompt_id WHERE j.id = ?",
		httpResp.Header.Get(jobIDHeader)).Scan(&text); err != nil || text != "q #sim:tokens=2" {
		t.Errorf("the job's prompt %q (%v), want the last user message", text, err)
	}
	_, err = client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Messages: hello, Model: "gpt-nope"})
	if e := asAPIError(t, "unknown model", err, 404); e.Code != "model_not_found" {
		t.Errorf("unknown model: %s", e.RawJSON())
	}
	// A NUL in response_format is what PostgreSQL's jsonb cannot store: a 400 naming it.
	_, err = client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Messages: hello},
		option.WithJSONSet("response_format", map[string]any{"type": "json_object", "note": "\x00"}))
	if e := asAPIError(t, "a NUL in response_format", err, 400); e.Param != "response_format" || e.Type != "invalid_request_error" {
		t.Errorf("a NUL in response_format: %s", e.RawJSON())
	}
	err = client.Get(ctx, "no/such/thing", nil, nil)
	if e := asAPIError(t, "unknown address", err, 404); e.Message != "Invalid URL (GET /v1/no/such/thing)" {
		t.Errorf("unknown address: %s", e.RawJSON())
	}
	_, err = client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Messages: []sdk.ChatCompletionMessageParamUnion{
		sdk.UserMessage("#sim:fail=provider_4xx")}})
	if e := asAPIError(t, "a failed job", err, 500); e.Code != "provider_4xx" || e.Type != "server_error" {
		t.Errorf("a failed job: %s", e.RawJSON())
	}
	for _, body := range []string{`{"messages": [`, `[1,2]`, ``} {
		r := f.do(t, "POST", "/v1/chat/completions", u.Tok, body)
		if r.StatusCode != 400 || !strings.Contains(string(r.Body), `"type":"invalid_request_error"`) {
			t.Errorf("body %q: %s", body, r)
		}
	}

	// A budget of one token: the first call is admitted, its usage spends the budget, and the
	// next is refused before any job is written.
	if _, err := f.DB.Bun.ExecContext(ctx, "INSERT INTO sa_org_budget (org_id, tokens, period) VALUES (?, 1, 'day')", spender.OrgID); err != nil {
		t.Fatal(err)
	}
	sc := f.sdkClient(spender.Tok)
	if _, err := sc.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Messages: hello}); err != nil {
		t.Fatalf("the call within the budget: %v", err)
	}
	_, err = sc.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{Messages: hello}, option.WithResponseInto(&httpResp))
	e := asAPIError(t, "past the budget", err, 429)
	if e.Code != "insufficient_quota" || e.Response.Header.Get("Retry-After") == "" {
		t.Errorf("past the budget: %s (Retry-After %q)", e.RawJSON(), e.Response.Header.Get("Retry-After"))
	}
	var jobsWritten int
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_job WHERE org_id = ?", spender.OrgID).Scan(&jobsWritten); err != nil || jobsWritten != 1 {
		t.Errorf("%d jobs of the spent org (%v), want only the first", jobsWritten, err)
	}
}

// TestFrontDoorJobsStayInTheirOrg: a front-door call's job belongs to the caller's org; a
// member of another org can neither read it, its output nor its operation, nor cancel or
// retry it.
func TestFrontDoorJobsStayInTheirOrg(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	a := f.user(t, "fd-a", "fd-owner", identity.RoleMember)
	b := f.user(t, "fd-b", "fd-other", identity.RoleMember)
	var httpResp *http.Response
	owner := f.sdkClient(a.Tok)
	if _, err := owner.Chat.Completions.New(context.Background(), sdk.ChatCompletionNewParams{
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("mine")}}, option.WithResponseInto(&httpResp)); err != nil {
		t.Fatal(err)
	}
	jobID := httpResp.Header.Get(jobIDHeader)
	if j := f.job(t, a, jobID); j.OrgID != a.OrgID || j.CreatedBy != a.ID {
		t.Fatalf("the job is of org %d by %d, want the caller's", j.OrgID, j.CreatedBy)
	}
	var opID string
	if err := f.DB.Bun.QueryRowContext(context.Background(), "SELECT operation_id::text FROM sa_job WHERE id = ?", jobID).Scan(&opID); err != nil {
		t.Fatal(err)
	}
	for _, req := range [][2]string{
		{"GET", "/sa-core/v1/jobs/" + jobID}, {"GET", "/sa-core/v1/jobs/" + jobID + "/output"},
		{"POST", "/sa-core/v1/jobs/" + jobID + "/cancel"}, {"POST", "/sa-core/v1/jobs/" + jobID + "/retry"},
		{"GET", "/sa-core/v1/deferred-operations/" + opID},
	} {
		if r := f.do(t, req[0], req[1], b.Tok, nil); r.StatusCode != http.StatusNotFound {
			t.Errorf("%s %s as another org's member: %s, want 404", req[0], req[1], r)
		}
	}
}
