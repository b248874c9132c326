package batch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/admit"
)

// The codes of the error file's lines for a line that did not become a job.
const (
	CodeInvalidJSON   = "invalid_json"
	CodeMissingID     = "missing_custom_id"
	CodeInvalidMethod = "invalid_method"
	CodeInvalidURL    = "invalid_url"
	CodeInvalidValue  = "invalid_value"
	CodeJobFailed     = "job_failed"
	CodeServerError   = "server_error"
)

// line is one request line as a batch reads it.
type line struct {
	CustomID *string         `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// pending is a line on its way to a job: its row, and what admission is asked.
type pending struct {
	row    request
	prompt Prompt
	ask    admit.Request
}

// expandChunk turns the next ChunkLines lines of bt's input file into jobs or error lines, in
// tx, and records how far it went.
//
// The chunk's lines are queued together. Should the database refuse what they write for a
// reason no rule foresaw, they are queued again one by one, each in a savepoint of its own, so
// the one line it refuses becomes an error line and the others run: one bad line never holds
// the batch until its window ends.
func (b *Batches) expandChunk(ctx context.Context, tx bun.Tx, bt *Batch) error {
	from := bt.ExpandedLines + 1
	rows, err := lines(ctx, tx, bt.InputFileID, bt.ExpandedLines, ChunkLines)
	if err != nil {
		return err
	}
	to := bt.TotalLines
	if len(rows) > 0 && len(rows) < bt.TotalLines-bt.ExpandedLines {
		to = rows[len(rows)-1].LineNo
	}
	ep := b.cfg.Endpoints[bt.Endpoint]
	var admitted []*pending
	var out []request
	for _, l := range rows {
		p, lerr := b.readLine(ctx, bt, ep, l)
		switch {
		case p == nil && lerr == nil:
			// A blank line is no request.
		case lerr != nil:
			out = append(out, lineError(bt.ID, l.LineNo, p, lerr))
		default:
			admitted = append(admitted, p)
		}
	}
	err = tx.RunInTx(ctx, nil, func(ctx context.Context, sp bun.Tx) error { return b.queue(ctx, sp, bt, admitted) })
	if err != nil {
		if !db.IsRefusedData(err) {
			return fmt.Errorf("queue lines %d..%d of batch %s: %w", from, to, bt.ID, err)
		}
		b.log.Warn("the database refused a chunk of a batch; queueing its lines one by one",
			"batch_id", bt.ID, "from", from, "to", to, "err", err)
		for _, p := range admitted {
			err := tx.RunInTx(ctx, nil, func(ctx context.Context, sp bun.Tx) error { return b.queue(ctx, sp, bt, []*pending{p}) })
			if err == nil {
				continue
			}
			if !db.IsRefusedData(err) {
				return fmt.Errorf("queue line %d of batch %s: %w", p.row.LineNo, bt.ID, err)
			}
			b.log.Error("the database refused a line of a batch", "batch_id", bt.ID, "line", p.row.LineNo, "err", err)
			out = append(out, lineError(bt.ID, p.row.LineNo, p, &LineError{Code: CodeServerError,
				Message: fmt.Sprintf("Line %d could not be queued: the server refused to store it.", p.row.LineNo)}))
		}
	}
	if len(out) > 0 {
		if _, err := tx.NewInsert().Model(&out).Exec(ctx); err != nil {
			return fmt.Errorf("record the error lines of lines %d..%d of batch %s: %w", from, to, bt.ID, err)
		}
	}
	bt.ExpandedLines = to
	if _, err := tx.NewUpdate().Model(bt).Column("expanded_lines").WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("record the progress of batch %s: %w", bt.ID, err)
	}
	return nil
}

// queue admits the lines of ps together and writes, in tx, a job for each line admission
// grants and an error line for each it refuses.
func (b *Batches) queue(ctx context.Context, tx bun.Tx, bt *Batch, ps []*pending) error {
	if len(ps) == 0 {
		return nil
	}
	reqs := make([]*admit.Request, len(ps))
	for i, p := range ps {
		reqs[i] = &p.ask
	}
	grants, err := b.jobs.Admission().Reserve(ctx, tx, reqs)
	if err != nil {
		return fmt.Errorf("admit: %w", err)
	}
	var out []request
	prompts := make([]db.Entity, 0, len(ps))
	queued := make([]jobs.QueuedPrompt, 0, len(ps))
	var granted []*pending
	for i, p := range ps {
		if grants[i].Err != nil {
			out = append(out, lineError(bt.ID, p.row.LineNo, p, refusalOf(grants[i].Err)))
			continue
		}
		prompt, q := queuedOf(bt, p, grants[i].Ticket)
		prompts, queued, granted = append(prompts, prompt), append(queued, q), append(granted, p)
	}
	if len(prompts) > 0 {
		if _, err := tx.NewInsert().Model(&prompts).Exec(ctx); err != nil {
			return fmt.Errorf("insert the prompts: %w", err)
		}
	}
	queuedJobs, err := jobs.EnqueueMany(ctx, b.jobs, tx, queued)
	if err != nil {
		return err
	}
	ops := make([]uuid.UUID, 0, len(granted))
	doors := make([]jobDoor, 0, len(granted))
	for i, p := range granted {
		job := queuedJobs[i]
		row := p.row
		row.JobID = &job.ID
		out = append(out, row)
		ops = append(ops, *job.OperationID)
		doors = append(doors, jobDoor{JobID: job.ID, Door: string(admit.DoorBatch)})
	}
	if len(out) > 0 {
		if _, err := tx.NewInsert().Model(&out).Exec(ctx); err != nil {
			return fmt.Errorf("record the lines: %w", err)
		}
	}
	if len(doors) > 0 {
		if _, err := tx.NewInsert().Model(&doors).Exec(ctx); err != nil {
			return fmt.Errorf("record the door of the jobs: %w", err)
		}
		// A batch's job waits for as long as the batch's window, not a prompt's time to live.
		if _, err := tx.NewUpdate().Table("sa_operation").Set("expires_at = ?", bt.ExpiresAt).
			Where("id IN (?)", bun.List(ops)).Exec(ctx); err != nil {
			return fmt.Errorf("extend the operations of the jobs: %w", err)
		}
	}
	return nil
}

// readLine reads one line and applies every rule that needs no transaction: nil for a blank
// line, or a *LineError.
func (b *Batches) readLine(ctx context.Context, bt *Batch, ep Endpoint, l fileLine) (*pending, *LineError) {
	t := bytes.TrimSpace(l.Body)
	if len(t) == 0 {
		return nil, nil
	}
	p := &pending{row: request{BatchID: bt.ID, LineNo: l.LineNo}}
	var ln line
	if t[0] != '{' || json.Unmarshal(t, &ln) != nil {
		return p, &LineError{Code: CodeInvalidJSON, Message: fmt.Sprintf("Line %d is not a JSON object.", l.LineNo)}
	}
	switch {
	case ln.CustomID != nil && strings.ContainsRune(*ln.CustomID, 0):
		// PostgreSQL cannot store a NUL in text, and a custom_id stored altered would answer
		// under another name; the error line carries none.
		return p, &LineError{Code: CodeInvalidValue, Message: fmt.Sprintf("Line %d: the custom_id holds a NUL character.", l.LineNo)}
	case ln.CustomID != nil && *ln.CustomID != "":
		p.row.CustomID = ln.CustomID
	default:
		return p, &LineError{Code: CodeMissingID, Message: fmt.Sprintf("Line %d has no custom_id.", l.LineNo)}
	}
	if ln.Method != "POST" {
		return p, &LineError{Code: CodeInvalidMethod, Message: fmt.Sprintf("Line %d: the method must be POST.", l.LineNo)}
	}
	if ln.URL != bt.Endpoint {
		return p, &LineError{Code: CodeInvalidURL, Message: fmt.Sprintf("Line %d: the url must be the batch's endpoint, %s.",
			l.LineNo, bt.Endpoint)}
	}
	prompt, lerr := ep.Decode(ln.Body)
	if lerr != nil {
		return p, lerr
	}
	chk := jobs.CheckPrompt(prompt.Messages, prompt.Options, admit.DoorBatch)
	if len(chk.Fields) > 0 {
		return p, fieldsError(chk.Fields)
	}
	p.prompt = prompt
	p.ask = admit.Request{Door: admit.DoorBatch, OrgID: bt.OrgID, UserID: bt.CreatedBy, Text: chk.Text,
		TextField: chk.TextField, Input: jobs.ConversationText(prompt.Messages), Model: prompt.Options.Model}
	if prompt.Options.MaxTokens != nil {
		p.ask.MaxTokens = *prompt.Options.MaxTokens
	}
	if err := b.jobs.Admission().Check(ctx, &p.ask); err != nil {
		var verr *jobs.ValidationError
		if errors.As(err, &verr) {
			return p, fieldsError(verr.Fields)
		}
		return p, refusalOf(err)
	}
	return p, nil
}

// queuedOf is the prompt of p and the job that runs it at the batch's priority.
func queuedOf(bt *Batch, p *pending, t admit.Ticket) (db.Entity, jobs.QueuedPrompt) {
	msgs, _ := json.Marshal(p.prompt.Messages)
	promptID := uuid.New()
	prompt := db.Entity{ID: promptID, Kind: "prompt", Body: p.ask.Text, Messages: msgs, CorrelationID: promptID,
		TruthClass: "authored", StateClass: "open", OrgID: bt.OrgID, CreatedBy: bt.CreatedBy}
	opts := p.prompt.Options
	return prompt, jobs.QueuedPrompt{PromptID: promptID, Priority: Priority, OrgID: bt.OrgID, UserID: bt.CreatedBy,
		Correlation: promptID, Admitted: t, Model: p.ask.Model, Text: jobs.ConversationText(p.prompt.Messages), Options: &opts}
}

// lineError is the row of a line that did not become a job.
func lineError(batchID string, lineNo int, p *pending, e *LineError) request {
	r := request{BatchID: batchID, LineNo: lineNo}
	if p != nil {
		r.CustomID = p.row.CustomID
	}
	r.ErrorCode, r.ErrorMessage = &e.Code, &e.Message
	return r
}

// fieldsError is the line error of broken field rules: the first field in name order, so the
// message is the same every time.
func fieldsError(fields map[string]string) *LineError {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return &LineError{Code: CodeInvalidValue, Message: fmt.Sprintf("Invalid '%s': %s.", names[0], fields[names[0]])}
}

// refusalOf is the line error of an admission refusal (a rate, a quota, the budget), coded as
// OpenAI codes them.
func refusalOf(err error) *LineError {
	code := "rate_limit_exceeded"
	if errors.Is(err, admit.ErrBudgetExhausted) {
		code = "insufficient_quota"
	}
	return &LineError{Code: code, Message: err.Error()}
}
