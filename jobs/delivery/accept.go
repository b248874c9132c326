package delivery

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/google/uuid"
	"github.com/riverqueue/river"

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
func (ds *Deliveries) accept(ctx context.Context, w *db.Writes, settled registry.Settled) error {
	if settled.Op.Kind != jobs.KindPromptExecute || settled.Op.Status != string(deferred.StatusCompleted) {
		return nil
	}
	return ds.acceptTx(ctx, w, settled.Op)
}

// acceptTx accepts the delivery of a completed prompt operation when its org has a
// webhook URL; it runs in the transaction that records the completion, its writes left in w.
// The org's webhook and the clock come from the registry lock when it read them.
func (ds *Deliveries) acceptTx(ctx context.Context, w *db.Writes, promptOp registry.Locked) error {
	webhook := promptOp.OrgWebhookURL
	if !promptOp.OrgWebhookRead {
		// The read carries the transaction's pending writes; it reads nothing they write.
		var org db.Org
		if err := w.ScanWith(ctx, &org, "SELECT id, webhook_url FROM orgs WHERE id = ?", promptOp.OrgID); err != nil {
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
		tx, err := w.Tx(ctx)
		if err != nil {
			return err
		}
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
	// Like the org's read, this one carries the pending writes, none of which is the row it
	// looks for.
	var found operationExists
	if err := w.ScanWith(ctx, &found, "SELECT EXISTS (SELECT 1 FROM sa_operation WHERE id = ?) AS found", h.OperationID); err != nil {
		return fmt.Errorf("look for delivery operation %s: %w", h.OperationID, err)
	}
	if found.Found {
		return nil
	}
	d := Delivery{ID: uuid.New(), OrgID: promptOp.OrgID, CreatedBy: promptOp.CreatedBy, PromptID: res.PromptID,
		JobID: res.JobID, ResponseID: res.ResponseID, URL: strings.TrimSpace(*webhook), State: Accepted,
		MaxAttempts: cfg.MaxAttempts, NextAttemptAt: now}
	tx, err := w.Tx(ctx)
	if err != nil {
		return err
	}
	ins, err := ds.insert.InsertTx(ctx, tx.Tx, DeliverArgs{DeliveryID: d.ID}, insertOpts())
	if err != nil {
		return fmt.Errorf("enqueue delivery %s: %w", d.ID, err)
	}
	d.RiverJobID = &ins.Job.ID
	op, err := ds.reg.RecordAccepted(w, h, promptOp.OrgID, promptOp.CreatedBy, promptOp.CorrelationID)
	if err != nil {
		return err
	}
	d.OperationID = op.ID
	if err := w.Add(tx.NewInsert().Model(&d)); err != nil {
		return fmt.Errorf("insert delivery %s: %w", d.ID, err)
	}
	ev, err := registry.OperationEvent(tx, op)
	if err != nil {
		return err
	}
	if err := w.Add(ev); err != nil {
		return err
	}
	entry, err := jobs.AuditEntry(op.OrgID, nil, "delivery", "delivery.accepted", "delivery", d.ID.String(),
		map[string]any{"operation_id": op.ID, "job_id": res.JobID})
	if err != nil {
		return err
	}
	w.Insert(entry.InsertStatement())
	return nil
}

// operationExists is the answer of acceptTx's look for its operation.
type operationExists struct {
	Found bool `bun:"found"`
}
