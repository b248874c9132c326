package batch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// CreateRequest asks for a batch.
type CreateRequest struct {
	Viewer           jobs.Viewer
	InputFileID      string
	Endpoint         string
	CompletionWindow string
	Metadata         map[string]string
}

// Limits of a batch's metadata, as OpenAI's.
const (
	maxMetadataKeys  = 16
	maxMetadataKey   = 64
	maxMetadataValue = 512
)

func (r CreateRequest) validate(b *Batches) error {
	if _, ok := b.cfg.Endpoints[r.Endpoint]; !ok {
		return invalid("endpoint", "invalid_value", "Invalid value for 'endpoint': %q is not one of the endpoints a batch may name.", r.Endpoint)
	}
	if r.CompletionWindow != Window {
		return invalid("completion_window", "invalid_value", "Invalid value for 'completion_window': the only window is '%s'.", Window)
	}
	if r.InputFileID == "" {
		return invalid("input_file_id", "missing_required_parameter", "Missing required parameter: 'input_file_id'.")
	}
	if len(r.Metadata) > maxMetadataKeys {
		return invalid("metadata", "invalid_value", "Invalid 'metadata': at most %d keys.", maxMetadataKeys)
	}
	for k, v := range r.Metadata {
		if utf8.RuneCountInString(k) > maxMetadataKey || utf8.RuneCountInString(v) > maxMetadataValue {
			return invalid("metadata", "invalid_value", "Invalid 'metadata': keys are at most %d characters and values at most %d.",
				maxMetadataKey, maxMetadataValue)
		}
		// As the Responses API's metadata: PostgreSQL cannot store a NUL, and no other control
		// character belongs in a label.
		if admit.ControlCharProblem(k) != "" || admit.ControlCharProblem(v) != "" {
			return invalid("metadata", "invalid_value", "Invalid 'metadata': keys and values may not hold control characters.")
		}
	}
	return nil
}

// Create accepts a batch over an uploaded file of purpose batch: in one transaction its row
// (validating), its registry row (running, cancelable) and a visit of the batch worker.
func (b *Batches) Create(ctx context.Context, req CreateRequest) (Batch, error) {
	if err := req.validate(b); err != nil {
		return Batch{}, err
	}
	defer b.jobs.Admit()()
	var out Batch
	err := b.reg.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		// The file stays locked until the batch is written, so a delete of it waits and then
		// sees the batch that reads it (DeleteFile).
		var f File
		// An admin's batch runs in its own org, so its input must be of that org too.
		v := req.Viewer
		v.AllOrgs = false
		err := visibleTo(tx.NewSelect().Model(&f).Where("id = ?", req.InputFileID), v).For("SHARE").Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return invalid("input_file_id", "invalid_value", "No file with id '%s' found.", req.InputFileID)
		}
		if err != nil {
			return fmt.Errorf("read input file %s: %w", req.InputFileID, err)
		}
		if f.Purpose != PurposeBatch {
			return invalid("input_file_id", "invalid_value", "The file '%s' has purpose '%s'; a batch reads a file of purpose 'batch'.",
				f.ID, f.Purpose)
		}
		now, err := registry.TxNow(ctx, tx)
		if err != nil {
			return err
		}
		id := "batch_" + newID("")
		h, err := deferred.NewHandle(deferred.HandleRequest{Kind: Kind, Owner: OwnerName,
			Subject: map[string]string{"batch_id": id}, CorrelationID: id, Status: deferred.StatusRunning,
			RetryAfterSeconds: jobs.DefaultRetryAfterSeconds}, b.reg.Policy(), now)
		if err != nil {
			return fmt.Errorf("build batch handle: %w", err)
		}
		// The window is the batch's own, whatever the longest life of other operations.
		h.ExpiresAt = deferred.NormalizeTime(now.Add(24 * time.Hour))
		w := db.NewWrites(tx)
		op, err := b.reg.RecordAccepted(w, h, req.Viewer.OrgID, req.Viewer.UserID, uuid.New())
		if err == nil {
			err = w.Send(ctx)
		}
		if err != nil {
			return err
		}
		bt := Batch{ID: id, OrgID: req.Viewer.OrgID, CreatedBy: req.Viewer.UserID, OperationID: op.ID, Endpoint: req.Endpoint,
			CompletionWindow: req.CompletionWindow, InputFileID: f.ID, Status: StatusValidating, Metadata: req.Metadata,
			ExpiresAt: h.ExpiresAt, CreatedAt: now}
		if _, err := tx.NewInsert().Model(&bt).Returning("*").Exec(ctx); err != nil {
			return fmt.Errorf("insert batch: %w", err)
		}
		if err := registry.Publish(ctx, tx, op); err != nil {
			return err
		}
		if err := jobs.Audit(ctx, tx, bt.OrgID, &req.Viewer.UserID, fmt.Sprintf("user:%d", req.Viewer.UserID), "batch.accepted",
			"batch", id, map[string]any{"operation_id": op.ID, "input_file_id": f.ID, "endpoint": bt.Endpoint}); err != nil {
			return err
		}
		if err := b.wake(ctx, tx); err != nil {
			return err
		}
		out = bt
		return nil
	})
	return out, err
}

