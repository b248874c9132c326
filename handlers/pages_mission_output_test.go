package handlers

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/readmodel"
)

// startRunning puts a queued job in the running state, as a worker's claim does.
func (e *missionEnv) startRunning(t *testing.T, jobID uuid.UUID) {
	t.Helper()
	if _, err := e.db.Bun.ExecContext(context.Background(),
		`UPDATE sa_job SET state = 'running', worker_claim = 'test-claim', claimed_at = now(), running_heartbeat_at = now(),
		    updated_at = clock_timestamp() WHERE id = ?`, jobID); err != nil {
		t.Fatalf("start job %s: %v", jobID, err)
	}
}

// writeChunks stores chunks of attempt 1 of a job, numbered from seq first, and the progress
// a heartbeat of its execution would record.
func (e *missionEnv) writeChunks(t *testing.T, jobID uuid.UUID, first int, texts ...string) {
	t.Helper()
	for i, text := range texts {
		if _, err := e.db.Bun.ExecContext(context.Background(),
			`INSERT INTO sa_job_output (job_id, attempt, seq, text, pieces, prompt_id, org_id, created_by)
			SELECT id, 1, ?, ?, 1, prompt_id, org_id, created_by FROM sa_job WHERE id = ?`, first+i, text, jobID); err != nil {
			t.Fatalf("write chunk %d of job %s: %v", first+i, jobID, err)
		}
	}
	// What the running execution's next heartbeat would carry.
	if _, err := e.db.Bun.ExecContext(context.Background(),
		`UPDATE sa_job SET progress_chunks = progress_chunks + ?, progress_tokens = progress_tokens + ?
		WHERE id = ? AND state = 'running'`, len(texts), len(texts), jobID); err != nil {
		t.Fatalf("record the progress of job %s: %v", jobID, err)
	}
}

// outputElement returns the output element of a job in body ("" when there is none).
func outputElement(t *testing.T, body string, jobID uuid.UUID) string {
	t.Helper()
	i := strings.Index(body, `<div id="out-`+jobID.String()+`"`)
	if i < 0 {
		return ""
	}
	j := strings.Index(body[i:], "</div>")
	if j < 0 {
		t.Fatalf("unclosed output element of job %s", jobID)
	}
	return body[i : i+j+len("</div>")]
}

// outputText is the text inside an output element.
func outputText(el string) string { return el[strings.Index(el, ">")+1 : len(el)-len("</div>")] }

