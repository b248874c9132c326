package batch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// Kind is the operation kind the batch owner registers.
func (*Batches) Kind() string { return Kind }

// MirrorsStatus says the batch owner records every end of a batch on its registry row
// itself (and the registry records a cancel as it asks for it); the poller visits a batch's
// operation only at its expiry.
func (*Batches) MirrorsStatus() bool { return true }

// Report maps the batch onto the registry: every unfinished status is running.
func (b *Batches) Report(ctx context.Context, tx bun.Tx, op db.Operation) (registry.Report, error) {
	var bt Batch
	err := tx.NewSelect().Model(&bt).Where("operation_id = ?", op.ID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return registry.Report{Status: deferred.StatusUnknown, ErrorKind: "unknown", ErrorMessage: "no batch belongs to this operation"}, nil
	}
	if err != nil {
		return registry.Report{}, fmt.Errorf("read batch of operation %s: %w", op.ID, err)
	}
	return reportOf(bt), nil
}

// reportOf is the registry's view of bt.
func reportOf(bt Batch) registry.Report {
	switch bt.Status {
	case StatusCompleted:
		return registry.Report{Status: deferred.StatusCompleted, Result: batchResult(bt)}
	case StatusFailed:
		return registry.Report{Status: deferred.StatusFailed, ErrorKind: "invalid_file", ErrorMessage: "the batch's input file is unusable"}
	case StatusCancelled:
		return registry.Report{Status: deferred.StatusCancelled}
	case StatusExpired:
		return registry.Report{Status: deferred.StatusExpired, ErrorKind: jobs.KindExpired,
			ErrorMessage: "the batch's completion window ended before its last request"}
	case StatusCancelling:
		return registry.Report{Status: deferred.StatusRunning, CancelUnavailable: "the batch is being cancelled"}
	}
	return registry.Report{Status: deferred.StatusRunning}
}

// Cancel makes an unfinished batch cancelling (to end expired when errorKind is expired): the
// batch worker cancels its unfinished jobs and writes its files. An ended batch is
// jobs.ErrConflict.
func (b *Batches) Cancel(ctx context.Context, tx bun.Tx, op db.Operation, errorKind string, actor registry.Actor) error {
	var bt Batch
	if err := tx.NewSelect().Model(&bt).Where("operation_id = ?", op.ID).For("UPDATE").Scan(ctx); err != nil {
		return fmt.Errorf("lock batch of operation %s: %w", op.ID, err)
	}
	if terminal(bt.Status) || bt.Status == StatusCancelling {
		return fmt.Errorf("cancel batch %s: it is %s: %w", bt.ID, bt.Status, jobs.ErrConflict)
	}
	if err := startCancelling(ctx, tx, bt.ID, errorKind); err != nil {
		return err
	}
	if err := jobs.Audit(ctx, tx, bt.OrgID, actor.UserID, actor.Name, "batch.cancelling", "batch", bt.ID,
		map[string]any{"error_kind": errorKind}); err != nil {
		return err
	}
	return b.wake(ctx, tx)
}

// Consume stops a batch whose operation the registry ended by itself (its window passed, an
// unknown status): a batch never outlives its operation.
func (b *Batches) Consume(ctx context.Context, tx bun.Tx, op db.Operation) error {
	if deferred.Status(op.Status) == deferred.StatusCompleted {
		return nil
	}
	kind := ""
	if deferred.Status(op.Status) == deferred.StatusExpired {
		kind = jobs.KindExpired
	}
	var bt Batch
	err := tx.NewSelect().Model(&bt).Where("operation_id = ?", op.ID).For("UPDATE").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock batch of operation %s: %w", op.ID, err)
	}
	if terminal(bt.Status) || bt.Status == StatusCancelling {
		return nil
	}
	if err := startCancelling(ctx, tx, bt.ID, kind); err != nil {
		return err
	}
	return b.wake(ctx, tx)
}

// startCancelling marks batch id cancelling, to end expired for errorKind expired and
// cancelled otherwise.
func startCancelling(ctx context.Context, tx bun.Tx, id, errorKind string) error {
	endAs := StatusCancelled
	if errorKind == jobs.KindExpired {
		endAs = StatusExpired
	}
	if _, err := tx.NewUpdate().Model((*Batch)(nil)).Set("status = ?", StatusCancelling).Set("end_as = ?", endAs).
		Set("cancelling_at = now()").Where("id = ?", id).Exec(ctx); err != nil {
		return fmt.Errorf("cancel batch %s: %w", id, err)
	}
	return nil
}
