package jobs

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/deferred"
)

// This file holds what the owners beyond prompt.execute share with the registry: the one hook
// that runs when an operation settles, host-owned continuations, and owner-driven status
// changes.
//
// How a suspended owner resumes. An owner that waits for another operation (a flow.chain step
// waits for its prompt.execute operation) stores its continuation in
// sa_operation_continuation, keyed by the operation it waits on, and only the continuation's
// SHA-256 digest on the registry rows. Every change of an operation's status goes through
// apply (job transitions) or setStatus/recordStatus (poller, cancel, owners), and each calls
// afterOperationChange in the same transaction. When the status has just become terminal, the
// hook takes (deletes) the continuation suspended on that operation and hands it to its owner,
// which resumes or fails. Taking the row makes resumption happen exactly once even if a
// terminal status were recorded twice. The continuation bytes are read only here and in the
// owner that wrote them: no API, page or log line ever carries them.

// continuation is a row of sa_operation_continuation: host-owned, never shown.
type continuation struct {
	bun.BaseModel `bun:"table:sa_operation_continuation"`
	OperationID   uuid.UUID `bun:"operation_id,pk,type:uuid"`
	Owner         string    `bun:"owner"`
	Data          []byte    `bun:"data,type:bytea"`
	CreatedAt     time.Time `bun:"created_at,nullzero,default:now()"`
}

// afterOperationChange runs in the transaction that moved op from status was to op.Status.
// When the operation has just settled (was not terminal, now is) it
//
//   - accepts a webhook delivery of a completed prompt.execute operation when its org has a
//     webhook configured (artifact.delivery, see delivery.go);
//   - resumes the continuation suspended on it, if any (flow.chain, see chain.go).
//
// Its writes go through b when given (nil: at once); before resuming a continuation, which
// reads what the transaction wrote, b is run.
func (s *Service) afterOperationChange(ctx context.Context, idb bun.IDB, b *db.Batch, was string, op db.Operation) error {
	if deferred.Status(was).Terminal() || !deferred.Status(op.Status).Terminal() {
		return nil
	}
	tx, ok := idb.(bun.Tx)
	if !ok {
		return fmt.Errorf("settle operation %s: not inside a transaction", op.ID)
	}
	if op.Kind == KindPromptExecute && op.Status == string(deferred.StatusCompleted) {
		if err := s.acceptDeliveryTx(ctx, tx, b, op); err != nil {
			return err
		}
	}
	if op.ContinuationDigest == nil {
		// A continuation is only ever stored together with its digest on this row.
		return nil
	}
	if b != nil {
		if err := b.Exec(ctx, tx); err != nil {
			return fmt.Errorf("settle operation %s: %w", op.ID, err)
		}
	}
	c, err := takeContinuation(ctx, tx, op.ID)
	if err != nil || c == nil {
		return err
	}
	switch c.Owner {
	case OwnerChainRuntime:
		return s.resumeChain(ctx, tx, op, c.Data)
	}
	return fmt.Errorf("settle operation %s: no runtime resumes continuations of %q", op.ID, c.Owner)
}

// suspendOn stores data as owner's continuation, suspended on the operation waitingOn, and
// records only its digest on the registry rows of waitingOn and of every id in alsoOn (the
// suspended operation itself). It returns the digest.
func suspendOn(ctx context.Context, tx bun.Tx, waitingOn uuid.UUID, owner string, data []byte, alsoOn ...uuid.UUID) (string, error) {
	digest := deferred.Digest(data)
	row := continuation{OperationID: waitingOn, Owner: owner, Data: data}
	if _, err := tx.NewInsert().Model(&row).On("CONFLICT (operation_id) DO UPDATE").
		Set("owner = EXCLUDED.owner, data = EXCLUDED.data, created_at = now()").Exec(ctx); err != nil {
		return "", fmt.Errorf("store continuation on operation %s: %w", waitingOn, err)
	}
	ids := append([]uuid.UUID{waitingOn}, alsoOn...)
	if _, err := tx.NewUpdate().Model((*db.Operation)(nil)).Set("continuation_digest = ?", digest).
		Where("id IN (?)", bun.In(ids)).Exec(ctx); err != nil {
		return "", fmt.Errorf("record continuation digest: %w", err)
	}
	return digest, nil
}

// takeContinuation deletes and returns the continuation suspended on id, or nil when there is
// none.
func takeContinuation(ctx context.Context, tx bun.Tx, id uuid.UUID) (*continuation, error) {
	var c continuation
	err := tx.NewDelete().Model(&c).Where("operation_id = ?", id).Returning("*").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("take continuation of operation %s: %w", id, err)
	}
	return &c, nil
}

// recordStatus records an owner-driven status change (not a poll) on the registry row, with
// the same rules as setStatus: an error is kept only for a status that carries one, a result
// only when completed, the cancel surface follows the report. A terminal row never changes. A
// change is published; a terminal one is consumed by the owner and settles what is suspended
// on the operation, all in tx.
func (s *Service) recordStatus(ctx context.Context, tx bun.Tx, id uuid.UUID, rep Report) (db.Operation, error) {
	var was string
	var wasReason *string
	out, err := updateOperation(ctx, tx, nil, id, func(o *db.Operation) {
		was, wasReason = o.Status, o.CancelUnavailableReason
		if deferred.Status(o.Status).Terminal() {
			return
		}
		o.Status = string(rep.Status)
		if rep.ErrorKind != "" && rep.Status.CarriesError() {
			kind, msg := rep.ErrorKind, rep.ErrorMessage
			o.LastErrorKind, o.LastErrorMessage = &kind, &msg
		}
		if rep.Status == deferred.StatusCompleted && len(rep.Result) > 0 {
			o.Result = rep.Result
		}
		if rep.CancelUnavailable != "" {
			reason := rep.CancelUnavailable
			o.CancelUnavailableReason = &reason
		} else {
			o.CancelUnavailableReason = nil
		}
	})
	if err != nil {
		return out, err
	}
	if out.Status == was {
		if deref(wasReason) != deref(out.CancelUnavailableReason) {
			// Only the cancel surface changed: the dashboard still hears of it.
			return out, publishOperation(ctx, tx, out)
		}
		return out, nil
	}
	s.stats.Transitions.Add(1)
	if err := publishOperation(ctx, tx, out); err != nil {
		return out, err
	}
	if deferred.Status(out.Status).Terminal() {
		if owner, ok := s.ownerOf(out.Kind); ok {
			if err := owner.Consume(ctx, tx, out); err != nil {
				return out, err
			}
		}
		if err := s.afterOperationChange(ctx, tx, nil, was, out); err != nil {
			return out, err
		}
	}
	return out, nil
}
