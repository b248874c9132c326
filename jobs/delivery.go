package jobs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
)

// artifact.delivery: a succeeded prompt response is delivered to its org's webhook.
//
// Acceptance. In the transaction that records a prompt.execute operation as completed (the job
// succeeded), when the org has a webhook URL, the delivery is accepted: a registry row of kind
// artifact.delivery (subject prompt_id, job_id, response_id; its id is deterministic from
// them, so a second settlement of the same operation accepts nothing new), a ledger row in
// sa_delivery (state accepted) and a River job (kind artifact.deliver, queue deliveries).
//
// Sending. The worker marks the ledger row in flight (attempts+1, a fresh in_flight_token, one
// sa_delivery_attempt row) in one transaction, which also sets the registry row running with
// cancel/unavailable-reason "the delivery request is in flight"; then POSTs the body
//
//	{"schema":"asterion.delivery.v1","delivery_id","operation_id","prompt_id","job_id",
//	 "response_id","text","created_at"}
//
// with X-Asterion-Delivery: <delivery_id> and X-Asterion-Signature: sha256=<hex HMAC-SHA256 of
// the body under the org's webhook secret>; then, in a second transaction and only while the
// row is still in flight under the same token, records the outcome and clears the in-flight
// marker (and so the cancel reason):
//
//	2xx                                   delivered (operation completed)
//	408, 429, 5xx, timeout, connection    retryable after DeliveryConfig.Backoff(attempt),
//	                                      failed (retries_exhausted) after MaxAttempts
//	any other status (3xx, 4xx)           failed (receiver_4xx, receiver_3xx …)
//
// Status mapping (ledger state → registry status, cancel surface), used by the worker's own
// writes and by the poller through deliveryOwner.Report:
//
//	accepted   → pending    cancel_href
//	in_flight  → running    cancel/unavailable-reason "the delivery request is in flight"
//	retryable  → running    cancel_href
//	delivered  → completed  result {delivery_id, status_code, attempts}
//	failed     → failed     error {kind, message}
//	cancelled  → cancelled
//	expired    → expired    error {kind: expired}
//	(no ledger row) → unknown
//
// Delivery is at least once, with an id. A request whose outcome was never recorded (the
// process died or was stopped while it was in flight) is sent again, with the same body and
// the same X-Asterion-Delivery id; the receiver deduplicates on that id. What is exactly once
// is the ledger and the registry: one delivery row per operation, and its terminal status is
// recorded once, by the conditional writes above (state = in_flight AND token = mine), so a
// late answer of an execution that lost its marker is recorded as "late" and changes nothing.
//
// Recovery after a restart. River keeps the job of an accepted or retryable delivery, so a new
// worker pool simply runs it. RecoverDeliveries (a periodic leader job, also on start) finds
// ledger rows whose vehicle is gone: accepted or retryable rows whose River job is missing or
// finished, and in-flight rows whose marker is older than the lease (the execution holding it
// died), and gives each a new River job. A vehicle that is no longer the row's (river_job_id)
// ends without doing anything.

// Delivery constants.
const (
	// KindArtifactDelivery is the deferred-operation kind of a webhook delivery.
	KindArtifactDelivery = "artifact.delivery"
	// OwnerDeliveryRuntime is the component that owns deliveries.
	OwnerDeliveryRuntime = "asterion.delivery"
	// QueueDeliveries is the River queue of delivery jobs.
	QueueDeliveries = "deliveries"
	// DeliverySchema names the body of a delivery request.
	DeliverySchema = "asterion.delivery.v1"
	// DeliveryInFlightReason is the cancel/unavailable-reason while a request is in flight.
	DeliveryInFlightReason = "the delivery request is in flight"
	// Headers of a delivery request.
	HeaderDeliveryID        = "X-Asterion-Delivery"
	HeaderDeliverySignature = "X-Asterion-Signature"
	HeaderDeliveryAttempt   = "X-Asterion-Attempt"
)

// Ledger states of a delivery.
const (
	DeliveryAccepted  = "accepted"
	DeliveryInFlight  = "in_flight"
	DeliveryRetryable = "retryable"
	DeliveryDelivered = "delivered"
	DeliveryFailed    = "failed"
	DeliveryCancelled = "cancelled"
	DeliveryExpired   = "expired"
)

