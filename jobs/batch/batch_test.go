package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"testing"

	"asterion/jobs"
	"asterion/jobs/jobstest"
)

// textEndpoint reads a line's body {"text"} as one user message and answers the text back.
type textEndpoint struct{}

func (textEndpoint) Decode(body []byte) (Prompt, *LineError) {
	var r struct{ Text string }
	if json.Unmarshal(body, &r) != nil || r.Text == "" {
		return Prompt{}, &LineError{Code: "invalid_request", Message: "no text"}
	}
	return Prompt{Messages: []jobs.Message{{Role: jobs.RoleUser, Content: r.Text}}}, nil
}

func (textEndpoint) Answer(a Answered) ([]byte, error) { return json.Marshal(a.Text) }

// textBatches is the batches of e's service over the one endpoint /v1/text.
func textBatches(t *testing.T, e *jobstest.Env) *Batches {
	t.Helper()
	b, err := New(Config{Jobs: e.S, Endpoints: map[string]Endpoint{"/v1/text": textEndpoint{}}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// form is a multipart upload of content as a file of purpose batch.
func form(t *testing.T, content []byte) *multipart.Reader {
	t.Helper()
	var buf bytes.Buffer
	w := multipart.NewWriter(&buf)
	fw, err := w.CreateFormFile("file", "in.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fw.Write(content)
	_ = w.WriteField("purpose", PurposeBatch)
	_ = w.Close()
	return multipart.NewReader(&buf, w.Boundary())
}

// TestExpansionIsChunkedAndResumable: a batch of 2,500 lines becomes jobs ChunkLines per step,
// each step's progress recorded, so a second owner (a process started after a crash) goes on
// from the next line and writes no line twice; every job is at the batch priority with its
// door. Its input cannot be deleted until every line is read. Cancelled, the batch cancels every
// job and writes one error line per request.
func TestExpansionIsChunkedAndResumable(t *testing.T) {
	e := jobstest.NewEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	cfg := Config{Jobs: e.S, Endpoints: map[string]Endpoint{"/v1/text": textEndpoint{}}}
	b, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var content bytes.Buffer
	const n = 2500
	for i := range n {
		fmt.Fprintf(&content, `{"custom_id":"c%d","method":"POST","url":"/v1/text","body":{"text":"line %d"}}`+"\n", i, i)
	}
	f, err := b.Upload(ctx, e.V, form(t, content.Bytes()))
	if err != nil || f.LineCount != n || f.Bytes != int64(content.Len()) {
		t.Fatalf("upload: %v %+v", err, f)
	}
	bt, err := b.Create(ctx, CreateRequest{Viewer: e.V, InputFileID: f.ID, Endpoint: "/v1/text", CompletionWindow: Window})
	if err != nil {
		t.Fatal(err)
	}
	counts := func() (expanded, requests, jobsN, doors int) {
		t.Helper()
		if err := e.D.Bun.QueryRowContext(ctx, `SELECT b.expanded_lines,
			(SELECT count(*) FROM sa_batch_request r WHERE r.batch_id = b.id),
			(SELECT count(*) FROM sa_batch_request r JOIN sa_job j ON j.id = r.job_id WHERE r.batch_id = b.id AND j.priority = ?),
			(SELECT count(*) FROM sa_batch_request r JOIN sa_job_door d ON d.job_id = r.job_id WHERE r.batch_id = b.id AND d.door = 'batch')
			FROM sa_batch b WHERE b.id = ?`, Priority, bt.ID).Scan(&expanded, &requests, &jobsN, &doors); err != nil {
			t.Fatal(err)
		}
		return
	}
	// The input cannot be deleted while the batch still reads it: validating, and part way.
	undeletable := func(when string) {
		t.Helper()
		if err := b.DeleteFile(ctx, e.V, f.ID); !errors.Is(err, ErrConflict) {
			t.Fatalf("delete of the input %s: %v, want ErrConflict", when, err)
		}
	}
	undeletable("while the batch validates")
	if more, err := b.step(ctx, bt.ID); err != nil || !more {
		t.Fatalf("validating step: %v %v", more, err)
	}
	owner := b
	for i, want := range []int{1000, 2000, 2500} {
		if i == 1 {
			// Another process takes over, as after a crash: only the recorded progress carries.
			if owner, err = New(cfg); err != nil {
				t.Fatal(err)
			}
		}
		if more, err := owner.step(ctx, bt.ID); err != nil || !more {
			t.Fatalf("expansion step %d: %v %v", i, more, err)
		}
		if exp, req, js, doors := counts(); exp != want || req != want || js != want || doors != want {
			t.Fatalf("after step %d: %d expanded, %d requests, %d jobs at priority %d, %d doors; want %d each",
				i, exp, req, js, Priority, doors, want)
		}
		if want < n {
			undeletable(fmt.Sprintf("with %d of its %d lines read", want, n))
		}
	}
	if more, err := owner.step(ctx, bt.ID); err != nil || more {
		t.Fatalf("a step with every job queued: %v %v, want nothing more to do now", more, err)
	}
	// Every line read, the input is the user's to delete; the batch runs on without it.
	if err := b.DeleteFile(ctx, e.V, f.ID); err != nil {
		t.Fatalf("delete of the input once read: %v", err)
	}

	c, err := owner.CancelBatch(ctx, e.V, bt.ID, jobs.Actor{Name: "test"})
	if err != nil || c.Status != StatusCancelling {
		t.Fatalf("cancel: %v %+v", err, c)
	}
	for steps := 0; c.Status != StatusCancelled; steps++ {
		if steps > 10 {
			t.Fatalf("the batch is %s after %d steps", c.Status, steps)
		}
		if _, err := owner.step(ctx, bt.ID); err != nil {
			t.Fatal(err)
		}
		if c, err = owner.Batch(ctx, e.V, bt.ID); err != nil {
			t.Fatal(err)
		}
	}
	if c.FailedCount != n || c.CompletedCount != 0 || c.ErrorFileID == nil || c.OutputFileID != nil {
		t.Fatalf("cancelled batch %+v", c)
	}
	var live, errLines int
	if err := e.D.Bun.QueryRowContext(ctx, `SELECT count(*) FROM sa_batch_request r JOIN sa_job j ON j.id = r.job_id
		WHERE r.batch_id = ? AND j.state <> 'cancelled'`, bt.ID).Scan(&live); err != nil || live != 0 {
		t.Fatalf("%d jobs not cancelled (%v)", live, err)
	}
	if err := e.D.Bun.QueryRowContext(ctx, `SELECT line_count FROM sa_file WHERE id = ?`, *c.ErrorFileID).Scan(&errLines); err != nil ||
		errLines != n {
		t.Fatalf("error file of %d lines (%v), want %d", errLines, err, n)
	}
}

// TestUploadRefusals: a form breaking a rule is an *InvalidError naming its field, and leaves
// no file behind.
func TestUploadRefusals(t *testing.T) {
	e := jobstest.NewEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	b := textBatches(t, e)
	noPurpose := func() *multipart.Reader {
		var buf bytes.Buffer
		w := multipart.NewWriter(&buf)
		fw, _ := w.CreateFormFile("file", "in.jsonl")
		_, _ = fw.Write([]byte("{}\n"))
		_ = w.Close()
		return multipart.NewReader(&buf, w.Boundary())
	}
	for name, c := range map[string]struct {
		form        *multipart.Reader
		param, code string
	}{
		"no purpose":     {noPurpose(), "purpose", "missing_required_parameter"},
		"empty file":     {form(t, nil), "file", "invalid_file"},
		"too many lines": {form(t, bytes.Repeat([]byte("{}\n"), MaxLines+1)), "file", "too_many_lines"},
		"a long line":    {form(t, bytes.Repeat([]byte("x"), MaxLineBytes+1)), "file", "line_too_long"},
	} {
		_, err := b.Upload(ctx, e.V, c.form)
		inv, ok := err.(*InvalidError)
		if !ok || inv.Param != c.param || inv.Code != c.code {
			t.Errorf("%s: %v, want an invalid %s (%s)", name, err, c.param, c.code)
		}
	}
	var files int
	if err := e.D.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_file").Scan(&files); err != nil || files != 0 {
		t.Errorf("%d files left behind (%v)", files, err)
	}
}

// TestCreateRefusesControlCharactersInMetadata: metadata is stored as the caller sent it, so a
// key or value with a control character (a NUL, which PostgreSQL cannot store, among them) is
// an invalid metadata parameter, and no batch is written.
func TestCreateRefusesControlCharactersInMetadata(t *testing.T) {
	e := jobstest.NewEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	b := textBatches(t, e)
	f, err := b.Upload(ctx, e.V, form(t, []byte(`{"custom_id":"c","method":"POST","url":"/v1/text","body":{"text":"x"}}`+"\n")))
	if err != nil {
		t.Fatal(err)
	}
	for _, md := range []map[string]string{{"a": "\x00"}, {"a\x00": "b"}, {"bell": "\a"}} {
		_, err := b.Create(ctx, CreateRequest{Viewer: e.V, InputFileID: f.ID, Endpoint: "/v1/text", CompletionWindow: Window, Metadata: md})
		var inv *InvalidError
		if !errors.As(err, &inv) || inv.Param != "metadata" || inv.Code != "invalid_value" {
			t.Errorf("metadata %q: %v, want an invalid metadata parameter", md, err)
		}
	}
	var batches int
	if err := e.D.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_batch").Scan(&batches); err != nil || batches != 0 {
		t.Errorf("%d batches written (%v)", batches, err)
	}
}

// TestABatchOfBlankLinesFails: a file of blank lines holds no request, so its batch fails at
// validation with invalid_file, as one over an empty file would, instead of completing empty.
func TestABatchOfBlankLinesFails(t *testing.T) {
	e := jobstest.NewEnv(t, jobstest.InstantSim())
	ctx := context.Background()
	b := textBatches(t, e)
	f, err := b.Upload(ctx, e.V, form(t, []byte("\n  \n\t\r\n")))
	if err != nil {
		t.Fatal(err)
	}
	bt, err := b.Create(ctx, CreateRequest{Viewer: e.V, InputFileID: f.ID, Endpoint: "/v1/text", CompletionWindow: Window})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.step(ctx, bt.ID); err != nil {
		t.Fatal(err)
	}
	got, err := b.Batch(ctx, e.V, bt.ID)
	if err != nil {
		t.Fatal(err)
	}
	var problems []Problem
	_ = json.Unmarshal(got.Errors, &problems)
	if got.Status != StatusFailed || len(problems) != 1 || problems[0].Code != "invalid_file" {
		t.Fatalf("batch %s with errors %s, want failed with invalid_file", got.Status, got.Errors)
	}
}
