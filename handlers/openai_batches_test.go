package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"

	"asterion/db/dbtest"
	"asterion/identity"
	"asterion/jobs/batch"
)

// uploadBatchFile uploads content as a batch input file through the SDK.
func uploadBatchFile(t *testing.T, client sdk.Client, content string) *sdk.FileObject {
	t.Helper()
	f, err := client.Files.New(context.Background(), sdk.FileNewParams{
		File: sdk.File(strings.NewReader(content), "input.jsonl", "application/jsonl"), Purpose: sdk.FilePurposeBatch})
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	return f
}

// chatLine is one request line of a chat-completions batch.
func chatLine(customID, text string) string {
	b, _ := json.Marshal(map[string]any{"custom_id": customID, "method": "POST", "url": "/v1/chat/completions",
		"body": map[string]any{"messages": []map[string]string{{"role": "user", "content": text}}}})
	return string(b)
}

// awaitBatch polls the batch through the SDK until it reaches one of the statuses want, and
// returns it; it fails the test if the batch ends otherwise or a minute passes.
func awaitBatch(t *testing.T, client sdk.Client, id string, want ...sdk.BatchStatus) *sdk.Batch {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		b, err := client.Batches.Get(ctx, id)
		if err != nil {
			t.Fatalf("get batch %s: %v", id, err)
		}
		for _, w := range want {
			if b.Status == w {
				return b
			}
		}
		switch b.Status {
		case sdk.BatchStatusCompleted, sdk.BatchStatusFailed, sdk.BatchStatusCancelled, sdk.BatchStatusExpired:
			t.Fatalf("batch %s ended %s, want %v (%s)", id, b.Status, want, b.RawJSON())
		}
		select {
		case <-ctx.Done():
			t.Fatalf("batch %s is %s after 2 minutes, want %v", id, b.Status, want)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// fileLines reads a file's content through the SDK, one JSON object a line.
func fileLines(t *testing.T, client sdk.Client, id string) []map[string]any {
	t.Helper()
	resp, err := client.Files.Content(context.Background(), id)
	if err != nil {
		t.Fatalf("content of %s: %v", id, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q of %s: %v", l, id, err)
		}
		out = append(out, m)
	}
	return out
}

// TestFrontDoorBatch: a file of three good lines, one malformed and one whose option the
// database cannot store, uploaded and run as a batch through the SDK, completes with three
// answered and two failed; the content of the input file is what was uploaded; each output
// line is the chat.completion of its line's job, at the lowest priority, with the job's usage;
// the two refused lines are in the error file.
func TestFrontDoorBatch(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "fb-a", "fb-member", identity.RoleMember)
	client := f.sdkClient(u.Tok)
	ctx := context.Background()

	// The fifth line is JSON, but its response_format holds what PostgreSQL's jsonb cannot
	// store: refused as a line, not a failure of the batch's step.
	nul := `{"custom_id":"nul","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"x"}],` +
		`"response_format":{"type":"json_object","note":"\u0000"}}}`
	content := strings.Join([]string{chatLine("one", "first #sim:tokens=3"), `{"custom_id": "broken", "method": `,
		chatLine("two", "second #sim:tokens=5"), chatLine("three", "third #sim:tokens=7"), nul}, "\n") + "\n"
	in := uploadBatchFile(t, client, content)
	if in.Purpose != "batch" || in.Bytes != int64(len(content)) || in.Filename != "input.jsonl" || !strings.HasPrefix(in.ID, "file-") {
		t.Fatalf("uploaded file %s", in.RawJSON())
	}
	got, err := client.Files.Get(ctx, in.ID)
	if err != nil || got.ID != in.ID || got.Bytes != in.Bytes {
		t.Fatalf("get file: %v %+v", err, got)
	}
	resp, err := client.Files.Content(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(raw) != content {
		t.Fatalf("content %q, want %q", raw, content)
	}

	b, err := client.Batches.New(ctx, sdk.BatchNewParams{InputFileID: in.ID, Endpoint: sdk.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: sdk.BatchNewParamsCompletionWindow24h, Metadata: map[string]string{"run": "test"}})
	if err != nil {
		t.Fatalf("create batch: %v", err)
	}
	if b.Status != sdk.BatchStatusValidating || b.InputFileID != in.ID || b.Metadata["run"] != "test" {
		t.Fatalf("new batch %s", b.RawJSON())
	}
	done := awaitBatch(t, client, b.ID, sdk.BatchStatusCompleted)
	if c := done.RequestCounts; c.Total != 5 || c.Completed != 3 || c.Failed != 2 {
		t.Fatalf("request counts %+v, want 5 total, 3 completed, 2 failed", c)
	}
	if done.OutputFileID == "" || done.ErrorFileID == "" || done.CompletedAt == 0 || done.InProgressAt == 0 || done.FinalizingAt == 0 {
		t.Fatalf("completed batch %s", done.RawJSON())
	}

	outs := fileLines(t, client, done.OutputFileID)
	if len(outs) != 3 {
		t.Fatalf("%d output lines, want 3", len(outs))
	}
	for i, want := range []string{"one", "two", "three"} {
		l := outs[i]
		r, _ := l["response"].(map[string]any)
		if l["custom_id"] != want || l["error"] != nil || r == nil || r["status_code"] != float64(200) {
			t.Fatalf("output line %d: %v", i, l)
		}
		jobID, _ := r["request_id"].(string)
		var body sdk.ChatCompletion
		rawBody, _ := json.Marshal(r["body"])
		if err := json.Unmarshal(rawBody, &body); err != nil {
			t.Fatal(err)
		}
		job := f.job(t, u, jobID)
		if job.State != "succeeded" || job.Priority != batch.Priority {
			t.Fatalf("job of line %s: %+v, want succeeded at priority %d", want, job, batch.Priority)
		}
		input, output := f.attemptsUsage(t, jobID)
		if output == 0 || body.Usage.PromptTokens != input || body.Usage.CompletionTokens != output ||
			body.Usage.TotalTokens != input+output {
			t.Errorf("line %s usage %+v, want the job's %d + %d", want, body.Usage, input, output)
		}
		if body.Object != "chat.completion" || len(body.Choices) != 1 || body.Choices[0].Message.Content == "" {
			t.Errorf("line %s body %s", want, rawBody)
		}
		var door string
		if err := f.DB.Bun.QueryRowContext(ctx, "SELECT door FROM sa_job_door WHERE job_id = ?", jobID).Scan(&door); err != nil ||
			door != "batch" {
			t.Errorf("door of job %s: %q (%v), want batch", jobID, door, err)
		}
	}
	errs := fileLines(t, client, done.ErrorFileID)
	if len(errs) != 2 || errs[0]["response"] != nil || errs[1]["response"] != nil {
		t.Fatalf("error lines %v, want two", errs)
	}
	if e, _ := errs[0]["error"].(map[string]any); e == nil || e["code"] != batch.CodeInvalidJSON || e["message"] == "" {
		t.Fatalf("error line %v", errs[0])
	}
	if e, _ := errs[1]["error"].(map[string]any); errs[1]["custom_id"] != "nul" || e == nil || e["code"] != batch.CodeInvalidValue ||
		!strings.Contains(fmt.Sprint(e["message"]), "response_format") {
		t.Fatalf("error line %v, want the response_format's line refused", errs[1])
	}

	// The batch is a deferred operation, completed with its counts.
	var status string
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT o.status FROM sa_operation o JOIN sa_batch b ON b.operation_id = o.id WHERE b.id = ?",
		b.ID).Scan(&status); err != nil || status != "completed" {
		t.Errorf("the batch's operation is %q (%v), want completed", status, err)
	}

	// A deleted file is gone.
	if del, err := client.Files.Delete(ctx, in.ID); err != nil || !del.Deleted {
		t.Fatalf("delete: %v %+v", err, del)
	}
	_, err = client.Files.Get(ctx, in.ID)
	asAPIError(t, "get of a deleted file", err, http.StatusNotFound)
}

// TestFrontDoorBatchCancel: a batch whose jobs are slow is cancelled while it runs: it is
// cancelling, then cancelled, every request failed with batch_cancelled and its jobs
// cancelled; a second cancel of the ended batch is a 409.
func TestFrontDoorBatchCancel(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "fbc-a", "fbc-member", identity.RoleMember)
	client := f.sdkClient(u.Tok)
	ctx := context.Background()
	var lines []string
	for i := range 6 {
		lines = append(lines, chatLine(fmt.Sprintf("slow-%d", i), "take your time #sim:latency=120s"))
	}
	in := uploadBatchFile(t, client, strings.Join(lines, "\n"))
	b, err := client.Batches.New(ctx, sdk.BatchNewParams{InputFileID: in.ID, Endpoint: sdk.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: sdk.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	awaitBatch(t, client, b.ID, sdk.BatchStatusInProgress)
	// Wait until a job of the batch runs, so the cancel cuts a provider call too.
	dbtest.WaitFor(t, time.Minute, "a job of the batch to run", func() bool {
		var running int
		if err := f.DB.Bun.QueryRowContext(ctx, `SELECT count(*) FROM sa_batch_request r JOIN sa_job j ON j.id = r.job_id
			WHERE r.batch_id = ? AND j.state = 'running'`, b.ID).Scan(&running); err != nil {
			t.Fatal(err)
		}
		return running > 0
	})
	c, err := client.Batches.Cancel(ctx, b.ID)
	if err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if c.Status != sdk.BatchStatusCancelling && c.Status != sdk.BatchStatusCancelled {
		t.Fatalf("cancelled batch is %s", c.Status)
	}
	done := awaitBatch(t, client, b.ID, sdk.BatchStatusCancelled)
	if rc := done.RequestCounts; rc.Total != 6 || rc.Completed != 0 || rc.Failed != 6 || done.CancelledAt == 0 || done.OutputFileID != "" {
		t.Fatalf("cancelled batch %s", done.RawJSON())
	}
	for _, l := range fileLines(t, client, done.ErrorFileID) {
		if e, _ := l["error"].(map[string]any); e == nil || e["code"] != "batch_cancelled" {
			t.Fatalf("error line %v, want batch_cancelled", l)
		}
	}
	var live int
	if err := f.DB.Bun.QueryRowContext(ctx, `SELECT count(*) FROM sa_batch_request r JOIN sa_job j ON j.id = r.job_id
		WHERE r.batch_id = ? AND j.state <> 'cancelled'`, b.ID).Scan(&live); err != nil || live != 0 {
		t.Fatalf("%d jobs of the cancelled batch are not cancelled (%v)", live, err)
	}
	_, err = client.Batches.Cancel(ctx, b.ID)
	asAPIError(t, "cancel of a cancelled batch", err, http.StatusConflict)
}

// TestFrontDoorBatchIsolationAndInput: another org's member gets 404 for a file and a batch
// (read, content, delete, cancel, a batch over the file); bad input is a 400; the list pages
// newest first with after and limit.
func TestFrontDoorBatchIsolationAndInput(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "fbi-a", "fbi-member", identity.RoleMember)
	other := f.user(t, "fbi-b", "fbi-other", identity.RoleMember)
	client, stranger := f.sdkClient(u.Tok), f.sdkClient(other.Tok)
	ctx := context.Background()
	in := uploadBatchFile(t, client, chatLine("a", "hello #sim:tokens=2"))

	var ids []string
	for range 3 {
		b, err := client.Batches.New(ctx, sdk.BatchNewParams{InputFileID: in.ID, Endpoint: sdk.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: sdk.BatchNewParamsCompletionWindow24h})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, b.ID)
	}

	_, err := stranger.Files.Get(ctx, in.ID)
	asAPIError(t, "another org's file", err, http.StatusNotFound)
	_, err = stranger.Files.Content(ctx, in.ID)
	asAPIError(t, "another org's file content", err, http.StatusNotFound)
	_, err = stranger.Files.Delete(ctx, in.ID)
	asAPIError(t, "delete of another org's file", err, http.StatusNotFound)
	_, err = stranger.Batches.Get(ctx, ids[0])
	asAPIError(t, "another org's batch", err, http.StatusNotFound)
	_, err = stranger.Batches.Cancel(ctx, ids[0])
	asAPIError(t, "cancel of another org's batch", err, http.StatusNotFound)
	_, err = stranger.Batches.New(ctx, sdk.BatchNewParams{InputFileID: in.ID, Endpoint: sdk.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: sdk.BatchNewParamsCompletionWindow24h})
	asAPIError(t, "a batch over another org's file", err, http.StatusBadRequest)
	if page, err := stranger.Batches.List(ctx, sdk.BatchListParams{}); err != nil || len(page.Data) != 0 {
		t.Fatalf("another org's list: %v %d", err, len(page.Data))
	}

	// Bad input.
	_, err = client.Batches.New(ctx, sdk.BatchNewParams{InputFileID: in.ID, Endpoint: sdk.BatchNewParamsEndpointV1Embeddings,
		CompletionWindow: sdk.BatchNewParamsCompletionWindow24h})
	if e := asAPIError(t, "an endpoint no batch runs", err, http.StatusBadRequest); e.Param != "endpoint" {
		t.Errorf("param %q, want endpoint", e.Param)
	}
	_, err = client.Files.New(ctx, sdk.FileNewParams{File: sdk.File(strings.NewReader("{}\n"), "x.jsonl", "application/jsonl"),
		Purpose: sdk.FilePurposeAssistants})
	if e := asAPIError(t, "a file of another purpose", err, http.StatusBadRequest); e.Param != "purpose" {
		t.Errorf("param %q, want purpose", e.Param)
	}
	_, err = client.Files.New(ctx, sdk.FileNewParams{File: sdk.File(strings.NewReader(strings.Repeat("{}\n", batch.MaxLines+1)),
		"big.jsonl", "application/jsonl"), Purpose: sdk.FilePurposeBatch})
	if e := asAPIError(t, "a file of too many lines", err, http.StatusBadRequest); e.Code != "too_many_lines" {
		t.Errorf("code %q, want too_many_lines", e.Code)
	}
	r := f.do(t, "POST", "/v1/batches", u.Tok, map[string]any{"input_file_id": 7})
	if r.StatusCode != http.StatusBadRequest || !strings.Contains(string(r.Body), `"type":"invalid_request_error"`) {
		t.Errorf("a batch of a bad body: %d %s", r.StatusCode, r.Body)
	}
	_, err = client.Batches.List(ctx, sdk.BatchListParams{After: sdk.String("batch_nope")})
	asAPIError(t, "a list after no batch", err, http.StatusBadRequest)

	// Paging, newest first.
	first, err := client.Batches.List(ctx, sdk.BatchListParams{Limit: sdk.Int(2)})
	if err != nil || len(first.Data) != 2 || !first.HasMore || first.Data[0].ID != ids[2] || first.Data[1].ID != ids[1] {
		t.Fatalf("first page: %v %s", err, first.RawJSON())
	}
	next, err := first.GetNextPage()
	if err != nil || next == nil || len(next.Data) != 1 || next.HasMore || next.Data[0].ID != ids[0] {
		t.Fatalf("next page: %v %+v", err, next)
	}
}

