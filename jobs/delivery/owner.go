package delivery

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// The delivery owner: artifact.delivery operations, whose truth is the ledger sa_delivery.

// Kind is the operation kind the delivery owner registers.
func (*Deliveries) Kind() string { return Kind }

// report maps a ledger row onto the registry (the table in the package comment).
func report(d Delivery) registry.Report {
	switch d.State {
	case Accepted:
		return registry.Report{Status: deferred.StatusPending}
	case InFlight:
		return registry.Report{Status: deferred.StatusRunning, CancelUnavailable: InFlightReason}
	case Retryable:
		return registry.Report{Status: deferred.StatusRunning}
	case Delivered:
		code := 0
		if d.LastStatusCode != nil {
			code = *d.LastStatusCode
		}
		r, _ := json.Marshal(map[string]any{"delivery_id": d.ID, "status_code": code, "attempts": d.Attempts})
		return registry.Report{Status: deferred.StatusCompleted, Result: r}
	case Cancelled:
		return registry.Report{Status: deferred.StatusCancelled}
	case Expired:
		return registry.Report{Status: deferred.StatusExpired, ErrorKind: jobs.KindExpired, ErrorMessage: "the delivery expired before it was delivered"}
	}
	kind, msg := "delivery_failed", "the delivery failed"
	if d.ErrorKind != nil && *d.ErrorKind != "" {
		kind = *d.ErrorKind
	}
	if d.LastError != nil && *d.LastError != "" {
		msg = *d.LastError
	}
	return registry.Report{Status: deferred.StatusFailed, ErrorKind: kind, ErrorMessage: msg}
}

// Report maps the ledger row onto the registry (the status mapping in the package comment).
func (ds *Deliveries) Report(ctx context.Context, tx bun.Tx, op db.Operation) (registry.Report, error) {
	// FOR SHARE waits for a worker's transaction on the row, so the report is never older
	// than what that transaction is about to mirror onto the registry.
	var d Delivery
	err := tx.NewSelect().Model(&d).Where("operation_id = ?", op.ID).For("SHARE").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return registry.Report{Status: deferred.StatusUnknown, ErrorKind: "unknown", ErrorMessage: "the delivery ledger has no row for this operation"}, nil
	}
	if err != nil {
		return registry.Report{}, fmt.Errorf("read delivery of operation %s: %w", op.ID, err)
	}
	return report(d), nil
}

// Cancel ends a delivery that is waiting (accepted or retryable); one in flight is not
// cancelable. It locks the ledger row (a worker marking it in flight right now is waited for,
// and then refused); the caller records the terminal status on the registry row after it.
func (ds *Deliveries) Cancel(ctx context.Context, tx bun.Tx, op db.Operation, errorKind string, actor registry.Actor) error {
	var d Delivery
	if err := tx.NewSelect().Model(&d).Where("operation_id = ?", op.ID).For("UPDATE").Scan(ctx); err != nil {
		return fmt.Errorf("lock delivery of operation %s: %w", op.ID, err)
	}
	switch d.State {
	case InFlight:
		return &registry.ErrNotCancelable{Reason: InFlightReason}
	case Accepted, Retryable:
	default:
		return fmt.Errorf("cancel delivery %s: it is %s: %w", d.ID, d.State, jobs.ErrConflict)
	}
	to := Cancelled
	if errorKind == jobs.KindExpired {
		to = Expired
	}
	if _, err := tx.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", to).Set("finished_at = now()").
		Where("id = ?", d.ID).Exec(ctx); err != nil {
		return fmt.Errorf("cancel delivery %s: %w", d.ID, err)
	}
	if d.RiverJobID != nil {
		if _, err := ds.insert.JobCancelTx(ctx, tx.Tx, *d.RiverJobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("cancel river job of delivery %s: %w", d.ID, err)
		}
	}
	return jobs.Audit(ctx, tx, d.OrgID, actor.UserID, actor.Name, "delivery."+to, "delivery", d.ID.String(),
		map[string]any{"from": d.State, "attempts": d.Attempts})
}

// Consume has nothing to do: the ledger is settled before the registry row is.
func (*Deliveries) Consume(context.Context, bun.Tx, db.Operation) error { return nil }
