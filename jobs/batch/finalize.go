package batch

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/jobs"
)

// outcome is one line of a batch with its job's answer.
type outcome struct {
	lineNo                int
	customID              *string
	jobID                 *uuid.UUID
	lineCode, lineMessage *string
	state, kind, message  *string
	finishedAt            *time.Time
	options               []byte
	text                  *string
	input, output         int64
	answered              int64
}

// outputLine is a line of the output or error file.
type outputLine struct {
	ID       string        `json:"id"`
	CustomID *string       `json:"custom_id"`
	Response *lineResponse `json:"response"`
	Error    *lineProblem  `json:"error"`
}

type lineResponse struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

type lineProblem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// fileWriter writes one output file of a batch, chunk by chunk, creating it with its first
// line.
type fileWriter struct {
	tx    bun.Tx
	f     File
	chunk [][]byte
}

func (w *fileWriter) add(ctx context.Context, l outputLine) error {
	b, err := json.Marshal(l)
	if err != nil {
		return fmt.Errorf("encode a line of %s: %w", w.f.Filename, err)
	}
	if w.f.LineCount == 0 && len(w.chunk) == 0 {
		if _, err := w.tx.NewInsert().Model(&w.f).Exec(ctx); err != nil {
			return fmt.Errorf("insert file %s: %w", w.f.Filename, err)
		}
	}
	w.chunk = append(w.chunk, b)
	if len(w.chunk) == ChunkLines {
		return w.flush(ctx)
	}
	return nil
}

func (w *fileWriter) flush(ctx context.Context) error {
	if err := insertLines(ctx, w.tx, w.f.ID, w.f.LineCount+1, w.chunk); err != nil {
		return err
	}
	for _, l := range w.chunk {
		w.f.Bytes += int64(len(l)) + 1
	}
	w.f.LineCount += len(w.chunk)
	w.chunk = w.chunk[:0]
	return nil
}

// close writes what is left and returns the file's id, or nil when it has no line.
func (w *fileWriter) close(ctx context.Context) (*string, error) {
	if err := w.flush(ctx); err != nil {
		return nil, err
	}
	if w.f.LineCount == 0 {
		return nil, nil
	}
	if _, err := w.tx.NewUpdate().Model(&w.f).Column("bytes", "line_count").WherePK().Exec(ctx); err != nil {
		return nil, fmt.Errorf("record file %s: %w", w.f.ID, err)
	}
	id := w.f.ID
	return &id, nil
}

func (b *Batches) newFileWriter(tx bun.Tx, bt *Batch, kind string) *fileWriter {
	return &fileWriter{tx: tx, f: File{ID: newID("file-"), OrgID: bt.OrgID, CreatedBy: bt.CreatedBy, Purpose: PurposeBatchOutput,
		Filename: bt.ID + "_" + kind + ".jsonl", EndsWithNewline: true}}
}

// end writes the output and error files of bt from its lines, ChunkLines at a time, and ends
// it with status.
func (b *Batches) end(ctx context.Context, tx bun.Tx, bt *Batch, status string) error {
	out, errs := b.newFileWriter(tx, bt, "output"), b.newFileWriter(tx, bt, "error")
	ep := b.cfg.Endpoints[bt.Endpoint]
	completed, failed, last := 0, 0, 0
	for {
		rows, err := tx.QueryContext(ctx, outcomeSQL, bt.ID, last, ChunkLines)
		if err != nil {
			return fmt.Errorf("read the answers of batch %s: %w", bt.ID, err)
		}
		var chunk []outcome
		for rows.Next() {
			var o outcome
			if err := rows.Scan(&o.lineNo, &o.customID, &o.jobID, &o.lineCode, &o.lineMessage, &o.state, &o.kind, &o.message,
				&o.finishedAt, &o.options, &o.text, &o.input, &o.output, &o.answered); err != nil {
				rows.Close()
				return fmt.Errorf("read the answers of batch %s: %w", bt.ID, err)
			}
			chunk = append(chunk, o)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read the answers of batch %s: %w", bt.ID, err)
		}
		for _, o := range chunk {
			l := outputLine{ID: newID("batch_req_"), CustomID: o.customID}
			if o.state != nil && *o.state == string(jobs.StateSucceeded) {
				body, err := answer(ep, o)
				if err != nil {
					return fmt.Errorf("answer line %d of batch %s: %w", o.lineNo, bt.ID, err)
				}
				l.Response = &lineResponse{StatusCode: 200, RequestID: o.jobID.String(), Body: body}
				if err := out.add(ctx, l); err != nil {
					return err
				}
				completed++
				continue
			}
			l.Error = problemOf(o, bt)
			if err := errs.add(ctx, l); err != nil {
				return err
			}
			failed++
		}
		if len(chunk) < ChunkLines {
			break
		}
		last = chunk[len(chunk)-1].lineNo
	}
	var err error
	if bt.OutputFileID, err = out.close(ctx); err != nil {
		return err
	}
	if bt.ErrorFileID, err = errs.close(ctx); err != nil {
		return err
	}
	bt.Status, bt.CompletedCount, bt.FailedCount, bt.TotalLines = status, completed, failed, completed+failed
	at := map[string]string{StatusCompleted: "completed_at", StatusCancelled: "cancelled_at", StatusExpired: "expired_at"}[status]
	if _, err := tx.NewUpdate().Model(bt).Column("status", "output_file_id", "error_file_id", "completed_count", "failed_count",
		"total_lines").Set(at + " = now()").WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("end batch %s: %w", bt.ID, err)
	}
	_, err = b.reg.Record(ctx, tx, bt.OperationID, reportOf(*bt))
	return err
}

// answer is the endpoint's answer body of a line whose job succeeded.
func answer(ep Endpoint, o outcome) ([]byte, error) {
	var opts jobs.ExecutionOptions
	_ = json.Unmarshal(o.options, &opts)
	a := Answered{JobID: *o.jobID, Model: opts.Model, InputTokens: o.input, OutputTokens: o.output,
		AnsweredOutputTokens: o.answered, MaxTokens: opts.MaxTokens}
	if o.text != nil {
		a.Text = *o.text
	}
	if o.finishedAt != nil {
		a.FinishedAt = *o.finishedAt
	}
	return ep.Answer(a)
}

// problemOf is the error of a line that has no answer: why it became no job, or how its job
// ended.
func problemOf(o outcome, bt *Batch) *lineProblem {
	switch {
	case o.lineCode != nil:
		return &lineProblem{Code: *o.lineCode, Message: deref(o.lineMessage)}
	case o.state == nil:
		return &lineProblem{Code: CodeJobFailed, Message: "The job of this request is no longer kept."}
	case *o.state == string(jobs.StateCancelled) && bt.EndAs != nil:
		code := "batch_" + *bt.EndAs
		return &lineProblem{Code: code, Message: fmt.Sprintf("The batch was %s before this request was answered.", *bt.EndAs)}
	}
	code := deref(o.kind)
	if code == "" {
		code = CodeJobFailed
	}
	msg := deref(o.message)
	if msg == "" {
		msg = "The job of this request ended " + *o.state + "."
	}
	return &lineProblem{Code: code, Message: msg}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
