package chain

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// Resume continues a chain whose awaited step operation has settled (see the package comment).
// It runs in the transaction that recorded the settlement.
func (c *Chains) Resume(ctx context.Context, tx bun.Tx, awaited db.Operation, data []byte) error {
	return c.resume(ctx, tx, awaited, data)
}

// resume continues a chain whose awaited step operation has just settled.
func (c *Chains) resume(ctx context.Context, tx bun.Tx, awaited db.Operation, data []byte) error {
	var cont continuation
	if err := json.Unmarshal(data, &cont); err != nil {
		return fmt.Errorf("decode continuation suspended on %s: %w", awaited.ID, err)
	}
	// Lock order: the chain row, then its registry row (written below), as in Cancel.
	var ch Chain
	err := tx.NewSelect().Model(&ch).Where("id = ?", cont.ChainID).For("UPDATE").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		c.log.Warn("a continuation named a chain that does not exist", "operation_id", awaited.ID)
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock chain %s: %w", cont.ChainID, err)
	}
	if ch.State != Running || ch.CurrentStep != cont.Step {
		return nil // the chain ended (cancelled, expired) while the step ran
	}
	var res struct {
		ResponseID uuid.UUID `json:"response_id"`
	}
	_ = json.Unmarshal(awaited.Result, &res)
	step := tx.NewUpdate().Model((*StepRow)(nil)).Set("state = ?", awaited.Status).
		Where("chain_id = ? AND step = ?", ch.ID, cont.Step)
	if res.ResponseID != uuid.Nil {
		step = step.Set("response_id = ?", res.ResponseID)
	}
	if _, err := step.Exec(ctx); err != nil {
		return fmt.Errorf("record chain %s step %d: %w", ch.ID, cont.Step, err)
	}
	if awaited.Status != string(deferred.StatusCompleted) || res.ResponseID == uuid.Nil {
		kind := deref(awaited.LastErrorKind)
		msg := fmt.Sprintf("step %d of %d ended %s", cont.Step, ch.StepCount, awaited.Status)
		if kind != "" {
			msg += " (" + kind + ")"
		}
		if m := deref(awaited.LastErrorMessage); m != "" {
			msg += ": " + m
		}
		id := awaited.ID
		return c.failTx(ctx, tx, &ch, Diagnostic{ChainID: ch.ID, Step: cont.Step, StepCount: ch.StepCount,
			Operation: &id, Status: awaited.Status, ErrorKind: kind, Message: truncate(msg, 2000)}, "step_"+awaited.Status)
	}
	cont.Responses = append(cont.Responses, res.ResponseID)
	if cont.Step == ch.StepCount {
		result, err := json.Marshal(map[string]any{"chain_id": ch.ID, "responses": cont.Responses})
		if err != nil {
			return err
		}
		if _, err := tx.NewUpdate().Model((*Chain)(nil)).Set("state = ?", Completed).Set("result = ?", string(result)).
			Set("finished_at = now()").Where("id = ?", ch.ID).Exec(ctx); err != nil {
			return fmt.Errorf("complete chain %s: %w", ch.ID, err)
		}
		_, err = c.reg.Record(ctx, tx, ch.OperationID, registry.Report{Status: deferred.StatusCompleted, Result: result})
		return err
	}
	var prev db.Entity
	if err := tx.NewSelect().Model(&prev).Where("id = ?", res.ResponseID).Scan(ctx); err != nil {
		return fmt.Errorf("read response of chain %s step %d: %w", ch.ID, cont.Step, err)
	}
	cont.Step++
	err = c.suspendOnStep(ctx, tx, &ch, cont, &prev)
	if kind, msg, ok := refusedStep(err); ok {
		// The step before settled and its settlement stands: the chain fails at the step
		// admission refused, with what refused it.
		return c.failTx(ctx, tx, &ch, Diagnostic{ChainID: ch.ID, Step: cont.Step, StepCount: ch.StepCount,
			Status: "refused", ErrorKind: kind, Message: truncate(fmt.Sprintf("step %d of %d was refused: %s", cont.Step,
				ch.StepCount, msg), 2000)}, kind)
	}
	return err
}

// refusedStep says whether err is admission's refusal of a step (a limit, or a field rule
// its text broke), with the kind of refusal and its message.
func refusedStep(err error) (kind, msg string, ok bool) {
	if r, is := admit.AsRefusal(err); is {
		return r.Kind(), r.Error(), true
	}
	var verr *registry.ValidationError
	if errors.As(err, &verr) {
		return "invalid_step", verr.Error(), true
	}
	return "", "", false
}

// failTx ends a running chain as failed with diag: the diagnostic on sa_chain, its digest
// and the error on the registry row, the steps that never ran skipped.
func (c *Chains) failTx(ctx context.Context, tx bun.Tx, ch *Chain, diag Diagnostic, kind string) error {
	raw, err := deferred.CanonicalJSON(diag)
	if err != nil {
		return err
	}
	if _, err := tx.NewUpdate().Model((*Chain)(nil)).Set("state = ?", Failed).Set("diagnostic = ?", string(raw)).
		Set("finished_at = now()").Where("id = ?", ch.ID).Exec(ctx); err != nil {
		return fmt.Errorf("fail chain %s: %w", ch.ID, err)
	}
	ch.State = Failed
	if err := skipRemainingSteps(ctx, tx, ch.ID); err != nil {
		return err
	}
	if _, err := tx.NewUpdate().Model((*db.Operation)(nil)).Set("diagnostics_digest = ?", deferred.Digest(raw)).
		Where("id = ?", ch.OperationID).Exec(ctx); err != nil {
		return fmt.Errorf("record diagnostics digest of chain %s: %w", ch.ID, err)
	}
	_, err = c.reg.Record(ctx, tx, ch.OperationID, registry.Report{Status: deferred.StatusFailed, ErrorKind: truncate(kind, 32),
		ErrorMessage: diag.Message})
	return err
}

func skipRemainingSteps(ctx context.Context, tx bun.IDB, chainID uuid.UUID) error {
	_, err := tx.NewUpdate().Model((*StepRow)(nil)).Set("state = 'skipped'").
		Where("chain_id = ? AND state = 'waiting'", chainID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("skip steps of chain %s: %w", chainID, err)
	}
	return nil
}