// DeliveryConfig configures webhook delivery. Zero fields take their defaults.
type DeliveryConfig struct {
	// Timeout bounds one HTTP request (default 10 s).
	Timeout time.Duration
	// MaxAttempts bounds the attempts of one delivery (default 8).
	MaxAttempts int
	// BackoffBase is the wait after the first failed attempt; it doubles per attempt
	// (default 1 s: 1 s, 2 s, 4 s …).
	BackoffBase time.Duration
	// BackoffMax caps the wait (default 60 s).
	BackoffMax time.Duration
	// Lease is how long an in-flight marker is trusted; an older one belongs to an execution
	// that died (default Timeout + 30 s).
	Lease time.Duration
	// RecoverEvery is how often the leader looks for deliveries whose River job is gone
	// (default 30 s).
	RecoverEvery time.Duration
	// TTL is the TTL the delivery kind asks for (clamped by the policy; zero: its default).
	TTL time.Duration
	// Client sends the requests (default: one that follows no redirects).
	Client *http.Client
}

func (c DeliveryConfig) withDefaults() DeliveryConfig {
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Second
	}
	if c.MaxAttempts <= 0 {
		c.MaxAttempts = 8
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = time.Second
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = time.Minute
	}
	if c.BackoffMax < c.BackoffBase {
		c.BackoffMax = c.BackoffBase
	}
	if c.Lease <= c.Timeout {
		c.Lease = c.Timeout + 30*time.Second
	}
	if c.RecoverEvery <= 0 {
		c.RecoverEvery = 30 * time.Second
	}
	if c.Client == nil {
		c.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	return c
}

// Backoff is the wait after failed attempt n (1-based): BackoffBase·2^(n-1), at most BackoffMax.
func (c DeliveryConfig) Backoff(n int) time.Duration {
	c = c.withDefaults()
	d := c.BackoffBase
	for i := 1; i < n && d < c.BackoffMax; i++ {
		d *= 2
	}
	return min(d, c.BackoffMax)
}

func (s *Service) deliveryCfg() DeliveryConfig { return s.cfg.Delivery.withDefaults() }

// Delivery is a row of the delivery ledger (sa_delivery).
type Delivery struct {
	bun.BaseModel  `bun:"table:sa_delivery"`
	ID             uuid.UUID  `bun:"id,pk,type:uuid"`
	OperationID    uuid.UUID  `bun:"operation_id,type:uuid"`
	OrgID          int64      `bun:"org_id"`
	CreatedBy      int64      `bun:"created_by"`
	PromptID       uuid.UUID  `bun:"prompt_id,type:uuid"`
	JobID          uuid.UUID  `bun:"job_id,type:uuid"`
	ResponseID     uuid.UUID  `bun:"response_id,type:uuid"`
	URL            string     `bun:"url"`
	State          string     `bun:"state"`
	Attempts       int        `bun:"attempts"`
	MaxAttempts    int        `bun:"max_attempts"`
	NextAttemptAt  time.Time  `bun:"next_attempt_at,nullzero,default:now()"`
	InFlightSince  *time.Time `bun:"in_flight_since"`
	InFlightToken  *string    `bun:"in_flight_token"`
	LastStatusCode *int       `bun:"last_status_code"`
	LastError      *string    `bun:"last_error"`
	ErrorKind      *string    `bun:"error_kind"`
	RiverJobID     *int64     `bun:"river_job_id"`
	CreatedAt      time.Time  `bun:"created_at,nullzero,default:now()"`
	UpdatedAt      time.Time  `bun:"updated_at,nullzero,default:now()"`
	FinishedAt     *time.Time `bun:"finished_at"`
}

// DeliveryAttempt is one HTTP attempt of a delivery (sa_delivery_attempt).
type DeliveryAttempt struct {
	bun.BaseModel `bun:"table:sa_delivery_attempt"`
	ID            int64      `bun:"id,pk,autoincrement"`
	DeliveryID    uuid.UUID  `bun:"delivery_id,type:uuid"`
	Attempt       int        `bun:"attempt"`
	StartedAt     time.Time  `bun:"started_at,nullzero,default:now()"`
	FinishedAt    *time.Time `bun:"finished_at"`
	StatusCode    *int       `bun:"status_code"`
	Error         *string    `bun:"error"`
	Outcome       *string    `bun:"outcome"`
}

// DeliveryDetail is a delivery with its attempts, oldest first.
type DeliveryDetail struct {
	Delivery Delivery
	Attempts []DeliveryAttempt
}

