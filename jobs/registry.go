package jobs

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/deferred"
)

// KindPromptExecute is the deferred-operation kind of a prompt job.
const KindPromptExecute = "prompt.execute"

// OwnerPromptRuntime is the component that owns prompt jobs.
const OwnerPromptRuntime = "asterion.jobs"

// StatusDocOf builds the deferred-operation-status.v1 document of a registry row.
func StatusDocOf(op db.Operation) (deferred.StatusDoc, error) {
	st, err := deferred.ParseStatus(op.Status)
	if err != nil {
		return deferred.StatusDoc{}, err
	}
	updated := op.UpdatedAt
	switch {
	case !st.Terminal():
		cancel := deferred.Cancelable(deferred.CancelHref(op.ID))
		if op.CancelUnavailableReason != nil {
			cancel = deferred.NotCancelable(*op.CancelUnavailableReason)
		}
		return deferred.NewActiveStatus(op.ID, op.Kind, st, updated, op.ExpiresAt, op.RetryAfterSeconds, cancel)
	case st == deferred.StatusCompleted:
		result := op.Result
		if len(result) == 0 {
			result = json.RawMessage(`{}`)
		}
		return deferred.NewCompletedStatus(op.ID, op.Kind, updated, op.ExpiresAt, result)
	case st == deferred.StatusCancelled:
		return deferred.NewCancelledStatus(op.ID, op.Kind, updated, op.ExpiresAt)
	}
	info := deferred.ErrorInfo{Kind: "unknown", Message: "no detail recorded"}
	if op.LastErrorKind != nil {
		info.Kind = *op.LastErrorKind
	}
	if op.LastErrorMessage != nil && *op.LastErrorMessage != "" {
		info.Message = *op.LastErrorMessage
	}
	return deferred.NewFailedStatus(op.ID, op.Kind, st, updated, op.ExpiresAt, info)
}

// nextHistory builds the digest-chained history entry for op's current status, chained onto
// the head recorded on the row (whose status was prevStatus), and moves the row's head to it.
// The caller writes the row and then the entry (the entry references the row).
func nextHistory(op *db.Operation, prevStatus string) (db.OperationHistory, error) {
	doc, err := StatusDocOf(*op)
	if err != nil {
		return db.OperationHistory{}, fmt.Errorf("status document of operation %s: %w", op.ID, err)
	}
	raw, err := json.Marshal(doc)
	if err != nil {
		return db.OperationHistory{}, fmt.Errorf("marshal status of operation %s: %w", op.ID, err)
	}
	var prev *deferred.HistoryEntry
	if op.HistorySeq > 0 {
		if op.HistoryDigest == nil || op.HistoryAt == nil {
			return db.OperationHistory{}, fmt.Errorf("operation %s: history head %d has no digest or time", op.ID, op.HistorySeq)
		}
		prev = &deferred.HistoryEntry{Seq: op.HistorySeq, Status: deferred.Status(prevStatus), At: *op.HistoryAt,
			EntryDigest: *op.HistoryDigest}
	}
	st, _ := deferred.ParseStatus(op.Status)
	// A row's time is its transaction's start; a transaction that started earlier may commit
	// after a later one, so an entry is never dated before the entry it follows.
	at := op.UpdatedAt
	if prev != nil && at.Before(prev.At) {
		at = prev.At
	}
	e, err := deferred.NewHistoryEntry(prev, op.HistorySeq+1, st, at, raw)
	if err != nil {
		return db.OperationHistory{}, fmt.Errorf("history entry of operation %s: %w", op.ID, err)
	}
	op.HistorySeq, op.HistoryDigest, op.HistoryAt = e.Seq, &e.EntryDigest, &e.At
	return db.OperationHistory{OperationID: op.ID, Seq: e.Seq, Status: string(e.Status), At: e.At,
		DocDigest: e.DocDigest, PrevDigest: e.PrevDigest, EntryDigest: e.EntryDigest}, nil
}

func historyEntryOf(r db.OperationHistory) deferred.HistoryEntry {
	return deferred.HistoryEntry{Seq: r.Seq, Status: deferred.Status(r.Status), At: r.At,
		DocDigest: r.DocDigest, PrevDigest: r.PrevDigest, EntryDigest: r.EntryDigest}
}

// recordAccepted writes the registry row of a newly accepted operation and its first history
// entry through b, or at once when b is nil.
func (s *Service) recordAccepted(ctx context.Context, tx bun.IDB, b *db.Batch, h deferred.Handle, orgID, userID int64, correlation uuid.UUID) (db.Operation, error) {
	op, entry, err := s.acceptedOperation(h, orgID, userID, correlation)
	if err != nil {
		return db.Operation{}, err
	}
	w := writesTo(tx, b)
	if err := w.insert(&op); err != nil {
		return db.Operation{}, fmt.Errorf("register operation %s: %w", op.ID, err)
	}
	if err := w.insert(&entry); err != nil {
		return db.Operation{}, fmt.Errorf("append history of operation %s: %w", op.ID, err)
	}
	if err := w.flush(ctx); err != nil {
		return db.Operation{}, fmt.Errorf("register operation %s: %w", op.ID, err)
	}
	return op, nil
}

