package handlers

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/jobs/output"
	"asterion/jobs/provider"
	"asterion/jobs/usage"
)

// secondFrontDoor serves the same database from another server process, as secondServer does,
// with a usage meter as every served process has, so that it answers a response's usage.
func secondFrontDoor(t *testing.T, f *liveServer) *liveServer {
	t.Helper()
	log := testLogger()
	m, err := usage.New(usage.Config{DB: f.DB.Bun, StatusTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	// It runs no workers: its provider is never called.
	svc, err := jobs.NewService(jobs.Config{DB: f.DB.Bun, Provider: provider.NewSim(provider.SimConfig{}), Logger: log, Usage: m})
	if err != nil {
		t.Fatal(err)
	}
	hub := feed.NewHub(f.DB.Pool, f.DB.Bun, log)
	t.Cleanup(hub.Start(context.Background()))
	out, err := output.NewHub(output.HubConfig{DB: f.DB.Bun, Pool: f.DB.Pool, Tag: "second-front-door", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(out.Start(context.Background()))
	<-hub.Ready()
	<-out.Ready()
	srv := New(Deps{Identity: f.IDs, Jobs: svc, Hub: hub, Output: out, Logger: log,
		Ready: func(ctx context.Context) error { return f.DB.Bun.PingContext(ctx) }})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	return &liveServer{Base: "http://" + ln.Addr().String(), client: f.client}
}

// responseText is the text of the response entity of a job, read from the table.
func (f *liveServer) responseText(t *testing.T, u liveUser, jobID string) string {
	t.Helper()
	job := f.job(t, u, jobID)
	if job.ResponseID == nil {
		t.Fatalf("job %s (%s) has no response", jobID, job.State)
	}
	var text string
	if err := f.DB.Bun.QueryRowContext(context.Background(), "SELECT body FROM sa_entity WHERE id = ?", *job.ResponseID).
		Scan(&text); err != nil {
		t.Fatal(err)
	}
	return text
}

func textInput(s string) responses.ResponseNewParamsInputUnion {
	return responses.ResponseNewParamsInputUnion{OfString: sdk.String(s)}
}

// TestResponsesCreateWaiting: a response the caller waits for is a job whose conversation is
// the instructions and the input; its output is the job's response, its usage the job's, its
// metadata and instructions echoed, and GET answers the same from another server process. An
// answer that reached max_output_tokens is incomplete.
func TestResponsesCreateWaiting(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, frontDoorConfig(t))
	second := secondFrontDoor(t, f)
	u := f.user(t, "rs-a", "rs-waiter", identity.RoleMember)
	client := f.sdkClient(u.Tok)
	ctx := context.Background()

	var httpResp *http.Response
	got, err := client.Responses.New(ctx, responses.ResponseNewParams{
		Instructions: sdk.String("Answer in few words."),
		Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
			responses.ResponseInputItemParamOfMessage("an earlier question", responses.EasyInputMessageRoleUser),
			responses.ResponseInputItemParamOfMessage("an earlier answer", responses.EasyInputMessageRoleAssistant),
			responses.ResponseInputItemParamOfMessage("count for me #sim:tokens=6", responses.EasyInputMessageRoleUser),
		}},
		Temperature: sdk.Float(0.3),
		Metadata:    map[string]string{"app": "test", "run": "1"},
	}, option.WithResponseInto(&httpResp), option.WithJSONSet("tools", []any{}), option.WithJSONSet("store", true),
		option.WithJSONSet("reasoning", map[string]any{"effort": "low"}))
	if err != nil {
		t.Fatalf("create: %v", err)
	}
	jobID := httpResp.Header.Get(jobIDHeader)
	if jobID == "" || got.ID != "resp_"+strings.ReplaceAll(jobID, "-", "") {
		t.Fatalf("response id %q for job %q", got.ID, jobID)
	}
	want := f.responseText(t, u, jobID)
	if got.Status != "completed" || got.Object != "response" || got.OutputText() != want || len(got.Output) != 1 ||
		got.Output[0].Role != "assistant" || got.Output[0].Content[0].Type != "output_text" {
		t.Errorf("response %s, want completed with the job's response %q", got.RawJSON(), want)
	}
	if got.Instructions.OfString != "Answer in few words." || got.Metadata["app"] != "test" || got.Temperature != 0.3 ||
		got.Model != f.Jobs.Admission().Models()[0] || got.Error.Code != "" {
		t.Errorf("echoed fields %s", got.RawJSON())
	}
	in, out := f.attemptsUsage(t, jobID)
	if got.Usage.InputTokens != in || got.Usage.OutputTokens != out || got.Usage.TotalTokens != in+out || out == 0 {
		t.Errorf("usage %+v, want the attempts' %d + %d", got.Usage, in, out)
	}
	doc := mustDecode[struct {
		Messages []struct{ Role, Content string } `json:"messages"`
	}](t, f.do(t, "GET", "/sa-core/v1/jobs/"+jobID, u.Tok, nil).Body)
	if len(doc.Messages) != 4 || doc.Messages[0].Role != "system" || doc.Messages[0].Content != "Answer in few words." ||
		doc.Messages[2].Role != "assistant" {
		t.Errorf("the job's messages %+v", doc.Messages)
	}

	secondClient := second.sdkClient(u.Tok)
	again, err := secondClient.Responses.Get(ctx, got.ID, responses.ResponseGetParams{})
	if err != nil {
		t.Fatalf("get on the second server: %v", err)
	}
	if again.RawJSON() != got.RawJSON() {
		t.Errorf("GET on another process\n%s\nwant the created response\n%s", again.RawJSON(), got.RawJSON())
	}

	cut, err := client.Responses.New(ctx, responses.ResponseNewParams{Input: textInput("#sim:tokens=9 long"),
		MaxOutputTokens: sdk.Int(4)}, option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatalf("create with max_output_tokens: %v", err)
	}
	if cut.Status != "incomplete" || cut.IncompleteDetails.Reason != "max_output_tokens" || len(strings.Fields(cut.OutputText())) != 4 ||
		cut.MaxOutputTokens != 4 || cut.OutputText() != f.responseText(t, u, httpResp.Header.Get(jobIDHeader)) {
		t.Errorf("a response cut by max_output_tokens: %s", cut.RawJSON())
	}

	failed, err := client.Responses.New(ctx, responses.ResponseNewParams{Input: textInput("#sim:fail=provider_4xx")})
	if err != nil {
		t.Fatalf("a failing response: %v", err)
	}
	if failed.Status != "failed" || failed.Error.Code != "provider_4xx" || failed.Error.Message == "" || len(failed.Output) != 0 {
		t.Errorf("a failed job's response: %s", failed.RawJSON())
	}
}

// TestResponsesBackground: a background response answers at once, before its job ends; GET
// polls it to completed. One still running is cancelled (its job too) and answers cancelled,
// again on a second cancel; cancelling a response made without background is refused, as by
// OpenAI.
func TestResponsesBackground(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "rs-a", "rs-background", identity.RoleMember)
	client := f.sdkClient(u.Tok)
	ctx := context.Background()

	var httpResp *http.Response
	bg, err := client.Responses.New(ctx, responses.ResponseNewParams{Input: textInput("slow #sim:hang"), Background: sdk.Bool(true),
		Metadata: map[string]string{"k": "v"}}, option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatalf("create in the background: %v", err)
	}
	if (bg.Status != "queued" && bg.Status != "in_progress") || !bg.Background || bg.Metadata["k"] != "v" || bg.Usage.TotalTokens != 0 {
		t.Fatalf("background answer %s, want queued or in progress", bg.RawJSON())
	}
	jobID := httpResp.Header.Get(jobIDHeader)
	f.waitJob(t, u, jobID, "running")
	polled, err := client.Responses.Get(ctx, bg.ID, responses.ResponseGetParams{})
	if err != nil || polled.Status != "in_progress" {
		t.Fatalf("poll a running response: %v %s", err, polled.RawJSON())
	}
	cancelled, err := client.Responses.Cancel(ctx, bg.ID)
	if err != nil || cancelled.Status != "cancelled" || cancelled.Metadata["k"] != "v" {
		t.Fatalf("cancel: %v %s", err, cancelled.RawJSON())
	}
	if j := f.job(t, u, jobID); j.State != "cancelled" {
		t.Errorf("the cancelled response's job is %s", j.State)
	}
	if again, err := client.Responses.Cancel(ctx, bg.ID); err != nil || again.Status != "cancelled" {
		t.Errorf("cancel again: %v %s", err, again.RawJSON())
	}

	quick, err := client.Responses.New(ctx, responses.ResponseNewParams{Input: textInput("#sim:latency=400ms #sim:tokens=5"),
		Background: sdk.Bool(true)}, option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatal(err)
	}
	f.waitJob(t, u, httpResp.Header.Get(jobIDHeader), "succeeded")
	done, err := client.Responses.Get(ctx, quick.ID, responses.ResponseGetParams{})
	if err != nil || done.Status != "completed" || done.OutputText() != f.responseText(t, u, httpResp.Header.Get(jobIDHeader)) {
		t.Fatalf("poll a finished response: %v %s", err, done.RawJSON())
	}
	if over, err := client.Responses.Cancel(ctx, quick.ID); err != nil || over.Status != "completed" {
		t.Errorf("cancel a finished background response: %v %s, want it as it is", err, over.RawJSON())
	}

	waited, err := client.Responses.New(ctx, responses.ResponseNewParams{Input: textInput("hello")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.Responses.Cancel(ctx, waited.ID)
	if e := asAPIError(t, "cancel a response made without background", err, 400); e.Type != "invalid_request_error" {
		t.Errorf("cancel without background: %s", e.RawJSON())
	}
}

// TestResponsesStayInTheirOrg: every id route answers another org's member 404, OpenAI's
// not-found shape, as for an id that does not exist.
func TestResponsesStayInTheirOrg(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, frontDoorConfig(t))
	a := f.user(t, "rs-a", "rs-owner", identity.RoleMember)
	b := f.user(t, "rs-b", "rs-other", identity.RoleMember)
	ctx := context.Background()
	owner := f.sdkClient(a.Tok)
	mine, err := owner.Responses.New(ctx, responses.ResponseNewParams{Input: textInput("#sim:hang mine"),
		Background: sdk.Bool(true)})
	if err != nil {
		t.Fatal(err)
	}
	other := f.sdkClient(b.Tok)
	_, err = other.Responses.Get(ctx, mine.ID, responses.ResponseGetParams{})
	if e := asAPIError(t, "get another org's response", err, 404); e.Type != "invalid_request_error" {
		t.Errorf("get: %s", e.RawJSON())
	}
	_, err = other.Responses.Cancel(ctx, mine.ID)
	asAPIError(t, "cancel another org's response", err, 404)
	stream := other.Responses.GetStreaming(ctx, mine.ID, responses.ResponseGetParams{StartingAfter: sdk.Int(0)})
	if stream.Next() {
		t.Errorf("another org's member reads an event: %s", stream.Current().RawJSON())
	}
	asAPIError(t, "stream another org's response", stream.Err(), 404)
	stream.Close()
	for _, id := range []string{"resp_nothex", strings.Replace(mine.ID, "resp_", "chatcmpl-", 1), "resp_" + strings.Repeat("0", 32)} {
		_, err = owner.Responses.Get(ctx, id, responses.ResponseGetParams{})
		asAPIError(t, "get "+id, err, 404)
	}
	if got, err := owner.Responses.Get(ctx, mine.ID, responses.ResponseGetParams{}); err != nil || got.ID != mine.ID {
		t.Errorf("the owner's get: %v", err)
	}
}

// TestResponsesBadInput: a malformed request is the SDK's BadRequest naming the parameter (an
// unknown model its 404), and writes no job.
func TestResponsesBadInput(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "rs-a", "rs-bad", identity.RoleMember)
	client := f.sdkClient(u.Tok)
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		params responses.ResponseNewParams
		opts   []option.RequestOption
		param  string
	}{
		{"input of the wrong type", responses.ResponseNewParams{Input: textInput("x")}, []option.RequestOption{option.WithJSONSet("input", 5)}, "input"},
		{"no input", responses.ResponseNewParams{}, nil, "input"},
		{"no user message", responses.ResponseNewParams{Input: responses.ResponseNewParamsInputUnion{
			OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("a", responses.EasyInputMessageRoleAssistant)}}}, nil, "input"},
		{"max_output_tokens out of range", responses.ResponseNewParams{Input: textInput("x"), MaxOutputTokens: sdk.Int(0)}, nil, "max_output_tokens"},
		{"an unknown text format", responses.ResponseNewParams{Input: textInput("x")},
			[]option.RequestOption{option.WithJSONSet("text", map[string]any{"format": map[string]any{"type": "yaml"}})}, "text.format.type"},
		{"a text format holding a NUL", responses.ResponseNewParams{Input: textInput("x")},
			[]option.RequestOption{option.WithJSONSet("text", map[string]any{"format": map[string]any{"type": "json_schema",
				"name": "n", "schema": map[string]any{"type": "object", "description": "\x00"}}})}, "text.format"},
		{"an image part", responses.ResponseNewParams{Input: textInput("x")},
			[]option.RequestOption{option.WithJSONSet("input", []any{map[string]any{"role": "user",
				"content": []any{map[string]any{"type": "input_image", "image_url": "x"}}}})}, "input[0].content[0].type"},
		{"metadata of the wrong type", responses.ResponseNewParams{Input: textInput("x")},
			[]option.RequestOption{option.WithJSONSet("metadata", map[string]any{"n": 1})}, "metadata"},
	} {
		_, err := client.Responses.New(ctx, tc.params, tc.opts...)
		if e := asAPIError(t, tc.name, err, 400); e.Param != tc.param || e.Type != "invalid_request_error" {
			t.Errorf("%s: %s, want param %q", tc.name, e.RawJSON(), tc.param)
		}
	}
	_, err := client.Responses.New(ctx, responses.ResponseNewParams{Input: textInput("x"), Model: "gpt-nope"})
	if e := asAPIError(t, "unknown model", err, 404); e.Code != "model_not_found" {
		t.Errorf("unknown model: %s", e.RawJSON())
	}
	_, err = client.Responses.Get(ctx, "resp_x", responses.ResponseGetParams{}, option.WithQuery("starting_after", "-1"))
	asAPIError(t, "get of a malformed id", err, 404)
	var jobsWritten int
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_job").Scan(&jobsWritten); err != nil || jobsWritten != 0 {
		t.Errorf("%d jobs written by refused requests (%v)", jobsWritten, err)
	}
}