// matrixBatch is a batch of org A's member u for the authorization matrix.
func matrixBatch(t *testing.T, f *liveServer, u liveUser) string {
	t.Helper()
	client := f.sdkClient(u.Tok)
	in := uploadBatchFile(t, client, chatLine("m", "matrix batch"))
	b, err := client.Batches.New(context.Background(), sdk.BatchNewParams{InputFileID: in.ID,
		Endpoint: sdk.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: sdk.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	return b.ID
}

// TestFrontDoorBatchLinesPassAdmission: with the org's budget spent, a batch is accepted but
// each of its lines is refused by the one admission, as any submit is: every line is in the
// error file with OpenAI's insufficient_quota code, and no job is written. Another org's batch
// runs.
func TestFrontDoorBatchLinesPassAdmission(t *testing.T) {
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "fbadm-a", "fbadm-member", identity.RoleMember)
	other := f.user(t, "fbadm-b", "fbadm-other", identity.RoleMember)
	ctx := context.Background()
	// A slow job's reservation holds the whole budget while the batch runs.
	f.submit(t, u, "holds the budget #sim:latency=120s")
	if _, err := f.DB.Bun.ExecContext(ctx, "INSERT INTO sa_org_budget (org_id, tokens, period) VALUES (?, 1, 'day')", u.OrgID); err != nil {
		t.Fatal(err)
	}
	run := func(who liveUser) *sdk.Batch {
		client := f.sdkClient(who.Tok)
		in := uploadBatchFile(t, client, chatLine("x", "one #sim:tokens=2")+"\n"+chatLine("y", "two #sim:tokens=2")+"\n")
		b, err := client.Batches.New(ctx, sdk.BatchNewParams{InputFileID: in.ID, Endpoint: sdk.BatchNewParamsEndpointV1ChatCompletions,
			CompletionWindow: sdk.BatchNewParamsCompletionWindow24h})
		if err != nil {
			t.Fatal(err)
		}
		return awaitBatch(t, client, b.ID, sdk.BatchStatusCompleted)
	}
	refused := run(u)
	if rc := refused.RequestCounts; rc.Total != 2 || rc.Failed != 2 || refused.OutputFileID != "" {
		t.Fatalf("batch past the budget: %s", refused.RawJSON())
	}
	for _, l := range fileLines(t, f.sdkClient(u.Tok), refused.ErrorFileID) {
		if e, _ := l["error"].(map[string]any); e == nil || e["code"] != "insufficient_quota" {
			t.Errorf("error line %v, want insufficient_quota", l)
		}
	}
	var n int
	if err := f.DB.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_job WHERE org_id = ?", u.OrgID).Scan(&n); err != nil || n != 1 {
		t.Errorf("%d jobs in the org (%v), want only the one holding the budget", n, err)
	}
	if ok := run(other); ok.RequestCounts.Completed != 2 {
		t.Errorf("another org's batch: %s", ok.RawJSON())
	}
}
