package registry

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

// How a suspended owner resumes. An owner that waits for another operation (a flow.chain step
// waits for its prompt.execute operation) stores its continuation with Suspend, keyed by the
// operation it waits on, and only the continuation's SHA-256 digest on the registry rows.
// Every change of an operation's status goes through an owner's mirrored write (which calls
// Settle) or through the registry (poller, cancel, Record), and each settles in the same
// transaction. When the status has just become terminal, Settle runs the OnSettled
// subscribers, then takes (deletes) the continuation suspended on the operation and hands it
// to its owner's Resumer. Taking the row makes resumption happen exactly once even if a
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

// Settled is an operation that has just become terminal, in the transaction that made it so.
type Settled struct {
	// Was is the status the operation had before.
	Was string
	// Op is the row as it now stands, with what the registry's lock read beside it.
	Op Locked
}

// SettledFunc is a subscriber to settled operations. It runs in the settling transaction,
// whose writes w collects; an error rolls the transaction back.
type SettledFunc func(ctx context.Context, w *db.Writes, s Settled) error

// OnSettled subscribes f to every operation that settles, of any kind. Subscribers run in the
// order they subscribed, before any continuation suspended on the operation resumes.
func (r *Registry) OnSettled(f SettledFunc) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settled = append(r.settled, f)
}

// Settle runs in the transaction that moved op from status was to op.Status. When the
// operation has just settled (was not terminal, now is), it runs the OnSettled subscribers and
// resumes the continuation suspended on it, if any. Its writes go to w; a continuation, which
// reads what the transaction wrote, resumes after w has sent them.
func (r *Registry) Settle(ctx context.Context, w *db.Writes, was string, op Locked) error {
	if deferred.Status(was).Terminal() || !deferred.Status(op.Status).Terminal() {
		return nil
	}
	r.mu.RLock()
	subs := r.settled
	r.mu.RUnlock()
	for _, f := range subs {
		if err := f(ctx, w, Settled{Was: was, Op: op}); err != nil {
			return err
		}
	}
	if op.ContinuationDigest == nil {
		// A continuation is only ever stored together with its digest on this row.
		return nil
	}
	tx, err := w.Tx(ctx)
	if err != nil {
		return fmt.Errorf("settle operation %s: %w", op.ID, err)
	}
	c, err := takeContinuation(ctx, tx, op.ID)
	if err != nil || c == nil {
		return err
	}
	res, ok := r.resumerOf(c.Owner)
	if !ok {
		return fmt.Errorf("settle operation %s: no runtime resumes continuations of %q", op.ID, c.Owner)
	}
	return res.Resume(ctx, tx, op.Operation, c.Data)
}

// Suspend stores data as owner's continuation, suspended on the operation waitingOn, and
// records only its digest on the registry rows of waitingOn and of every id in alsoOn (the
// suspended operation itself). It returns the digest.
func Suspend(ctx context.Context, tx bun.Tx, waitingOn uuid.UUID, owner string, data []byte, alsoOn ...uuid.UUID) (string, error) {
	digest := deferred.Digest(data)
	row := continuation{OperationID: waitingOn, Owner: owner, Data: data}
	if _, err := tx.NewInsert().Model(&row).On("CONFLICT (operation_id) DO UPDATE").
		Set("owner = EXCLUDED.owner, data = EXCLUDED.data, created_at = now()").Exec(ctx); err != nil {
		return "", fmt.Errorf("store continuation on operation %s: %w", waitingOn, err)
	}
	ids := append([]uuid.UUID{waitingOn}, alsoOn...)
	if _, err := tx.NewUpdate().Model((*db.Operation)(nil)).Set("continuation_digest = ?", digest).
		Where("id IN (?)", bun.List(ids)).Exec(ctx); err != nil {
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

// Record records an owner-driven status change (not a poll) on the registry row, with the
// same rules as a poll: an error is kept only for a status that carries one, a result only
// when completed, the cancel surface follows the report. A terminal row never changes. A
// change is published; a terminal one is consumed by the owner and settled, all in tx.
func (r *Registry) Record(ctx context.Context, tx bun.Tx, id uuid.UUID, rep Report) (db.Operation, error) {
	var was string
	var wasReason *string
	w := db.NewWrites(tx)
	out, err := UpdateOperation(ctx, w, id, func(o *db.Operation) {
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
	if err == nil {
		err = w.Send(ctx)
	}
	if err != nil {
		return out.Operation, err
	}
	if out.Status == was {
		if deref(wasReason) != deref(out.CancelUnavailableReason) {
			// Only the cancel surface changed: the dashboard still hears of it.
			return out.Operation, Publish(ctx, tx, out.Operation)
		}
		return out.Operation, nil
	}
	r.stats.Transitions.Add(1)
	if err := Publish(ctx, tx, out.Operation); err != nil {
		return out.Operation, err
	}
	if deferred.Status(out.Status).Terminal() {
		if owner, ok := r.ownerOf(out.Kind); ok {
			if err := owner.Consume(ctx, tx, out.Operation); err != nil {
				return out.Operation, err
			}
		}
		if err := r.Settle(ctx, w, was, out); err != nil {
			return out.Operation, err
		}
		if err := w.Send(ctx); err != nil {
			return out.Operation, fmt.Errorf("settle operation %s: %w", out.ID, err)
		}
	}
	return out.Operation, nil
}