// Batch is the batch id, if v may see it.
func (b *Batches) Batch(ctx context.Context, v jobs.Viewer, id string) (Batch, error) {
	var bt Batch
	err := visibleTo(b.db.NewSelect().Model(&bt).Where("id = ?", id), v).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return Batch{}, fmt.Errorf("batch %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Batch{}, fmt.Errorf("read batch %s: %w", id, err)
	}
	return bt, nil
}

// Page is one page of a list of batches, newest first.
type Page struct {
	Batches []Batch
	HasMore bool
}

// MaxPage is the longest page of a list.
const MaxPage = 100

// List is the batches v may see of its own org, newest first, after the batch after ("" from the newest),
// at most limit (1..MaxPage). An after that names no batch of the org is ErrNotFound.
func (b *Batches) List(ctx context.Context, v jobs.Viewer, after string, limit int) (Page, error) {
	if limit < 1 || limit > MaxPage {
		return Page{}, invalid("limit", "invalid_value", "Invalid 'limit': must be between 1 and %d.", MaxPage)
	}
	own := v
	own.AllOrgs = false
	q := visibleTo(b.db.NewSelect().Model((*Batch)(nil)), own)
	if after != "" {
		cur, err := b.Batch(ctx, v, after)
		if errors.Is(err, ErrNotFound) {
			return Page{}, invalid("after", "invalid_value", "Invalid 'after': no batch with id '%s' found.", after)
		}
		if err != nil {
			return Page{}, err
		}
		q = q.Where("(created_at, id) < (?, ?)", cur.CreatedAt, cur.ID)
	}
	var rows []Batch
	if err := q.OrderExpr("created_at DESC, id DESC").Limit(limit+1).Scan(ctx, &rows); err != nil {
		return Page{}, fmt.Errorf("list batches: %w", err)
	}
	p := Page{Batches: rows}
	if len(rows) > limit {
		p.Batches, p.HasMore = rows[:limit], true
	}
	return p, nil
}

// CancelBatch asks batch id, if v may see it, to stop: it becomes cancelling at once, and cancelled once
// the batch worker has cancelled its unfinished jobs. An ended batch is ErrConflict.
func (b *Batches) CancelBatch(ctx context.Context, v jobs.Viewer, id string, actor jobs.Actor) (Batch, error) {
	bt, err := b.Batch(ctx, v, id)
	if err != nil {
		return Batch{}, err
	}
	if terminal(bt.Status) || bt.Status == StatusCancelling {
		if bt.Status == StatusCancelling {
			return bt, nil
		}
		return Batch{}, fmt.Errorf("cancel batch %s: it is %s: %w", id, bt.Status, ErrConflict)
	}
	// The batch's operation is cancelled through the registry, which asks this owner (Cancel
	// below) in the same transaction; the batch was found among those the caller may act on.
	orgView := jobs.Viewer{OrgID: bt.OrgID, UserID: v.UserID, OrgWide: true}
	if _, err := b.reg.CancelOperation(ctx, orgView, bt.OperationID, actor); err != nil &&
		!errors.Is(err, registry.ErrConflict) {
		return Batch{}, fmt.Errorf("cancel batch %s: %w", id, err)
	}
	return b.Batch(ctx, v, id)
}

// batchResult is the result of a completed batch operation.
func batchResult(bt Batch) json.RawMessage {
	r, _ := json.Marshal(map[string]any{"batch_id": bt.ID, "output_file_id": bt.OutputFileID, "error_file_id": bt.ErrorFileID,
		"request_counts": map[string]int{"total": bt.TotalLines, "completed": bt.CompletedCount, "failed": bt.FailedCount}})
	return r
}
