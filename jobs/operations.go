package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/deferred"
	"asterion/jobs/feed"
)

// ErrNotCancelable means the operation's owner cannot cancel it now; Reason says why.
type ErrNotCancelable struct {
	Reason string
	// Busy marks a refusal that clears by itself moments later: the work is locked by its
	// own settlement or heartbeat right now. CancelOperation retries such refusals briefly
	// before passing them on, so a caller sees one only when the work stays busy.
	Busy bool
}

func (e *ErrNotCancelable) Error() string { return "not cancelable: " + e.Reason }

// Owner is an owning runtime of deferred operations: it reports the status of its work,
// cancels it or says why it cannot, and consumes a terminal result. The registry is the
// operator-visible join point; the owner stays the source of truth.
type Owner interface {
	// Kind is the operation kind this owner registers.
	Kind() string
	// Report returns the operation's status as the owner sees it now, with any error detail
	// and the result of a completed operation. An owner that no longer knows the operation
	// reports unknown.
	Report(ctx context.Context, tx bun.Tx, op db.Operation) (Report, error)
	// Cancel stops the work (errorKind "expired" when the registry expires it), or returns
	// *ErrNotCancelable.
	Cancel(ctx context.Context, tx bun.Tx, op db.Operation, errorKind string, actor Actor) error
	// Consume is called once, in the transaction that records a terminal status.
	Consume(ctx context.Context, tx bun.Tx, op db.Operation) error
}

// Report is an owner's view of one operation.
type Report struct {
	Status       deferred.Status
	ErrorKind    string
	ErrorMessage string
	Result       json.RawMessage
	// CancelUnavailable, when non-empty, says why the work cannot be cancelled now.
	CancelUnavailable string
}

// mirroring is implemented by owners that write every status change of their work onto the
// registry row in the transaction that makes it.
type mirroring interface{ MirrorsStatus() bool }

// mirroredPollEvery is how often the poller visits an operation whose owner mirrors its status:
// such a poll can only find the operation expired (and it is due at its expiry anyway), so it
// is a safety net, not how the status moves. Polling every pending prompt every few seconds
// cost a backlog of thousands of prompts hundreds of registry transactions a second.
const mirroredPollEvery = time.Minute

// nextPoll is when op is next due after now: after its retry_after_seconds (never sooner), a
// mirrored operation no sooner than mirroredPollEvery, and never after its expiry.
func (s *Service) nextPoll(op db.Operation, now time.Time) time.Time {
	every := time.Duration(op.RetryAfterSeconds) * time.Second
	if o, ok := s.ownerOf(op.Kind); ok {
		if m, ok := o.(mirroring); ok && m.MirrorsStatus() {
			every = max(every, mirroredPollEvery)
		}
	}
	next := now.Add(every)
	if op.ExpiresAt.Before(next) {
		next = op.ExpiresAt
	}
	return next
}

// promptOwner owns prompt.execute: the prompt jobs.
type promptOwner struct{ s *Service }

func (promptOwner) Kind() string { return KindPromptExecute }

// MirrorsStatus: every job transition updates the registry row in its own transaction (apply).
func (promptOwner) MirrorsStatus() bool { return true }

func (o promptOwner) job(ctx context.Context, tx bun.IDB, op db.Operation) (db.Job, error) {
	var job db.Job
	err := tx.NewSelect().Model(&job).Where("operation_id = ?", op.ID).Scan(ctx)
	return job, err
}

func (o promptOwner) Report(ctx context.Context, tx bun.Tx, op db.Operation) (Report, error) {
	job, err := o.job(ctx, tx, op)
	if errors.Is(err, sql.ErrNoRows) {
		return Report{Status: deferred.StatusUnknown, ErrorKind: "unknown", ErrorMessage: "the job of this operation no longer exists"}, nil
	}
	if err != nil {
		return Report{}, err
	}
	r := Report{Status: deferred.Status(operationStatusOf(job, op.Status)), ErrorKind: deref(job.ErrorKind), ErrorMessage: deref(job.ErrorMessage)}
	if job.ResponseID != nil {
		r.Result, _ = json.Marshal(map[string]string{"prompt_id": job.PromptID.String(), "job_id": job.ID.String(), "response_id": job.ResponseID.String()})
	}
	return r, nil
}

func (o promptOwner) Cancel(ctx context.Context, tx bun.Tx, op db.Operation, errorKind string, actor Actor) error {
	var job db.Job
	if err := tx.NewSelect().Model(&job).Where("operation_id = ?", op.ID).For("UPDATE").Scan(ctx); err != nil {
		return fmt.Errorf("lock job of operation %s: %w", op.ID, err)
	}
	_, err := o.s.cancelTx(ctx, tx, job, errorKind, actor)
	return err
}