// acceptedOperation builds the registry row of a newly accepted operation and its first
// history entry, for recordAccepted or a caller that writes many at once.
func (s *Service) acceptedOperation(h deferred.Handle, orgID, userID int64, correlation uuid.UUID) (db.Operation, db.OperationHistory, error) {
	subject, err := json.Marshal(h.Subject)
	if err != nil {
		return db.Operation{}, db.OperationHistory{}, err
	}
	op := db.Operation{ID: h.OperationID, Kind: h.Kind, Owner: h.Owner, Status: string(h.Status), OrgID: orgID,
		CreatedBy: userID, Subject: subject, CorrelationID: correlation, AcceptedAt: h.AcceptedAt,
		ExpiresAt: h.ExpiresAt, RetryAfterSeconds: h.RetryAfterSeconds, UpdatedAt: h.AcceptedAt,
	}
	op.NextPollAt = s.nextPoll(op, h.AcceptedAt)
	if !h.Cancel.IsCancelable() {
		r := h.Cancel.UnavailableReason()
		op.CancelUnavailableReason = &r
	}
	entry, err := nextHistory(&op, "")
	if err != nil {
		return db.Operation{}, db.OperationHistory{}, err
	}
	return op, entry, nil
}

// lockOperation locks a registry row and reads the transaction's clock and the org's webhook.
const lockOperation = `SELECT operation.*, now() AS tx_now, true AS org_webhook_read,
	(SELECT webhook_url FROM orgs WHERE orgs.id = operation.org_id) AS org_webhook_url
	FROM sa_operation AS operation WHERE operation.id = ? FOR UPDATE OF operation`

// updateOperation locks the registry row (reading the transaction's clock and the org's
// webhook in the same round trip), applies change, and writes the row — with a history entry
// when the status moved — through b, or at once when b is nil. It returns the row as it now
// stands.
func updateOperation(ctx context.Context, tx bun.IDB, b *db.Batch, id uuid.UUID, change func(op *db.Operation)) (db.Operation, error) {
	var op db.Operation
	if err := db.ScanOne(ctx, tx, &op, lockOperation, id); err != nil {
		return op, fmt.Errorf("lock operation %s: %w", id, err)
	}
	return writeOperation(ctx, tx, b, op, change)
}

// writeOperation applies change to op, a registry row the transaction has locked (read with
// the transaction's clock and the org's webhook, as lockOperation reads it), and writes it as
// updateOperation does.
func writeOperation(ctx context.Context, tx bun.IDB, b *db.Batch, op db.Operation, change func(op *db.Operation)) (db.Operation, error) {
	id := op.ID
	before := op
	change(&op)
	op.UpdatedAt = op.TxNow
	st, _ := deferred.ParseStatus(op.Status)
	if st.Terminal() && op.TerminalAt == nil {
		op.TerminalAt = &op.TxNow
	}
	var entry *db.OperationHistory
	if op.Status != before.Status {
		e, err := nextHistory(&op, before.Status)
		if err != nil {
			return op, err
		}
		entry = &e
	}
	w := writesTo(tx, b)
	if err := w.update(&op); err != nil {
		return op, fmt.Errorf("update operation %s: %w", id, err)
	}
	if entry != nil {
		if err := w.insert(entry); err != nil {
			return op, fmt.Errorf("append history of operation %s: %w", id, err)
		}
	}
	if err := w.flush(ctx); err != nil {
		return op, fmt.Errorf("update operation %s: %w", id, err)
	}
	return op, nil
}

// operationStatusOf maps a prompt job onto its operation's status: the one table of
// CONTRACT.md's mapping. A superseded job leaves the operation's terminal status alone.
//
//	queued → pending, running → running, succeeded → completed,
//	failed → timed-out when error_kind is stuck or timeout, else failed,
//	cancelled → expired when error_kind is expired, else cancelled.
func operationStatusOf(j db.Job, current string) string {
	switch State(j.State) {
	case StateQueued:
		return string(deferred.StatusPending)
	case StateRunning:
		return string(deferred.StatusRunning)
	case StateSucceeded:
		return string(deferred.StatusCompleted)
	case StateFailed:
		if k := deref(j.ErrorKind); k == KindStuck || k == "timeout" {
			return string(deferred.StatusTimedOut)
		}
		return string(deferred.StatusFailed)
	case StateCancelled:
		if deref(j.ErrorKind) == KindExpired {
			return string(deferred.StatusExpired)
		}
		return string(deferred.StatusCancelled)
	}
	return current
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
