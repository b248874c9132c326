package readmodel

import (
	"asterion/jobs"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// OperationFilter selects registry rows.
type OperationFilter struct {
	Status string
	Kind   string
	Owner  string
	OrgID  int64
	From   *time.Time
	To     *time.Time
	// Search matches an operation id or correlation id (full UUID).
	Search string
	Limit  int
	Cursor string
}

// ListOperations returns visible operations newest first with keyset pagination.
func (s *Reads) ListOperations(ctx context.Context, v jobs.Viewer, f OperationFilter) ([]db.Operation, string, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	q := v.Where(s.db.NewSelect().Model((*db.Operation)(nil)), "operation")
	if f.Status != "" {
		q = q.Where("operation.status = ?", f.Status)
	}
	if f.Kind != "" {
		q = q.Where("operation.kind = ?", f.Kind)
	}
	if f.Owner != "" {
		q = q.Where("operation.owner = ?", f.Owner)
	}
	if f.OrgID != 0 {
		q = q.Where("operation.org_id = ?", f.OrgID)
	}
	if f.From != nil {
		q = q.Where("operation.accepted_at >= ?", *f.From)
	}
	if f.To != nil {
		q = q.Where("operation.accepted_at < ?", *f.To)
	}
	if s := strings.TrimSpace(f.Search); s != "" {
		id, err := uuid.Parse(s)
		if err != nil {
			return nil, "", &jobs.ValidationError{Fields: map[string]string{"q": "must be an operation id or correlation id (a UUID)"}}
		}
		q = q.Where("(operation.id = ? OR operation.correlation_id = ?)", id, id)
	}
	if f.Cursor != "" {
		t, id, err := decodeCursor(f.Cursor)
		if err != nil {
			return nil, "", err
		}
		q = q.Where("(operation.accepted_at, operation.id) < (?, ?)", t, id)
	}
	var ops []db.Operation
	if err := q.OrderExpr("operation.accepted_at DESC, operation.id DESC").Limit(f.Limit+1).Scan(ctx, &ops); err != nil {
		return nil, "", fmt.Errorf("list operations: %w", err)
	}
	next := ""
	if len(ops) > f.Limit {
		ops = ops[:f.Limit]
		last := ops[len(ops)-1]
		next = encodeCursor(last.AcceptedAt, last.ID)
	}
	return ops, next, nil
}

// OperationCounts returns counts by status from the trigger-kept counters (cheap at any size).
func (s *Reads) OperationCounts(ctx context.Context, v jobs.Viewer) (map[string]int64, error) {
	out := map[string]int64{}
	for _, st := range deferred.Statuses() {
		out[string(st)] = 0
	}
	q := s.db.NewSelect().Table("sa_operation_count").ColumnExpr("status, sum(n) AS n").GroupExpr("status")
	if !v.AllOrgs {
		q = q.Where("org_id = ?", v.OrgID)
	}
	var rows []struct {
		Status string `bun:"status"`
		N      int64  `bun:"n"`
	}
	if err := q.Scan(ctx, &rows); err != nil {
		return nil, fmt.Errorf("count operations: %w", err)
	}
	for _, r := range rows {
		out[r.Status] = r.N
	}
	return out, nil
}

// OperationDetail is everything the operator view shows of one operation, never raw
// continuation or payload.
type OperationDetail struct {
	Operation db.Operation
	History   []deferred.HistoryEntry
	// ChainBrokenAt is -1 when the history verifies, else the first broken entry.
	ChainBrokenAt int
	ChainError    string
	// Jobs are the prompt jobs of the operation's prompt, oldest first (supersede chain).
	Jobs []db.Job
	// PredecessorID is the operation this one superseded (its own job is a retry of that
	// operation's job), or nil.
	PredecessorID *uuid.UUID
}

// OwnJob returns the prompt job the operation was made for, when it has one.
func (d OperationDetail) OwnJob() (db.Job, bool) {
	for _, j := range d.Jobs {
		if j.OperationID != nil && *j.OperationID == d.Operation.ID {
			return j, true
		}
	}
	return db.Job{}, false
}

// predecessor finds the operation d's own job superseded, through the job's supersedes column
// among the prompt's jobs (a retry is a job of the same prompt): the registry row keeps only
// the forward link, successor_id.
func (d OperationDetail) predecessor() *uuid.UUID {
	own, ok := d.OwnJob()
	if !ok || own.Supersedes == nil {
		return nil
	}
	for _, j := range d.Jobs {
		if j.ID == *own.Supersedes {
			return j.OperationID
		}
	}
	return nil
}

// GetOperation returns the operator view of an operation.
func (s *Reads) GetOperation(ctx context.Context, v jobs.Viewer, id uuid.UUID) (OperationDetail, error) {
	op, err := registry.Visible(ctx, s.db, v, id)
	if err != nil {
		return OperationDetail{}, err
	}
	hist, err := s.reg.History(ctx, id)
	if err != nil {
		return OperationDetail{}, err
	}
	d := OperationDetail{Operation: op, History: hist, ChainBrokenAt: -1}
	if at, err := deferred.VerifyChain(hist); err != nil {
		d.ChainBrokenAt, d.ChainError = at, err.Error()
	} else if msg := registry.HistoryHeadMismatch(op, hist); msg != "" {
		d.ChainBrokenAt, d.ChainError = len(hist), msg
	}
	var subject map[string]string
	_ = json.Unmarshal(op.Subject, &subject)
	if pid, err := uuid.Parse(subject["prompt_id"]); err == nil {
		if err := s.db.NewSelect().Model(&d.Jobs).Where("prompt_id = ?", pid).OrderExpr("created_at, id").Scan(ctx); err != nil {
			return OperationDetail{}, fmt.Errorf("jobs of operation %s: %w", id, err)
		}
	}
	d.PredecessorID = d.predecessor()
	return d, nil
}
