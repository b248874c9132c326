package batch

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
)

// visitBudget is how long one visit works on batches before it hands the worker back; the
// next visit goes on from the recorded progress.
const visitBudget = 20 * time.Second

// Advance moves every unfinished batch on, oldest first, each as far as it can go now: the
// batch worker's visit. It returns how many steps it took.
func (b *Batches) Advance(ctx context.Context) (int, error) {
	var ids []string
	if err := b.db.NewSelect().Model((*Batch)(nil)).Column("id").
		Where("status IN (?)", bun.List([]string{StatusValidating, StatusInProgress, StatusFinalizing, StatusCancelling})).
		Order("created_at").Limit(100).Scan(ctx, &ids); err != nil {
		return 0, fmt.Errorf("find unfinished batches: %w", err)
	}
	deadline := time.Now().Add(visitBudget)
	steps := 0
	var failed error
	// Round by round, one step of each batch that has more to do, so a large batch's expansion
	// holds a small one back by one chunk at most.
	for len(ids) > 0 && time.Now().Before(deadline) {
		var again []string
		for _, id := range ids {
			more, err := b.step(ctx, id)
			if err != nil {
				// One batch that cannot step holds no other back; it is tried again next visit.
				b.log.Error("a batch did not step", "batch_id", id, "err", err)
				failed = err
				continue
			}
			steps++
			if more {
				again = append(again, id)
			}
		}
		ids = again
	}
	if len(ids) > 0 {
		// Work is left: the next visit need not wait for the tick.
		err := b.db.RunInTx(ctx, nil, func(ctx context.Context, tx bun.Tx) error { return b.wake(ctx, tx) })
		return steps, errors.Join(failed, err)
	}
	return steps, failed
}

// step takes one step of batch id in a transaction of its own, and says whether another can
// follow at once. A batch another process is stepping is left to it.
//
// A step does not enter the intake lane, as submits do: it is background work, and workers
// that yielded to a long expansion would hold every org's jobs back.
func (b *Batches) step(ctx context.Context, id string) (more bool, err error) {
	err = b.reg.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var rows []Batch
		if err := tx.NewSelect().Model(&rows).Where("id = ?", id).For("UPDATE SKIP LOCKED").Scan(ctx); err != nil {
			return fmt.Errorf("lock batch %s: %w", id, err)
		}
		if len(rows) == 0 {
			return nil
		}
		bt := &rows[0]
		switch bt.Status {
		case StatusValidating:
			more = true
			return b.validate(ctx, tx, bt)
		case StatusInProgress:
			if bt.ExpandedLines < bt.TotalLines {
				more = true
				return b.expandChunk(ctx, tx, bt)
			}
			c, err := counts(ctx, tx, bt.ID)
			if err != nil {
				return err
			}
			bt.CompletedCount, bt.FailedCount = c.completed, c.failed
			cols := []string{"completed_count", "failed_count"}
			if c.unfinished == 0 {
				more = true
				bt.Status = StatusFinalizing
				cols = append(cols, "status")
				if _, err := tx.NewUpdate().Model(bt).Column(cols...).Set("finalizing_at = now()").WherePK().Exec(ctx); err != nil {
					return fmt.Errorf("record batch %s: %w", bt.ID, err)
				}
				return nil
			}
			if _, err := tx.NewUpdate().Model(bt).Column(cols...).WherePK().Exec(ctx); err != nil {
				return fmt.Errorf("record batch %s: %w", bt.ID, err)
			}
			return nil
		case StatusFinalizing:
			return b.end(ctx, tx, bt, StatusCompleted)
		case StatusCancelling:
			n, busy, err := b.cancelChunk(ctx, tx, bt)
			if err != nil || n > 0 || busy {
				more = n > 0
				return err
			}
			end := StatusCancelled
			if bt.EndAs != nil {
				end = *bt.EndAs
			}
			return b.end(ctx, tx, bt, end)
		}
		return nil
	})
	return more, err
}