// DeliveryOf returns the delivery of a visible artifact.delivery operation, or ErrNotFound.
func (s *Service) DeliveryOf(ctx context.Context, v Viewer, operationID uuid.UUID) (DeliveryDetail, error) {
	var d DeliveryDetail
	err := s.db.NewSelect().Model(&d.Delivery).Where("operation_id = ?", operationID).Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) || (err == nil && !v.Sees(d.Delivery.OrgID, d.Delivery.CreatedBy)) {
		return DeliveryDetail{}, fmt.Errorf("delivery of operation %s: %w", operationID, ErrNotFound)
	}
	if err != nil {
		return DeliveryDetail{}, fmt.Errorf("delivery of operation %s: %w", operationID, err)
	}
	if err := s.db.NewSelect().Model(&d.Attempts).Where("delivery_id = ?", d.Delivery.ID).OrderExpr("attempt").
		Scan(ctx); err != nil {
		return DeliveryDetail{}, fmt.Errorf("attempts of delivery %s: %w", d.Delivery.ID, err)
	}
	return d, nil
}

// DeliverArgs are the River job arguments of a delivery: only its ledger id.
type DeliverArgs struct {
	DeliveryID uuid.UUID `json:"delivery_id"`
}

// Kind is the River job kind.
func (DeliverArgs) Kind() string { return "artifact.deliver" }

// deliveryInsertOpts are the River options of a delivery vehicle. As for prompts, River's own
// retries only follow infrastructure errors; delivery retries are snoozes (see runDelivery).
func deliveryInsertOpts() *river.InsertOpts {
	return &river.InsertOpts{Queue: QueueDeliveries, MaxAttempts: vehicleMaxAttempts}
}

// acceptDelivery is the delivery runtime's subscription to settled operations: a completed
// prompt.execute operation is delivered when its org has a webhook URL.
func (s *Service) acceptDelivery(ctx context.Context, tx bun.Tx, settled registry.Settled) error {
	if settled.Op.Kind != KindPromptExecute || settled.Op.Status != string(deferred.StatusCompleted) {
		return nil
	}
	return s.acceptDeliveryTx(ctx, tx, settled.Batch, settled.Op)
}

// acceptDeliveryTx accepts the delivery of a completed prompt operation when its org has a
// webhook URL; it runs in the transaction that records the completion, its writes going
// through b (nil: at once). The org's webhook and the clock come from the registry lock when
// it read them.
func (s *Service) acceptDeliveryTx(ctx context.Context, tx bun.Tx, b *db.Batch, promptOp registry.Locked) error {
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
		if now, err = txNow(ctx, tx); err != nil {
			return err
		}
	}
	cfg := s.deliveryCfg()
	subject := map[string]string{"prompt_id": res.PromptID.String(), "job_id": res.JobID.String(),
		"response_id": res.ResponseID.String()}
	h, err := deferred.NewHandle(deferred.HandleRequest{Kind: KindArtifactDelivery, Owner: OwnerDeliveryRuntime,
		Subject: subject, CorrelationID: promptOp.CorrelationID.String(), RetryAfterSeconds: DefaultRetryAfterSeconds,
		TTL: cfg.TTL}, s.cfg.Policy, now)
	if err != nil {
		return fmt.Errorf("build delivery handle: %w", err)
	}
	if exists, err := tx.NewSelect().Model((*db.Operation)(nil)).Where("id = ?", h.OperationID).Exists(ctx); err != nil || exists {
		return err
	}
	w := writesTo(tx, b)
	op, err := s.reg.RecordAccepted(ctx, tx, w.b, h, promptOp.OrgID, promptOp.CreatedBy, promptOp.CorrelationID)
	if err != nil {
		return err
	}
	d := Delivery{ID: uuid.New(), OperationID: op.ID, OrgID: op.OrgID, CreatedBy: op.CreatedBy, PromptID: res.PromptID,
		JobID: res.JobID, ResponseID: res.ResponseID, URL: strings.TrimSpace(*webhook), State: DeliveryAccepted,
		MaxAttempts: cfg.MaxAttempts, NextAttemptAt: now}
	ins, err := s.insert.InsertTx(ctx, tx.Tx, DeliverArgs{DeliveryID: d.ID}, deliveryInsertOpts())
	if err != nil {
		return fmt.Errorf("enqueue delivery %s: %w", d.ID, err)
	}
	d.RiverJobID = &ins.Job.ID
	if err := w.add(tx.NewInsert().Model(&d)); err != nil {
		return fmt.Errorf("insert delivery %s: %w", d.ID, err)
	}
	ev, err := registry.OperationEvent(tx, op)
	if err != nil {
		return err
	}
	if err := w.add(ev); err != nil {
		return err
	}
	entry, err := auditEntry(op.OrgID, nil, "delivery", "delivery.accepted", "delivery", d.ID.String(),
		map[string]any{"operation_id": op.ID, "job_id": res.JobID})
	if err != nil {
		return err
	}
	if err := w.insert(entry); err != nil {
		return err
	}
	return w.flush(ctx)
}

