package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/deferred"
	"asterion/jobs/feed"
)

// lockedRead is what both lock statements read: the registry row, the transaction's clock and
// what settle subscribers need of the operation's org (its webhook).
const lockedRead = `SELECT operation.*, now() AS tx_now, true AS org_webhook_read,
	(SELECT webhook_url FROM orgs WHERE orgs.id = operation.org_id) AS org_webhook_url
	FROM sa_operation AS operation`

// LockOperation locks a registry row and reads, in the same round trip, the transaction's
// clock and what settle subscribers need of the operation's org (its webhook), so a hot
// transaction that settles an operation needs no second read. Its one ? is the operation id.
const LockOperation = lockedRead + ` WHERE operation.id = ? FOR UPDATE OF operation`

// LockMovedOperation is LockOperation for a statement that locks the row of another row's
// operation: it joins laterally (LEFT JOIN LATERAL (LockMovedOperation) AS op ON true) after a
// CTE or table named moved whose operation_id names the row. It takes no argument.
const LockMovedOperation = lockedRead + ` WHERE operation.id = moved.operation_id FOR UPDATE OF operation`

// LockedColumns are the columns LockOperation reads beyond the row's own.
var LockedColumns = []string{"tx_now", "org_webhook_read", "org_webhook_url"}

// Locked is a registry row as LockOperation reads it: the row, and what the lock read of the
// operation's org for the components that act when the operation settles (OnSettled).
// OrgWebhookRead is false when the row was read without the lock.
type Locked struct {
	db.Operation   `bun:",extend"`
	OrgWebhookRead bool    `bun:"org_webhook_read,scanonly"`
	OrgWebhookURL  *string `bun:"org_webhook_url,scanonly"`
}

// UpdateOperation locks the registry row (reading the transaction's clock and what settle
// subscribers need in the same round trip, after the writes pending in w), applies change,
// and adds the row's write to w — with a history entry when the status moved. It returns the
// row as it now stands.
func UpdateOperation(ctx context.Context, w *db.Writes, id uuid.UUID, change func(op *db.Operation)) (Locked, error) {
	var op Locked
	if err := w.ScanOne(ctx, &op, LockOperation, id); err != nil {
		return op, fmt.Errorf("lock operation %s: %w", id, err)
	}
	return WriteOperation(w, op, change)
}

// WriteOperation applies change to op, a registry row the transaction has locked (as
// LockOperation reads it), and adds its write to w as UpdateOperation does.
func WriteOperation(w *db.Writes, op Locked, change func(op *db.Operation)) (Locked, error) {
	before := op.Operation
	change(&op.Operation)
	op.UpdatedAt = op.TxNow
	st, _ := deferred.ParseStatus(op.Status)
	if st.Terminal() && op.TerminalAt == nil {
		op.TerminalAt = &op.TxNow
	}
	var entry *db.OperationHistory
	if op.Status != before.Status {
		e, err := NextHistory(&op.Operation, before.Status)
		if err != nil {
			return op, err
		}
		entry = &e
	}
	w.Update(op.Operation.UpdateStatement())
	if entry != nil {
		w.Insert(entry.InsertStatement())
	}
	return op, nil
}

// RecordAccepted adds to w the registry row of a newly accepted operation and its first
// history entry.
func (r *Registry) RecordAccepted(w *db.Writes, h deferred.Handle, orgID, userID int64, correlation uuid.UUID) (db.Operation, error) {
	op, entry, err := r.Accepted(h, orgID, userID, correlation)
	if err != nil {
		return db.Operation{}, err
	}
	w.Insert(op.InsertStatement())
	w.Insert(entry.InsertStatement())
	return op, nil
}

// Accepted builds the registry row of a newly accepted operation and its first history
// entry, for RecordAccepted or a caller that writes many at once.
func (r *Registry) Accepted(h deferred.Handle, orgID, userID int64, correlation uuid.UUID) (db.Operation, db.OperationHistory, error) {
	subject, err := json.Marshal(h.Subject)
	if err != nil {
		return db.Operation{}, db.OperationHistory{}, err
	}
	op := db.Operation{ID: h.OperationID, Kind: h.Kind, Owner: h.Owner, Status: string(h.Status), OrgID: orgID,
		CreatedBy: userID, Subject: subject, CorrelationID: correlation, AcceptedAt: h.AcceptedAt,
		ExpiresAt: h.ExpiresAt, RetryAfterSeconds: h.RetryAfterSeconds, UpdatedAt: h.AcceptedAt,
	}
	op.NextPollAt = r.NextPoll(op, h.AcceptedAt)
	if !h.Cancel.IsCancelable() {
		reason := h.Cancel.UnavailableReason()
		op.CancelUnavailableReason = &reason
	}
	entry, err := NextHistory(&op, "")
	if err != nil {
		return db.Operation{}, db.OperationHistory{}, err
	}
	return op, entry, nil
}

// NextPoll is when op is next due after now: after its retry_after_seconds (never sooner), and
// never after its expiry. An operation whose owner mirrors its status is due at its expiry
// only: its status moves with the owner's rows in their own transactions, so a poll before
// then finds nothing to change, and polling a standing backlog of them would cost the
// database a transaction per queued job and per round, growing with the backlog.
func (r *Registry) NextPoll(op db.Operation, now time.Time) time.Time {
	if o, ok := r.ownerOf(op.Kind); ok {
		if m, ok := o.(Mirroring); ok && m.MirrorsStatus() {
			return op.ExpiresAt
		}
	}
	next := now.Add(time.Duration(op.RetryAfterSeconds) * time.Second)
	if op.ExpiresAt.Before(next) {
		next = op.ExpiresAt
	}
	return next
}

// Publish emits an operation event for changes not caused by a job transition.
func Publish(ctx context.Context, tx bun.IDB, op db.Operation) error {
	q, err := OperationEvent(tx, op)
	if err != nil {
		return err
	}
	if _, err := q.Exec(ctx); err != nil {
		return fmt.Errorf("publish operation event: %w", err)
	}
	return nil
}

// OperationEvent is the statement Publish runs, for a caller that adds it to its Writes.
func OperationEvent(tx bun.IDB, op db.Operation) (*bun.InsertQuery, error) {
	payload, err := json.Marshal(map[string]any{"operation_id": op.ID, "kind": op.Kind, "status": op.Status,
		"updated_at": op.UpdatedAt.UTC()})
	if err != nil {
		return nil, err
	}
	return feed.Insert(tx, feed.Event{Topic: feed.TopicOperation, OrgID: op.OrgID, UserID: op.CreatedBy,
		OperationID: &op.ID, Payload: payload}), nil
}