// TestResponsesStreamResumesOnAnotherProcess: a background stream dropped after three deltas
// leaves its job running; GET ?stream=true&starting_after=N on another server process goes on
// from event N+1: the sequence numbers run on with none missed or repeated, the deltas make the
// job's response, and the stream ends with response.completed.
func TestResponsesStreamResumesOnAnotherProcess(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, frontDoorConfig(t))
	second := secondFrontDoor(t, f)
	u := f.user(t, "rs-a", "rs-streamer", identity.RoleMember)
	ctx, drop := context.WithCancel(context.Background())
	var httpResp *http.Response
	client := f.sdkClient(u.Tok)
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
		Input: textInput("#sim:latency=3s #sim:tokens=30"), Background: sdk.Bool(true)}, option.WithResponseInto(&httpResp))
	var seqs []int64
	var types []string
	var text strings.Builder
	id := ""
	for deltas := 0; deltas < 3 && stream.Next(); {
		ev := stream.Current()
		seqs, types = append(seqs, ev.SequenceNumber), append(types, ev.Type)
		if ev.Type == "response.created" {
			id = ev.Response.ID
		}
		if ev.Type == "response.output_text.delta" {
			deltas++
			text.WriteString(ev.Delta)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	drop()
	stream.Close()
	wantHead := []string{"response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
		"response.output_text.delta", "response.output_text.delta", "response.output_text.delta"}
	if strings.Join(types, " ") != strings.Join(wantHead, " ") || id == "" {
		t.Fatalf("events before the drop %v (response %q), want %v", types, id, wantHead)
	}
	jobID := httpResp.Header.Get(jobIDHeader)
	last := seqs[len(seqs)-1]

	secondClient := second.sdkClient(u.Tok)
	resumed := secondClient.Responses.GetStreaming(context.Background(), id,
		responses.ResponseGetParams{StartingAfter: sdk.Int(last)})
	defer resumed.Close()
	var final responses.Response
	doneText := ""
	for resumed.Next() {
		ev := resumed.Current()
		seqs, types = append(seqs, ev.SequenceNumber), append(types, ev.Type)
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.output_text.done":
			doneText = ev.Text
		case "response.completed":
			final = ev.Response
		}
	}
	if err := resumed.Err(); err != nil {
		t.Fatalf("resumed stream: %v", err)
	}
	for i, s := range seqs {
		if s != int64(i) {
			t.Fatalf("sequence numbers %v, want 0, 1, 2, ... with none missed or repeated", seqs)
		}
	}
	n := len(types)
	if n < 11 || strings.Join(types[n-4:], " ") != "response.output_text.done response.content_part.done response.output_item.done response.completed" {
		t.Fatalf("events %v, want the deltas then the four that end the stream", types)
	}
	want := f.responseText(t, u, jobID)
	if text.String() != want || doneText != want || final.OutputText() != want || final.Status != "completed" {
		t.Errorf("deltas %q, done %q, final %q (%s), want the job's response %q", text.String(), doneText, final.OutputText(),
			final.Status, want)
	}
	if in, out := f.attemptsUsage(t, jobID); final.Usage.InputTokens != in || final.Usage.OutputTokens != out || out == 0 {
		t.Errorf("the final usage %+v, want the attempts' %d + %d", final.Usage, in, out)
	}
	if j := f.job(t, u, jobID); j.State != "succeeded" {
		t.Errorf("the job of a dropped background stream is %s, want it to have run on", j.State)
	}
}

// TestResponsesStreamCallerThatLeavesCancelsItsJob: the caller of a streamed response made
// without background owns its job: leaving cancels it.
func TestResponsesStreamCallerThatLeavesCancelsItsJob(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "rs-a", "rs-leaver", identity.RoleMember)
	ctx, cancel := context.WithCancel(context.Background())
	var httpResp *http.Response
	client := f.sdkClient(u.Tok)
	stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{Input: textInput("wait #sim:hang")},
		option.WithResponseInto(&httpResp))
	if !stream.Next() || stream.Current().Type != "response.created" {
		t.Fatalf("no response.created: %v", stream.Err())
	}
	jobID := httpResp.Header.Get(jobIDHeader)
	f.waitJob(t, u, jobID, "running")
	cancel()
	stream.Close()
	f.waitJob(t, u, jobID, "cancelled")
}