// deliveryOwner owns artifact.delivery operations; its ledger is sa_delivery.
type deliveryOwner struct{ s *Service }

func (deliveryOwner) Kind() string { return KindArtifactDelivery }

// deliveryReport maps a ledger row onto the registry (the table in the file comment).
func deliveryReport(d Delivery) Report {
	switch d.State {
	case DeliveryAccepted:
		return Report{Status: deferred.StatusPending}
	case DeliveryInFlight:
		return Report{Status: deferred.StatusRunning, CancelUnavailable: DeliveryInFlightReason}
	case DeliveryRetryable:
		return Report{Status: deferred.StatusRunning}
	case DeliveryDelivered:
		code := 0
		if d.LastStatusCode != nil {
			code = *d.LastStatusCode
		}
		r, _ := json.Marshal(map[string]any{"delivery_id": d.ID, "status_code": code, "attempts": d.Attempts})
		return Report{Status: deferred.StatusCompleted, Result: r}
	case DeliveryCancelled:
		return Report{Status: deferred.StatusCancelled}
	case DeliveryExpired:
		return Report{Status: deferred.StatusExpired, ErrorKind: KindExpired, ErrorMessage: "the delivery expired before it was delivered"}
	}
	kind, msg := "delivery_failed", "the delivery failed"
	if d.ErrorKind != nil && *d.ErrorKind != "" {
		kind = *d.ErrorKind
	}
	if d.LastError != nil && *d.LastError != "" {
		msg = *d.LastError
	}
	return Report{Status: deferred.StatusFailed, ErrorKind: kind, ErrorMessage: msg}
}

func (o deliveryOwner) Report(ctx context.Context, tx bun.Tx, op db.Operation) (Report, error) {
	// FOR SHARE waits for a worker's transaction on the row, so the report is never older
	// than what that transaction is about to mirror onto the registry.
	var d Delivery
	err := tx.NewSelect().Model(&d).Where("operation_id = ?", op.ID).For("SHARE").Scan(ctx)
	if errors.Is(err, sql.ErrNoRows) {
		return Report{Status: deferred.StatusUnknown, ErrorKind: "unknown", ErrorMessage: "the delivery ledger has no row for this operation"}, nil
	}
	if err != nil {
		return Report{}, fmt.Errorf("read delivery of operation %s: %w", op.ID, err)
	}
	return deliveryReport(d), nil
}

// Cancel ends a delivery that is waiting (accepted or retryable); one in flight is not
// cancelable. It locks the ledger row (a worker marking it in flight right now is waited for,
// and then refused); the caller records the terminal status on the registry row after it.
func (o deliveryOwner) Cancel(ctx context.Context, tx bun.Tx, op db.Operation, errorKind string, actor Actor) error {
	var d Delivery
	if err := tx.NewSelect().Model(&d).Where("operation_id = ?", op.ID).For("UPDATE").Scan(ctx); err != nil {
		return fmt.Errorf("lock delivery of operation %s: %w", op.ID, err)
	}
	switch d.State {
	case DeliveryInFlight:
		return &ErrNotCancelable{Reason: DeliveryInFlightReason}
	case DeliveryAccepted, DeliveryRetryable:
	default:
		return fmt.Errorf("cancel delivery %s: it is %s: %w", d.ID, d.State, ErrConflict)
	}
	to := DeliveryCancelled
	if errorKind == KindExpired {
		to = DeliveryExpired
	}
	if _, err := tx.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", to).Set("finished_at = now()").
		Where("id = ?", d.ID).Exec(ctx); err != nil {
		return fmt.Errorf("cancel delivery %s: %w", d.ID, err)
	}
	if d.RiverJobID != nil {
		if _, err := o.s.insert.JobCancelTx(ctx, tx.Tx, *d.RiverJobID); err != nil && !errors.Is(err, rivertype.ErrNotFound) {
			return fmt.Errorf("cancel river job of delivery %s: %w", d.ID, err)
		}
	}
	return audit(ctx, tx, d.OrgID, actor.UserID, actor.Name, "delivery."+to, "delivery", d.ID.String(),
		map[string]any{"from": d.State, "attempts": d.Attempts})
}

func (deliveryOwner) Consume(context.Context, bun.Tx, db.Operation) error { return nil }