// A running drop shows its output so far in a polite live region, escaped; a cancelled or
// failed drop keeps what its job had written; a queued one has no output; an output longer than
// the field carries is cut like a response. The page and the drops fragment agree.
func TestMissionPageRendersOutput(t *testing.T) {
	t.Parallel()
	e := newMissionEnv(t)
	b, v := e.member(t, "acme", "ruth", identity.RoleMember)
	ctx := context.Background()
	running := e.submit(t, v, "running one")
	e.startRunning(t, running.JobID)
	e.writeChunks(t, running.JobID, 1, "Once <b>upon</b>", " a time\nthere")
	silent := e.submit(t, v, "running, nothing written yet")
	e.startRunning(t, silent.JobID)
	cancelled := e.submit(t, v, "cancelled one")
	e.startRunning(t, cancelled.JobID)
	e.writeChunks(t, cancelled.JobID, 1, "partial ", "answer")
	if _, err := e.jobs.Cancel(ctx, v, cancelled.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	long := e.submit(t, v, "long one")
	e.startRunning(t, long.JobID)
	piece := strings.Repeat("é", 999) + "|"
	e.writeChunks(t, long.JobID, 1, piece, piece, piece, piece, piece, "NEVER-SHOWN")
	queued := e.submit(t, v, "queued one")

	for _, path := range []string{"/mission", "/mission/drops"} {
		resp, body := b.do(t, get(path))
		wantHTML(t, resp, body, http.StatusOK)
		wantDrop(t, body, running.PromptID.String(), "drop is-pending")
		el := outputElement(t, body, running.JobID)
		if !strings.Contains(el, `aria-live="polite"`) || !strings.Contains(el, "data-output") {
			t.Errorf("%s: output element of the running drop: %q", path, el)
		}
		if got, want := outputText(el), "Once &lt;b&gt;upon&lt;/b&gt; a time\nthere"; got != want {
			t.Errorf("%s: running output %q, want %q", path, got, want)
		}
		if el := outputElement(t, body, silent.JobID); el == "" || outputText(el) != "" {
			t.Errorf("%s: a running drop with no output yet has output element %q, want an empty one", path, el)
		}
		wantDrop(t, body, cancelled.PromptID.String(), "drop is-cancelled")
		if got := outputText(outputElement(t, body, cancelled.JobID)); got != "partial answer" {
			t.Errorf("%s: cancelled drop output %q, want the partial answer", path, got)
		}
		if el := outputElement(t, body, queued.JobID); el != "" {
			t.Errorf("%s: queued drop has an output element %q", path, el)
		}
		got := outputText(outputElement(t, body, long.JobID))
		if want := strings.Repeat(piece, 4) + strings.Repeat("é", readmodel.MissionOutputCap-4000) + missionCutMark; got != want {
			t.Errorf("%s: long output is %d bytes ending %q, want the first %d characters and the cut mark", path,
				len(got), got[max(len(got)-20, 0):], readmodel.MissionOutputCap)
		}
	}
}

// missionStreamOf is the mission page's streamer for v, as GET /mission/stream makes it.
func missionStreamOf(e *missionEnv, v jobs.Viewer) *missionStreamer {
	scope := v.Scope()
	return &missionStreamer{s: e.srv, v: v, csrf: "csrf", scope: scope, pending: map[uuid.UUID]time.Time{},
		marks: map[uuid.UUID]outputMark{}}
}

// streamChunk hands one stored chunk to m and returns what it wrote.
func streamChunk(t *testing.T, m *missionStreamer, c db.OutputChunk) string {
	t.Helper()
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := m.chunk(context.Background(), w, c); err != nil {
		t.Fatalf("chunk %d of job %s: %v", c.Seq, c.JobID, err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// The page stream appends each new chunk to its drop's output as an escaped out-of-band append,
// skips what the snapshot or a rendering already holds, fills a gap from the table in order,
// renders again a drop it does not show running (with its output so far), ignores a settled
// job's chunks and stops where a reload would cut the text.
func TestMissionStreamOutputFragments(t *testing.T) {
	t.Parallel()
	e := newMissionEnv(t)
	_, v := e.member(t, "acme", "sam", identity.RoleMember)
	ctx := context.Background()
	p := e.submit(t, v, "stream me")
	e.startRunning(t, p.JobID)
	e.writeChunks(t, p.JobID, 1, "one", " two")
	chunk := func(jobID, promptID uuid.UUID, seq int, text string) db.OutputChunk {
		return db.OutputChunk{JobID: jobID, PromptID: promptID, Attempt: 1, Seq: seq, Text: text, OrgID: v.OrgID, CreatedBy: v.UserID}
	}

	m := missionStreamOf(e, v)
	var buf bytes.Buffer
	w := bufio.NewWriter(&buf)
	if err := m.open(ctx, w); err != nil {
		t.Fatal(err)
	}
	_ = w.Flush()
	if got := outputText(outputElement(t, buf.String(), p.JobID)); got != "one two" {
		t.Fatalf("snapshot output %q", got)
	}
	if out := streamChunk(t, m, chunk(p.JobID, p.PromptID, 2, " two")); out != "" {
		t.Errorf("a chunk the snapshot holds was sent again: %q", out)
	}
	e.writeChunks(t, p.JobID, 3, " <three>")
	want := "event: drop\ndata: <span hx-swap-oob=\"beforeend:#out-" + p.JobID.String() + "\"> &lt;three&gt;</span>\n\n"
	if out := streamChunk(t, m, chunk(p.JobID, p.PromptID, 3, " <three>")); out != want {
		t.Errorf("append of chunk 3:\n got %q\nwant %q", out, want)
	}
	// Chunk 5 arrives before 4: 4 is read from the table first, and 5 is not sent twice.
	e.writeChunks(t, p.JobID, 4, " four", " five")
	out := streamChunk(t, m, chunk(p.JobID, p.PromptID, 5, " five"))
	if i, j := strings.Index(out, "> four</span>"), strings.Index(out, "> five</span>"); i < 0 || j < i || strings.Count(out, "event: drop") != 2 {
		t.Errorf("gap filled as %q, want chunk 4 then 5", out)
	}
	if out := streamChunk(t, m, chunk(p.JobID, p.PromptID, 4, " four")); out != "" {
		t.Errorf("a late chunk 4 was sent again: %q", out)
	}

	// A job whose running drop the page does not have yet: the drop is rendered again, whole.
	q := e.submit(t, v, "started behind the stream's back")
	e.startRunning(t, q.JobID)
	e.writeChunks(t, q.JobID, 1, "alpha", " beta")
	out = streamChunk(t, m, chunk(q.JobID, q.PromptID, 1, "alpha"))
	if !strings.Contains(out, `<article id="drop-`+q.PromptID.String()+`"`) || !strings.Contains(out, `hx-swap-oob="true"`) ||
		outputText(outputElement(t, out, q.JobID)) != "alpha beta" {
		t.Errorf("unknown running job: %q, want its drop rendered with its output so far", out)
	}
	if out := streamChunk(t, m, chunk(q.JobID, q.PromptID, 2, " beta")); out != "" {
		t.Errorf("a chunk the new rendering holds was sent again: %q", out)
	}

	// A cancelled job's drop, once rendered, takes no more appends.
	if _, err := e.jobs.Cancel(ctx, v, q.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	m.pending[q.PromptID] = outputEpoch
	buf.Reset()
	if err := m.drained(ctx, w); err != nil {
		t.Fatal(err)
	}
	_ = w.Flush()
	if got := outputText(outputElement(t, buf.String(), q.JobID)); got != "alpha beta" {
		t.Errorf("cancelled drop output %q, want the partial text", got)
	}
	if out := streamChunk(t, m, chunk(q.JobID, q.PromptID, 3, " gamma")); out != "" {
		t.Errorf("a cancelled drop got an append: %q", out)
	}

	// Where the field cuts the text, the stream cuts it too and then stops.
	r := e.submit(t, v, "a long answer")
	e.startRunning(t, r.JobID)
	head := strings.Repeat("w", readmodel.MissionOutputCap-3)
	e.writeChunks(t, r.JobID, 1, head)
	streamChunk(t, m, chunk(r.JobID, r.PromptID, 1, head))
	e.writeChunks(t, r.JobID, 2, "abcdef")
	out = streamChunk(t, m, chunk(r.JobID, r.PromptID, 2, "abcdef"))
	if !strings.Contains(out, ">abc"+missionCutMark+"</span>") {
		t.Errorf("append past the cap: %q, want the first 3 characters and the cut mark", out)
	}
	if out := streamChunk(t, m, chunk(r.JobID, r.PromptID, 3, "more")); out != "" {
		t.Errorf("an append after the cut: %q", out)
	}

	// After the output subscription fell behind, the running drops are rendered again with
	// their output as it is now, and appends go on from there.
	e.writeChunks(t, p.JobID, 6, " six", " seven")
	buf.Reset()
	if err := m.resyncOutput(ctx, w); err != nil {
		t.Fatal(err)
	}
	_ = w.Flush()
	if got := outputText(outputElement(t, buf.String(), p.JobID)); got != "one two &lt;three&gt; four five six seven" {
		t.Errorf("resync rendered output %q", got)
	}
	if strings.Contains(buf.String(), q.PromptID.String()) {
		t.Errorf("resync rendered the cancelled drop again")
	}
	if out := streamChunk(t, m, chunk(p.JobID, p.PromptID, 7, " seven")); out != "" {
		t.Errorf("a chunk the resync holds was sent again: %q", out)
	}

	// A new attempt (a reclaimed job) starts a new output: its first chunk renders the drop again.
	if _, err := e.db.Bun.ExecContext(ctx, `UPDATE sa_job SET attempt = 2 WHERE id = ?`, p.JobID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.db.Bun.ExecContext(ctx, `INSERT INTO sa_job_output (job_id, attempt, seq, text, pieces, prompt_id, org_id, created_by)
		SELECT id, 2, 1, 'retold', 1, prompt_id, org_id, created_by FROM sa_job WHERE id = ?`, p.JobID); err != nil {
		t.Fatal(err)
	}
	second := chunk(p.JobID, p.PromptID, 1, "retold")
	second.Attempt = 2
	if got := outputText(outputElement(t, streamChunk(t, m, second), p.JobID)); got != "retold" {
		t.Errorf("a new attempt's first chunk rendered output %q, want the new attempt's text", got)
	}
}