// validate starts a batch whose input file is usable, and fails one whose file is gone.
func (b *Batches) validate(ctx context.Context, tx bun.Tx, bt *Batch) error {
	var f File
	err := tx.NewSelect().Model(&f).Where("id = ?", bt.InputFileID).Scan(ctx)
	if err == nil && f.LineCount > 0 {
		// A file of blank lines only holds no request either.
		var requests bool
		if requests, err = tx.NewSelect().Model((*fileLine)(nil)).Where("file_id = ?", f.ID).
			Where("length(btrim(body, '\\x090a0b0c0d20'::bytea)) > 0").Exists(ctx); err == nil && !requests {
			f.LineCount = 0
		}
	}
	if errors.Is(err, sql.ErrNoRows) || err == nil && f.LineCount == 0 {
		msg := "The input file was deleted before the batch started."
		if err == nil {
			msg = "The input file holds no request."
		}
		return b.fail(ctx, tx, bt, Problem{Code: "invalid_file", Message: msg})
	}
	if err != nil {
		return fmt.Errorf("read input file of batch %s: %w", bt.ID, err)
	}
	bt.Status, bt.TotalLines = StatusInProgress, f.LineCount
	if _, err := tx.NewUpdate().Model(bt).Column("status", "total_lines").Set("in_progress_at = now()").
		WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("start batch %s: %w", bt.ID, err)
	}
	return nil
}

// fail ends a batch whose file is unusable.
func (b *Batches) fail(ctx context.Context, tx bun.Tx, bt *Batch, p Problem) error {
	errs, _ := json.Marshal([]Problem{p})
	bt.Status, bt.Errors = StatusFailed, errs
	if _, err := tx.NewUpdate().Model(bt).Column("status", "errors").Set("failed_at = now()").WherePK().Exec(ctx); err != nil {
		return fmt.Errorf("fail batch %s: %w", bt.ID, err)
	}
	_, err := b.reg.Record(ctx, tx, bt.OperationID, reportOf(*bt))
	return err
}

// tally is how a batch's lines stand.
type tally struct{ completed, failed, unfinished int }

func counts(ctx context.Context, idb bun.IDB, id string) (tally, error) {
	var t tally
	if err := idb.QueryRowContext(ctx, countsSQL, id).Scan(&t.completed, &t.failed, &t.unfinished); err != nil {
		return tally{}, fmt.Errorf("count the lines of batch %s: %w", id, err)
	}
	return t, nil
}

// cancelChunk cancels up to ChunkLines unfinished jobs of a cancelling batch and returns how
// many it cancelled; a job locked right now (being finalised) is left for the next visit
// (busy).
func (b *Batches) cancelChunk(ctx context.Context, tx bun.Tx, bt *Batch) (n int, busy bool, err error) {
	var js []db.Job
	if err := tx.NewSelect().Model(&js).
		Where("id IN (SELECT job_id FROM sa_batch_request WHERE batch_id = ? AND job_id IS NOT NULL)", bt.ID).
		Where("state IN ('queued', 'running')").Limit(ChunkLines).For("UPDATE SKIP LOCKED").Scan(ctx); err != nil {
		return 0, false, fmt.Errorf("lock the unfinished jobs of batch %s: %w", bt.ID, err)
	}
	kind := ""
	if bt.EndAs != nil && *bt.EndAs == StatusExpired {
		kind = jobs.KindExpired
	}
	actor := jobs.Actor{Name: "batch:" + bt.ID}
	for _, j := range js {
		if _, err := b.jobs.CancelJobTx(ctx, tx, j, kind, actor); err != nil && !errors.Is(err, jobs.ErrConflict) {
			return 0, false, err
		}
	}
	if len(js) == 0 {
		// Jobs locked by another transaction are still unfinished: wait for the next visit.
		c, err := counts(ctx, tx, bt.ID)
		if err != nil {
			return 0, false, err
		}
		return 0, c.unfinished > 0, nil
	}
	return len(js), false, nil
}
