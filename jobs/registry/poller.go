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

// Visible loads an operation v may see, or ErrNotFound.
func Visible(ctx context.Context, idb bun.IDB, v Viewer, id uuid.UUID) (db.Operation, error) {
	var op db.Operation
	q := idb.NewSelect().Model(&op).Where("id = ?", id)
	err := q.Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Sees(op.OrgID, op.CreatedBy)) {
		return db.Operation{}, fmt.Errorf("operation %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return db.Operation{}, fmt.Errorf("get operation %s: %w", id, err)
	}
	return op, nil
}

// OperationStatus returns the status document of a visible operation.
func (r *Registry) OperationStatus(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, error) {
	op, err := Visible(ctx, r.db, v, id)
	if err != nil {
		return deferred.StatusDoc{}, err
	}
	return StatusDocOf(op)
}

// StatusAndSuccessor is OperationStatus with the id of the operation that replaced it (a
// retry by supersede), if any, from the same read of its row.
func (r *Registry) StatusAndSuccessor(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, *uuid.UUID, error) {
	op, err := Visible(ctx, r.db, v, id)
	if err != nil {
		return deferred.StatusDoc{}, nil, err
	}
	doc, err := StatusDocOf(op)
	return doc, op.SuccessorID, err
}

// reconcile asks the owner for the operation's status and records a change; expired work is
// cancelled through its owner first. It returns the row as it now stands.
func (r *Registry) reconcile(ctx context.Context, tx bun.Tx, op db.Operation, now time.Time) (db.Operation, error) {
	r.stats.Polls.Add(1)
	owner, ok := r.ownerOf(op.Kind)
	if !ok {
		return r.setStatus(ctx, tx, op, Report{Status: deferred.StatusUnknown, ErrorKind: "unknown",
			ErrorMessage: "no runtime owns operations of kind " + op.Kind}, now)
	}
	if !now.Before(op.ExpiresAt) {
		r.stats.Expiries.Add(1)
		if err := owner.Cancel(ctx, tx, op, ErrorKindExpired, Actor{Name: "poller"}); err != nil {
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
		return r.setStatus(ctx, tx, cur, Report{Status: deferred.StatusExpired, ErrorKind: ErrorKindExpired,
			ErrorMessage: "the operation expired before its work finished"}, now)
	}
	rep, err := owner.Report(ctx, tx, op)
	if err != nil {
		return op, err
	}
	return r.setStatus(ctx, tx, op, rep, now)
}

// setStatus records an owner's report on the registry row; a terminal status is consumed by
// the owner in the same transaction.
func (r *Registry) setStatus(ctx context.Context, tx bun.Tx, op db.Operation, rep Report, now time.Time) (db.Operation, error) {
	before := op.Status
	w := db.NewWrites(tx)
	out, err := UpdateOperation(ctx, w, op.ID, func(o *db.Operation) {
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
	if err == nil {
		err = w.Send(ctx)
	}
	if err != nil {
		return op, err
	}
	next := r.NextPoll(out.Operation, now)
	if _, err := tx.NewUpdate().Model((*db.Operation)(nil)).Set("next_poll_at = ?, poll_count = poll_count + 1", next).
		Where("id = ?", op.ID).Exec(ctx); err != nil {
		return op, fmt.Errorf("schedule next poll of %s: %w", op.ID, err)
	}
	if out.Status != before {
		r.stats.Transitions.Add(1)
		if err := Publish(ctx, tx, out.Operation); err != nil {
			return op, err
		}
		if deferred.Status(out.Status).Terminal() {
			if owner, ok := r.ownerOf(out.Kind); ok {
				if err := owner.Consume(ctx, tx, out.Operation); err != nil {
					return op, err
				}
			}
			if err := r.Settle(ctx, w, before, out); err != nil {
				return op, err
			}
			if err := w.Send(ctx); err != nil {
				return op, fmt.Errorf("settle operation %s: %w", op.ID, err)
			}
		}
	}
	return out.Operation, nil
}

// PollOperation polls the owning runtime now and returns the resulting status document.
func (r *Registry) PollOperation(ctx context.Context, v Viewer, id uuid.UUID) (deferred.StatusDoc, error) {
	var doc deferred.StatusDoc
	err := r.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		op, err := Visible(ctx, tx, v, id)
		if err != nil {
			return err
		}
		if !deferred.Status(op.Status).Terminal() {
			now, err := TxNow(ctx, tx)
			if err != nil {
				return err
			}
			if op, err = r.reconcile(ctx, tx, op, now); err != nil {
				r.stats.Errors.Add(1)
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
func (r *Registry) CancelOperation(ctx context.Context, v Viewer, id uuid.UUID, actor Actor) (deferred.StatusDoc, error) {
	const attempts = 20
	for attempt := 1; ; attempt++ {
		doc, err := r.cancelOperationOnce(ctx, v, id, actor)
		var busy *ErrNotCancelable
		if attempt == attempts || !errors.As(err, &busy) || !busy.Busy {
			return doc, err
		}
		r.stats.BusyRetries.Add(1)
		select {
		case <-ctx.Done():
			return doc, err
		case <-time.After(time.Duration(attempt) * 5 * time.Millisecond):
		}
	}
}

// cancelOperationOnce is one cancel attempt in one transaction.
func (r *Registry) cancelOperationOnce(ctx context.Context, v Viewer, id uuid.UUID, actor Actor) (deferred.StatusDoc, error) {
	var doc deferred.StatusDoc
	err := r.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		op, err := Visible(ctx, tx, v, id)
		if err != nil {
			return err
		}
		if deferred.Status(op.Status).Terminal() {
			return fmt.Errorf("cancel operation %s: it is %s: %w", id, op.Status, ErrConflict)
		}
		if op.CancelUnavailableReason != nil {
			return &ErrNotCancelable{Reason: *op.CancelUnavailableReason}
		}
		owner, ok := r.ownerOf(op.Kind)
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
			now, err := TxNow(ctx, tx)
			if err != nil {
				return err
			}
			if cur, err = r.setStatus(ctx, tx, cur, Report{Status: deferred.StatusCancelled}, now); err != nil {
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
func (r *Registry) PollDue(ctx context.Context) (int, error) {
	var due []uuid.UUID
	if err := r.db.NewSelect().Model((*db.Operation)(nil)).Column("id").
		Where("terminal_at IS NULL AND next_poll_at <= now()").OrderExpr("next_poll_at").Limit(500).
		Scan(ctx, &due); err != nil {
		return 0, fmt.Errorf("find due operations: %w", err)
	}
	polled := 0
	for _, id := range due {
		if _, err := r.pollOne(ctx, id, false); err != nil {
			r.stats.Errors.Add(1)
			r.log.Warn("poll operation", "operation_id", id, "err", err)
			continue
		}
		polled++
	}
	r.stats.Rounds.Add(1)
	return polled, nil
}

// ExpireDue expires the operation id now if its expiry has passed and it is not terminal, as
// the poller would on its next round; it reports whether the operation is terminal afterwards.
// A claim calls it for a job whose operation expired while the job waited, so that the job
// never starts after its operation's end, however long before the poller reaches it.
func (r *Registry) ExpireDue(ctx context.Context, id uuid.UUID) (bool, error) {
	terminal, err := r.pollOne(ctx, id, true)
	if err != nil {
		r.stats.Errors.Add(1)
		return false, fmt.Errorf("expire operation %s: %w", id, err)
	}
	return terminal, nil
}

// pollOne reconciles the operation id in a transaction of its own, unless it is terminal or,
// with expiredOnly, its expiry has not passed. It reports whether the operation is terminal
// afterwards.
func (r *Registry) pollOne(ctx context.Context, id uuid.UUID, expiredOnly bool) (bool, error) {
	terminal := false
	err := r.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var op db.Operation
		if err := tx.NewSelect().Model(&op).Where("id = ?", id).Scan(ctx); err != nil {
			return err
		}
		if terminal = deferred.Status(op.Status).Terminal(); terminal {
			return nil
		}
		now, err := TxNow(ctx, tx)
		if err != nil {
			return err
		}
		if expiredOnly && now.Before(op.ExpiresAt) {
			return nil
		}
		op, err = r.reconcile(ctx, tx, op, now)
		terminal = err == nil && deferred.Status(op.Status).Terminal()
		return err
	})
	return terminal, err
}