func (promptOwner) Consume(context.Context, bun.Tx, db.Operation) error { return nil }

// RegisterOwner adds an owner of another operation kind.
func (s *Service) RegisterOwner(o Owner) {
	s.ownersMu.Lock()
	defer s.ownersMu.Unlock()
	s.owners[o.Kind()] = o
}

func (s *Service) ownerOf(kind string) (Owner, bool) {
	s.ownersMu.RLock()
	defer s.ownersMu.RUnlock()
	o, ok := s.owners[kind]
	return o, ok
}

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

// opWhere limits a registry query to what v may see.
func (v Viewer) opWhere(q *bun.SelectQuery) *bun.SelectQuery { return v.where(q, "operation") }

// ListOperations returns visible operations newest first with keyset pagination.
func (s *Service) ListOperations(ctx context.Context, v Viewer, f OperationFilter) ([]db.Operation, string, error) {
	if f.Limit <= 0 || f.Limit > 500 {
		f.Limit = 50
	}
	q := v.opWhere(s.db.NewSelect().Model((*db.Operation)(nil)))
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
			return nil, "", &ValidationError{Fields: map[string]string{"q": "must be an operation id or correlation id (a UUID)"}}
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
func (s *Service) OperationCounts(ctx context.Context, v Viewer) (map[string]int64, error) {
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
}

// getVisibleOperation loads an operation v may see, or ErrNotFound.
func (s *Service) getVisibleOperation(ctx context.Context, idb bun.IDB, v Viewer, id uuid.UUID) (db.Operation, error) {
	var op db.Operation
	q := idb.NewSelect().Model(&op).Where("id = ?", id)
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.sees(op.OrgID, op.CreatedBy)) {
		return db.Operation{}, fmt.Errorf("operation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return db.Operation{}, fmt.Errorf("get operation %s: %w", id, err)
	}
	return op, nil
}

// GetOperation returns the operator view of an operation.
func (s *Service) GetOperation(ctx context.Context, v Viewer, id uuid.UUID) (OperationDetail, error) {
	op, err := s.getVisibleOperation(ctx, s.db, v, id)
	if err != nil {
		return OperationDetail{}, err
	}
	hist, err := s.History(ctx, id)
	if err != nil {
		return OperationDetail{}, err
	}
	d := OperationDetail{Operation: op, History: hist, ChainBrokenAt: -1}
	if at, err := deferred.VerifyChain(hist); err != nil {
		d.ChainBrokenAt, d.ChainError = at, err.Error()
	} else if msg := historyHeadMismatch(op, hist); msg != "" {
		d.ChainBrokenAt, d.ChainError = len(hist), msg
	}
	var subject map[string]string
	_ = json.Unmarshal(op.Subject, &subject)
	if pid, err := uuid.Parse(subject["prompt_id"]); err == nil {
		if err := s.db.NewSelect().Model(&d.Jobs).Where("prompt_id = ?", pid).OrderExpr("created_at, id").Scan(ctx); err != nil {
			return OperationDetail{}, fmt.Errorf("jobs of operation %s: %w", id, err)
		}
	}
	return d, nil
}

// historyHeadMismatch says how a history that verifies on its own disagrees with the head
// recorded on the registry row: entries cut off its end leave a chain that still verifies,
// and only the head shows it. A history longer than the head read before it is a transition
// that landed in between, not damage.
func historyHeadMismatch(op db.Operation, hist []deferred.HistoryEntry) string {
	if op.HistorySeq == 0 {
		return ""
	}
	var last deferred.HistoryEntry
	if len(hist) > 0 {
		last = hist[len(hist)-1]
	}
	switch {
	case last.Seq < op.HistorySeq:
		return fmt.Sprintf("the history ends at entry %d but the registry row records %d entries: entries were removed", last.Seq, op.HistorySeq)
	case last.Seq == op.HistorySeq && op.HistoryDigest != nil && last.EntryDigest != *op.HistoryDigest:
		return fmt.Sprintf("entry %d does not match the digest the registry row records for it", last.Seq)
	}
	return ""
}

// History returns an operation's status history, oldest first.
func (s *Service) History(ctx context.Context, id uuid.UUID) ([]deferred.HistoryEntry, error) {
	var rows []db.OperationHistory
	if err := s.db.NewSelect().Model(&rows).Where("operation_id = ?", id).OrderExpr("seq").Scan(ctx); err != nil {
		return nil, fmt.Errorf("history of operation %s: %w", id, err)
	}
	out := make([]deferred.HistoryEntry, len(rows))
	for i, r := range rows {
		out[i] = historyEntryOf(r)
	}
	return out, nil
}

// OperationStatus returns the status document of a visible operation.
func (s *Service) OperationStatus(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, error) {
	op, err := s.getVisibleOperation(ctx, s.db, v, id)
	if err != nil {
		return deferred.StatusDoc{}, err
	}
	return StatusDocOf(op)
}

// PollerStats counts what the poller did, for /metrics.
type PollerStats struct {
	Polls, Transitions, Expiries, Errors atomic.Int64
}

// Stats returns the poller's counters.
func (s *Service) Stats() *PollerStats { return &s.stats }

// reconcile asks the owner for the operation's status and records a change; expired work is
// cancelled through its owner first. It returns the row as it now stands.
func (s *Service) reconcile(ctx context.Context, tx bun.Tx, op db.Operation, now time.Time) (db.Operation, error) {
	s.stats.Polls.Add(1)
	owner, ok := s.ownerOf(op.Kind)
	if !ok {
		return s.setStatus(ctx, tx, op, Report{Status: deferred.StatusUnknown, ErrorKind: "unknown",
			ErrorMessage: "no runtime owns operations of kind " + op.Kind}, now)
	}
	if !now.Before(op.ExpiresAt) {
		s.stats.Expiries.Add(1)
		if err := owner.Cancel(ctx, tx, op, KindExpired, Actor{Name: "poller"}); err != nil {
			var nc *ErrNotCancelable
			if !errors.As(err, &nc) && !errors.Is(err, ErrConflict) {
				return op, err
			}
		}
		// The owner may have mirrored its own change already; expiry wins for what was left open.
		var cur db.Operation
		if err := tx.NewSelect().Model(&cur).Where("id = ?", op.ID).Scan(ctx); err != nil {
			return op, err
		}
		if deferred.Status(cur.Status).Terminal() {
			return cur, nil
		}
		return s.setStatus(ctx, tx, cur, Report{Status: deferred.StatusExpired, ErrorKind: KindExpired,
			ErrorMessage: "the operation expired before its work finished"}, now)
	}
	rep, err := owner.Report(ctx, tx, op)
	if err != nil {
		return op, err
	}
	return s.setStatus(ctx, tx, op, rep, now)
}

// setStatus records an owner's report on the registry row; a terminal status is consumed by
// the owner in the same transaction.
func (s *Service) setStatus(ctx context.Context, tx bun.Tx, op db.Operation, rep Report, now time.Time) (db.Operation, error) {
	before := op.Status
	out, err := updateOperation(ctx, tx, nil, op.ID, func(o *db.Operation) {
		if o.Status != before {
			// The work moved on since the owner was asked (a job transition mirrors itself);
			// the newer status stands.
			return
		}
		o.Status = string(rep.Status)
		if rep.ErrorKind != "" && rep.Status.CarriesError() {
			o.LastErrorKind, o.LastErrorMessage = &rep.ErrorKind, &rep.ErrorMessage
		}
		if rep.Status == deferred.StatusCompleted && len(rep.Result) > 0 {
			o.Result = rep.Result
		}
		if rep.CancelUnavailable != "" {
			o.CancelUnavailableReason = &rep.CancelUnavailable
		} else if !rep.Status.Terminal() {
			o.CancelUnavailableReason = nil
		}
	})
	if err != nil {
		return op, err
	}
	next := s.nextPoll(out, now)
	if _, err := tx.NewUpdate().Model((*db.Operation)(nil)).Set("next_poll_at = ?, poll_count = poll_count + 1", next).
		Where("id = ?", op.ID).Exec(ctx); err != nil {
		return op, fmt.Errorf("schedule next poll of %s: %w", op.ID, err)
	}
	if out.Status != before {
		s.stats.Transitions.Add(1)
		if err := publishOperation(ctx, tx, out); err != nil {
			return op, err
		}
		if deferred.Status(out.Status).Terminal() {
			if owner, ok := s.ownerOf(out.Kind); ok {
				if err := owner.Consume(ctx, tx, out); err != nil {
					return op, err
				}
			}
			if err := s.afterOperationChange(ctx, tx, nil, before, out); err != nil {
				return op, err
			}
		}
	}
	return out, nil
}

// PollOperation polls the owning runtime now and returns the resulting status document.
func (s *Service) PollOperation(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, error) {
	var doc deferred.StatusDoc
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		op, err := s.getVisibleOperation(ctx, tx, v, id)
		if err != nil {
			return err
		}
		if !deferred.Status(op.Status).Terminal() {
			now, err := txNow(ctx, tx)
			if err != nil {
				return err
			}
			if op, err = s.reconcile(ctx, tx, op, now); err != nil {
				s.stats.Errors.Add(1)
				return err
			}
		}
		doc, err = StatusDocOf(op)
		return err
	})
	return doc, err
}

