package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// DeliverArgs are the River job arguments of a delivery: only its ledger id.
type DeliverArgs struct {
	DeliveryID uuid.UUID `json:"delivery_id"`
}

// Kind is the River job kind.
func (DeliverArgs) Kind() string { return "artifact.deliver" }

// vehicleMaxAttempts bounds River's own retries of a delivery vehicle, which happen only
// after infrastructure errors, as for prompt vehicles.
const vehicleMaxAttempts = 25

// insertOpts are the River options of a delivery vehicle. As for prompts, River's own
// retries only follow infrastructure errors; delivery retries are snoozes (see run).
func insertOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: Queue, MaxAttempts: vehicleMaxAttempts}
}

// accept is the delivery runtime's subscription to settled operations: a completed
// prompt.execute operation is delivered when its org has a webhook URL.
func (ds *Deliveries) accept(ctx context.Context, tx bun.Tx, settled registry.Settled) error {
	if settled.Op.Kind != jobs.KindPromptExecute || settled.Op.Status != string(deferred.StatusCompleted) {
		return nil
	}
	return ds.acceptTx(ctx, tx, settled.Batch, settled.Op)
}

// acceptTx accepts the delivery of a completed prompt operation when its org has a
// webhook URL; it runs in the transaction that records the completion, its writes going
// through b (nil: at once). The org's webhook and the clock come from the registry lock when
// it read them.
func (ds *Deliveries) acceptTx(ctx context.Context, tx bun.Tx, b *db.Batch, promptOp registry.Locked) error {
	webhook := promptOp.OrgWebhookURL
	if !promptOp.OrgWebhookRead {
		var org db.Org
		if err := tx.NewSelect().Model(&org).Column("id", "webhook_url").Where("id = ?", promptOp.OrgID).Scan(ctx); err != nil {
			return fmt.Errorf("read webhook of org %d: %w", promptOp.OrgID, err)
		}
		webhook = org.WebhookURL
	}
	if webhook == nil || strings.TrimSpace(*webhook) == "" {
		return nil
	}
	var res struct {
		PromptID   uuid.UUID `json:"prompt_id"`
		JobID      uuid.UUID `json:"job_id"`
		ResponseID uuid.UUID `json:"response_id"`
	}
	if err := json.Unmarshal(promptOp.Result, &res); err != nil || res.ResponseID == uuid.Nil {
		return nil // a completed prompt without a response has nothing to deliver
	}
	now := promptOp.TxNow
	if now.IsZero() {
		var err error
		if now, err = registry.TxNow(ctx, tx); err != nil {
			return err
		}
	}
	cfg := ds.cfg
	subject := map[string]string{"prompt_id": res.PromptID.String(), "job_id": res.JobID.String(),
		"response_id": res.ResponseID.String()}
	h, err := deferred.NewHandle(deferred.HandleRequest{Kind: Kind, Owner: OwnerName,
		Subject: subject, CorrelationID: promptOp.CorrelationID.String(), RetryAfterSeconds: jobs.DefaultRetryAfterSeconds,
		TTL: cfg.TTL}, ds.reg.Policy(), now)
	if err != nil {
		return fmt.Errorf("build delivery handle: %w", err)
	}
	if exists, err := tx.NewSelect().Model((*db.Operation)(nil)).Where("id = ?", h.OperationID).Exists(ctx); err != nil || exists {
		return err
	}
	// The writes go to the caller's batch, or to one of this acceptance that runs at the end.
	own := b == nil
	if own {
		b = db.NewBatch(tx)
	}
	op, err := ds.reg.RecordAccepted(ctx, tx, b, h, promptOp.OrgID, promptOp.CreatedBy, promptOp.CorrelationID)
	if err != nil {
		return err
	}
	d := Delivery{ID: uuid.New(), OperationID: op.ID, OrgID: op.OrgID, CreatedBy: op.CreatedBy, PromptID: res.PromptID,
		JobID: res.JobID, ResponseID: res.ResponseID, URL: strings.TrimSpace(*webhook), State: Accepted,
		MaxAttempts: cfg.MaxAttempts, NextAttemptAt: now}
	ins, err := ds.insert.InsertTx(ctx, tx.Tx, DeliverArgs{DeliveryID: d.ID}, insertOpts())
	if err != nil {
		return fmt.Errorf("enqueue delivery %s: %w", d.ID, err)
	}
	d.RiverJobID = &ins.Job.ID
	if err := b.Add(tx.NewInsert().Model(&d)); err != nil {
		return fmt.Errorf("insert delivery %s: %w", d.ID, err)
	}
	ev, err := registry.OperationEvent(tx, op)
	if err != nil {
		return err
	}
	if err := b.Add(ev); err != nil {
		return err
	}
	entry, err := jobs.AuditEntry(op.OrgID, nil, "delivery", "delivery.accepted", "delivery", d.ID.String(),
		map[string]any{"operation_id": op.ID, "job_id": res.JobID})
	if err != nil {
		return err
	}
	b.Insert(entry.InsertStatement())
	if own {
		return b.Exec(ctx, tx)
	}
	return nil
}