// CancelOperation cancels through the owner; a terminal operation is ErrConflict and a
// non-cancelable one *ErrNotCancelable with its reason.
func (s *Service) CancelOperation(ctx context.Context, v Viewer, id uuid.UUID, actor Actor) (deferred.StatusDoc, error) {
	const attempts = 20
	for attempt := 1; ; attempt++ {
		doc, err := s.cancelOperationOnce(ctx, v, id, actor)
		var busy *ErrNotCancelable
		if attempt == attempts || !errors.As(err, &busy) || !busy.Busy {
			return doc, err
		}
		select {
		case <-ctx.Done():
			return doc, err
		case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
		}
	}
}

// cancelOperationOnce is one cancel attempt in one transaction.
func (s *Service) cancelOperationOnce(ctx context.Context, v Viewer, id uuid.UUID, actor Actor) (deferred.StatusDoc, error) {
	var doc deferred.StatusDoc
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		op, err := s.getVisibleOperation(ctx, tx, v, id)
		if err != nil {
			return err
		}
		if deferred.Status(op.Status).Terminal() {
			return fmt.Errorf("cancel operation %s: it is %s: %w", id, op.Status, ErrConflict)
		}
		if op.CancelUnavailableReason != nil {
			return &ErrNotCancelable{Reason: *op.CancelUnavailableReason}
		}
		owner, ok := s.ownerOf(op.Kind)
		if !ok {
			return &ErrNotCancelable{Reason: "no runtime owns this kind of operation"}
		}
		if err := owner.Cancel(ctx, tx, op, "", actor); err != nil {
			return err
		}
		var cur db.Operation
		if err := tx.NewSelect().Model(&cur).Where("id = ?", id).Scan(ctx); err != nil {
			return err
		}
		if !deferred.Status(cur.Status).Terminal() {
			now, err := txNow(ctx, tx)
			if err != nil {
				return err
			}
			if cur, err = s.setStatus(ctx, tx, cur, Report{Status: deferred.StatusCancelled}, now); err != nil {
				return err
			}
		}
		doc, err = StatusDocOf(cur)
		return err
	})
	return doc, err
}

// PollDue polls every due, non-terminal operation once (design: "poll registered operations
// through their owning runtime, respect retry_after_seconds and expires_at"). It runs on the
// River leader as a periodic job. Each operation is reconciled in its own transaction, and the
// registry row is locked only after the owner acted, the same order (work, then registry) as
// every job transition, so the poller never deadlocks with a worker.
func (s *Service) PollDue(ctx context.Context) (int, error) {
	var due []uuid.UUID
	if err := s.db.NewSelect().Model((*db.Operation)(nil)).Column("id").
		Where("terminal_at IS NULL AND next_poll_at <= now()").OrderExpr("next_poll_at").Limit(500).
		Scan(ctx, &due); err != nil {
		return 0, fmt.Errorf("find due operations: %w", err)
	}
	polled := 0
	for _, id := range due {
		err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
			var op db.Operation
			if err := tx.NewSelect().Model(&op).Where("id = ?", id).Scan(ctx); err != nil {
				return err
			}
			if deferred.Status(op.Status).Terminal() {
				return nil
			}
			now, err := txNow(ctx, tx)
			if err != nil {
				return err
			}
			_, err = s.reconcile(ctx, tx, op, now)
			return err
		})
		if err != nil {
			s.stats.Errors.Add(1)
			s.log.Warn("poll operation", "operation_id", id, "err", err)
			continue
		}
		polled++
	}
	return polled, nil
}

// publishOperation emits an operation event for changes not caused by a job transition.
func publishOperation(ctx context.Context, tx bun.IDB, op db.Operation) error {
	q, err := operationEvent(tx, op)
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("publish operation event: %w", err)
	}
	return nil
}

// operationEvent is the statement publishOperation runs, for a caller that batches it.
func operationEvent(tx bun.IDB, op db.Operation) (*bun.InsertQuery, error) {
	payload, err := json.Marshal(map[string]any{"operation_id": op.ID, "kind": op.Kind, "status": op.Status,
		"updated_at": op.UpdatedAt.UTC()})
	if err != nil {
		return nil, err
	}
	return feed.Insert(tx, feed.Event{Topic: feed.TopicOperation, OrgID: op.OrgID, UserID: op.CreatedBy,
		OperationID: &op.ID, Payload: payload}), nil
}
