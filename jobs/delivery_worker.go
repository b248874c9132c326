package jobs

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs/deferred"
)

// DeliveryBody is the JSON body of a delivery request (schema asterion.delivery.v1). The
// same delivery always sends the same bytes, on every attempt.
type DeliveryBody struct {
	Schema      string    `json:"schema"`
	DeliveryID  uuid.UUID `json:"delivery_id"`
	OperationID uuid.UUID `json:"operation_id"`
	PromptID    uuid.UUID `json:"prompt_id"`
	JobID       uuid.UUID `json:"job_id"`
	ResponseID  uuid.UUID `json:"response_id"`
	Text        string    `json:"text"`
	CreatedAt   string    `json:"created_at"`
}

// SignDelivery returns the X-Asterion-Signature value of body under secret:
// "sha256=" and the lowercase hex HMAC-SHA256.
func SignDelivery(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// deliveryStart is what beginDelivery decided.
type deliveryStart struct {
	outcome claimOutcome
	wait    time.Duration
	reason  string
	d       Delivery
	token   string
	body    []byte
	secret  string
}

// runDelivery makes one attempt of a delivery and translates the outcome for River: a final
// outcome ends the vehicle, a retry snoozes it until the backoff has passed (River does not
// count a snooze as an attempt; the ledger's attempts is the one counter).
func (s *Service) runDelivery(ctx context.Context, id uuid.UUID, riverJobID int64) error {
	b, err := s.beginDelivery(ctx, id, riverJobID)
	if err != nil {
		return fmt.Errorf("begin delivery %s: %w", id, err)
	}
	switch b.outcome {
	case claimDrop:
		return river.JobCancel(errors.New(b.reason))
	case claimWait:
		return river.JobSnooze(max(b.wait, 0))
	}
	code, sendErr := s.sendDelivery(ctx, b)
	interrupted := sendErr != nil && ctx.Err() != nil
	// Recording the outcome must happen even when the worker's context has just ended.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	end, err := s.finishDelivery(fctx, b, code, sendErr, interrupted)
	if err != nil {
		return fmt.Errorf("finish delivery %s: %w", id, err)
	}
	switch {
	case end.dropped:
		return river.JobCancel(errors.New("the delivery is no longer in flight under this execution"))
	case end.state == DeliveryRetryable:
		return river.JobSnooze(max(end.wait, 0))
	}
	return nil
}

// beginDelivery marks the delivery in flight under a fresh token (attempts+1, one attempt
// row, the registry row running and not cancelable) and returns what to send; or says to drop
// the vehicle or to wait.
func (s *Service) beginDelivery(ctx context.Context, id uuid.UUID, riverJobID int64) (deliveryStart, error) {
	cfg := s.deliveryCfg()
	var out deliveryStart
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var opID uuid.UUID
		err := tx.NewSelect().Model((*Delivery)(nil)).Column("operation_id").Where("id = ?", id).Scan(ctx, &opID)
		if errors.Is(err, sql.ErrNoRows) {
			out = deliveryStart{outcome: claimDrop, reason: "no such delivery"}
			return nil
		}
		if err != nil {
			return err
		}
		// Lock order everywhere: the ledger row, then the registry row (registry.Record), the order
		// of the registry's own cancel and poll paths (work first, then registry).
		var op db.Operation
		if err := tx.NewSelect().Model(&op).Where("id = ?", opID).Scan(ctx); err != nil {
			return fmt.Errorf("read delivery operation: %w", err)
		}
		var d Delivery
		if err := tx.NewSelect().Model(&d).Where("id = ?", id).For("UPDATE").Scan(ctx); err != nil {
			return fmt.Errorf("lock delivery: %w", err)
		}
		switch {
		case d.RiverJobID == nil || *d.RiverJobID != riverJobID:
			out = deliveryStart{outcome: claimDrop, reason: "stale vehicle: the delivery moved to another river job"}
			return nil
		case deferred.Status(op.Status).Terminal():
			// The registry settled it (expired while in flight, say): the ledger follows, so
			// recovery never picks the row up again.
			if err := closeLedgerAfter(ctx, tx, d, op.Status); err != nil {
				return err
			}
			out = deliveryStart{outcome: claimDrop, reason: "the delivery operation is " + op.Status}
			return nil
		}
		now, err := txNow(ctx, tx)
		if err != nil {
			return err
		}
		switch d.State {
		case DeliveryAccepted, DeliveryRetryable:
			if d.NextAttemptAt.After(now) {
				out = deliveryStart{outcome: claimWait, wait: d.NextAttemptAt.Sub(now)}
				return nil
			}
		case DeliveryInFlight:
			if age := now.Sub(*d.InFlightSince); age < cfg.Lease {
				out = deliveryStart{outcome: claimWait, wait: cfg.Lease - age, reason: "another execution is sending it"}
				return nil
			}
			// The execution that marked it died while its request was in flight: the receiver
			// may or may not have it. It is sent again with the same delivery id.
			if _, err := tx.NewUpdate().Model((*DeliveryAttempt)(nil)).Set("finished_at = ?", now).
				Set("outcome = 'interrupted'").Set("error = ?", "the execution sending it ended before recording an answer").
				Where("delivery_id = ? AND attempt = ? AND finished_at IS NULL", d.ID, d.Attempts).Exec(ctx); err != nil {
				return fmt.Errorf("close interrupted attempt: %w", err)
			}
		default:
			out = deliveryStart{outcome: claimDrop, reason: "the delivery is " + d.State}
			return nil
		}
		if d.Attempts >= d.MaxAttempts {
			return s.settleDeliveryTx(ctx, tx, &d, now, DeliveryFailed, nil, "retries_exhausted",
				fmt.Sprintf("gave up after %d attempts", d.Attempts), &out)
		}
		var org db.Org
		if err := tx.NewSelect().Model(&org).Column("id", "webhook_secret").Where("id = ?", d.OrgID).Scan(ctx); err != nil {
			return fmt.Errorf("read webhook secret: %w", err)
		}
		if org.WebhookSecret == nil || *org.WebhookSecret == "" {
			return s.settleDeliveryTx(ctx, tx, &d, now, DeliveryFailed, nil, "webhook_unsigned",
				"the org has no webhook secret to sign the delivery with", &out)
		}
		var resp db.Entity
		err = tx.NewSelect().Model(&resp).Column("body", "created_at").Where("id = ?", d.ResponseID).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return s.settleDeliveryTx(ctx, tx, &d, now, DeliveryFailed, nil, "response_missing",
				"the response to deliver no longer exists", &out)
		}
		if err != nil {
			return fmt.Errorf("read response: %w", err)
		}
		body, err := json.Marshal(DeliveryBody{Schema: DeliverySchema, DeliveryID: d.ID, OperationID: d.OperationID,
			PromptID: d.PromptID, JobID: d.JobID, ResponseID: d.ResponseID, Text: resp.Body,
			CreatedAt: deferred.FormatTime(resp.CreatedAt)})
		if err != nil {
			return err
		}
		token := randomToken()
		if _, err := tx.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", DeliveryInFlight).
			Set("attempts = attempts + 1").Set("in_flight_since = ?", now).Set("in_flight_token = ?", token).
			Where("id = ?", d.ID).Exec(ctx); err != nil {
			return fmt.Errorf("mark delivery in flight: %w", err)
		}
		d.Attempts++
		if _, err := tx.NewInsert().Model(&DeliveryAttempt{DeliveryID: d.ID, Attempt: d.Attempts, StartedAt: now}).
			Exec(ctx); err != nil {
			return fmt.Errorf("record attempt %d: %w", d.Attempts, err)
		}
		if _, err := s.reg.Record(ctx, tx, op.ID, Report{Status: deferred.StatusRunning,
			CancelUnavailable: DeliveryInFlightReason}); err != nil {
			return err
		}
		out = deliveryStart{outcome: claimed, d: d, token: token, body: body, secret: *org.WebhookSecret}
		return nil
	})
	return out, err
}

// sendDelivery POSTs the body once and returns the status code, or the error of a request
// that got no answer.
func (s *Service) sendDelivery(ctx context.Context, b deliveryStart) (int, error) {
	cfg := s.deliveryCfg()
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, b.d.URL, bytes.NewReader(b.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "asterion-delivery/1")
	req.Header.Set(HeaderDeliveryID, b.d.ID.String())
	req.Header.Set(HeaderDeliverySignature, SignDelivery(b.secret, b.body))
	req.Header.Set(HeaderDeliveryAttempt, fmt.Sprint(b.d.Attempts))
	resp, err := cfg.Client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// deliveryEnd is what finishDelivery recorded.
type deliveryEnd struct {
	state   string
	wait    time.Duration
	dropped bool
}

// finishDelivery records the outcome of one attempt, only while the delivery is still in
// flight under the attempt's token; otherwise the attempt is recorded as late and nothing else
// changes.
func (s *Service) finishDelivery(ctx context.Context, b deliveryStart, code int, sendErr error, interrupted bool) (deliveryEnd, error) {
	cfg := s.deliveryCfg()
	var out deliveryEnd
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var op db.Operation
		if err := tx.NewSelect().Model(&op).Where("id = ?", b.d.OperationID).Scan(ctx); err != nil {
			return fmt.Errorf("read delivery operation: %w", err)
		}
		var d Delivery
		if err := tx.NewSelect().Model(&d).Where("id = ?", b.d.ID).For("UPDATE").Scan(ctx); err != nil {
			return fmt.Errorf("lock delivery: %w", err)
		}
		now, err := txNow(ctx, tx)
		if err != nil {
			return err
		}
		state, kind, msg, outcome := DeliveryDelivered, "", "", DeliveryDelivered
		var codep *int
		if sendErr == nil {
			codep = &code
		}
		switch {
		case sendErr == nil && code >= 200 && code < 300:
		case sendErr == nil && (code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests):
			state, outcome, msg = DeliveryRetryable, "retry", fmt.Sprintf("the receiver answered %d %s", code, http.StatusText(code))
		case sendErr == nil:
			state, outcome, kind = DeliveryFailed, DeliveryFailed, fmt.Sprintf("receiver_%dxx", code/100)
			msg = fmt.Sprintf("the receiver answered %d %s", code, http.StatusText(code))
		case interrupted:
			state, outcome, msg = DeliveryRetryable, "interrupted", "the request was interrupted when the worker stopped"
		default:
			state, outcome, msg = DeliveryRetryable, "retry", describeSendError(sendErr, cfg.Timeout)
		}
		attemptMsg := msg
		next := now
		if state == DeliveryRetryable && deferred.Status(op.Status).Terminal() {
			// The registry settled it while the request was in flight: no retry follows.
			state, kind = ledgerStateAfter(op.Status), "operation_"+op.Status
			msg = "the operation was " + op.Status + " while the request was in flight; the last: " + msg
		}
		if state == DeliveryRetryable {
			if d.Attempts >= d.MaxAttempts {
				state, kind = DeliveryFailed, "retries_exhausted"
				msg = fmt.Sprintf("gave up after %d attempts; the last: %s", d.Attempts, msg)
			} else if !interrupted {
				next = now.Add(cfg.Backoff(d.Attempts))
			}
		}
		var errp *string
		if attemptMsg != "" {
			errp = &attemptMsg
		}
		if d.State != DeliveryInFlight || d.InFlightToken == nil || *d.InFlightToken != b.token {
			out.dropped = true
			_, err := tx.NewUpdate().Model((*DeliveryAttempt)(nil)).Set("finished_at = ?", now).Set("outcome = 'late'").
				Set("status_code = ?", codep).Set("error = ?", errp).
				Where("delivery_id = ? AND attempt = ? AND finished_at IS NULL", d.ID, b.d.Attempts).Exec(ctx)
			return err
		}
		if _, err := tx.NewUpdate().Model((*DeliveryAttempt)(nil)).Set("finished_at = ?", now).Set("outcome = ?", outcome).
			Set("status_code = ?", codep).Set("error = ?", errp).
			Where("delivery_id = ? AND attempt = ?", d.ID, d.Attempts).Exec(ctx); err != nil {
			return fmt.Errorf("record attempt %d: %w", d.Attempts, err)
		}
		var ignored deliveryStart
		if err := s.settleDeliveryTx(ctx, tx, &d, next, state, codep, kind, msg, &ignored); err != nil {
			return err
		}
		out.state, out.wait = state, next.Sub(now)
		return nil
	})
	return out, err
}

// settleDeliveryTx writes the ledger row's new state (clearing the in-flight marker) and
// mirrors it onto the registry row, unless that is already terminal. For a final state it
// tells the vehicle to stop through out.
func (s *Service) settleDeliveryTx(ctx context.Context, tx bun.Tx, d *Delivery, next time.Time, state string, code *int, kind, msg string, out *deliveryStart) error {
	q := tx.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", state).Set("in_flight_since = NULL").
		Set("in_flight_token = NULL").Set("next_attempt_at = ?", next).Where("id = ?", d.ID)
	if code != nil {
		q = q.Set("last_status_code = ?", *code)
	}
	if msg != "" {
		q = q.Set("last_error = ?", msg)
	}
	if kind != "" {
		q = q.Set("error_kind = ?", kind)
	}
	if state != DeliveryRetryable {
		q = q.Set("finished_at = now()")
	}
	if err := q.Returning("*").Scan(ctx, d); err != nil {
		return fmt.Errorf("record delivery %s %s: %w", d.ID, state, err)
	}
	if _, err := s.reg.Record(ctx, tx, d.OperationID, deliveryReport(*d)); err != nil {
		return err
	}
	if state != DeliveryRetryable {
		*out = deliveryStart{outcome: claimDrop, reason: "the delivery " + state + ": " + msg}
	}
	return audit(ctx, tx, d.OrgID, nil, "delivery", "delivery.attempt", "delivery", d.ID.String(),
		map[string]any{"attempt": d.Attempts, "state": state, "status_code": code})
}

// ledgerStateAfter is the final ledger state of a delivery whose operation the registry
// settled with status.
func ledgerStateAfter(status string) string {
	switch deferred.Status(status) {
	case deferred.StatusExpired:
		return DeliveryExpired
	case deferred.StatusCancelled:
		return DeliveryCancelled
	case deferred.StatusCompleted:
		return DeliveryDelivered
	}
	return DeliveryFailed
}

// closeLedgerAfter ends an open ledger row of an operation the registry has settled.
func closeLedgerAfter(ctx context.Context, tx bun.Tx, d Delivery, status string) error {
	switch d.State {
	case DeliveryAccepted, DeliveryRetryable, DeliveryInFlight:
	default:
		return nil
	}
	if d.State == DeliveryInFlight {
		if _, err := tx.NewUpdate().Model((*DeliveryAttempt)(nil)).Set("finished_at = now()").Set("outcome = 'interrupted'").
			Set("error = ?", "the operation was "+status+" before an answer was recorded").
			Where("delivery_id = ? AND attempt = ? AND finished_at IS NULL", d.ID, d.Attempts).Exec(ctx); err != nil {
			return fmt.Errorf("close attempt of delivery %s: %w", d.ID, err)
		}
	}
	_, err := tx.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", ledgerStateAfter(status)).
		Set("in_flight_since = NULL").Set("in_flight_token = NULL").Set("finished_at = now()").
		Where("id = ?", d.ID).Exec(ctx)
	if err != nil {
		return fmt.Errorf("close delivery %s: %w", d.ID, err)
	}
	return nil
}

// describeSendError says why a request got no answer, without the URL (it may carry
// credentials).
func describeSendError(err error, timeout time.Duration) string {
	var ne net.Error
	if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
		return fmt.Sprintf("the receiver did not answer within %s", timeout)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return truncate("the request failed: "+err.Error(), 500)
}

func randomToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RecoverDeliveries gives a new River job to every open delivery whose vehicle is gone: an
// accepted or retryable one whose River job is missing or finished, and an in-flight one
// whose marker is older than the lease (the execution holding it died) and whose River job
// will not run again by itself. It returns how many it re-enqueued.
func (s *Service) RecoverDeliveries(ctx context.Context) (int, error) {
	cfg := s.deliveryCfg()
	lease := fmt.Sprintf("%d milliseconds", cfg.Lease.Milliseconds())
	n := 0
	err := s.inTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var lost []Delivery
		if err := tx.NewSelect().Model(&lost).
			Where("delivery.state IN (?)", bun.In([]string{DeliveryAccepted, DeliveryRetryable, DeliveryInFlight})).
			Where(`CASE WHEN delivery.state = 'in_flight' THEN
				delivery.in_flight_since < now() - ?::interval AND NOT EXISTS (SELECT 1 FROM river_job r
					WHERE r.id = delivery.river_job_id AND r.state IN ('available', 'scheduled', 'retryable', 'pending'))
			ELSE NOT EXISTS (SELECT 1 FROM river_job r
				WHERE r.id = delivery.river_job_id AND r.state IN ('available', 'scheduled', 'retryable', 'pending', 'running'))
			END`, lease).
			Where("NOT EXISTS (SELECT 1 FROM sa_operation o WHERE o.id = delivery.operation_id AND o.terminal_at IS NOT NULL)").
			OrderExpr("delivery.next_attempt_at").Limit(200).For("UPDATE SKIP LOCKED").Scan(ctx); err != nil {
			return fmt.Errorf("find deliveries to recover: %w", err)
		}
		for _, d := range lost {
			ins, err := s.insert.InsertTx(ctx, tx.Tx, DeliverArgs{DeliveryID: d.ID}, deliveryInsertOpts())
			if err != nil {
				return fmt.Errorf("re-enqueue delivery %s: %w", d.ID, err)
			}
			if _, err := tx.NewUpdate().Model((*Delivery)(nil)).Set("river_job_id = ?", ins.Job.ID).
				Where("id = ?", d.ID).Exec(ctx); err != nil {
				return fmt.Errorf("re-enqueue delivery %s: %w", d.ID, err)
			}
			s.log.Info("recovered a delivery whose river job was gone", "delivery_id", d.ID, "state", d.State,
				"river_job_id", ins.Job.ID)
			n++
		}
		return nil
	})
	return n, err
}

// deliveryWorkers is how many deliveries one worker pool sends at once.
const deliveryWorkers = 4

// deliveryWorker is the River worker of artifact.deliver jobs.
type deliveryWorker struct {
	river.WorkerDefaults[DeliverArgs]
	svc *Service
}

// Timeout leaves room for the request and the two short transactions around it.
func (w *deliveryWorker) Timeout(*river.Job[DeliverArgs]) time.Duration {
	return w.svc.deliveryCfg().Timeout + 30*time.Second
}

func (w *deliveryWorker) Work(ctx context.Context, rj *river.Job[DeliverArgs]) error {
	return w.svc.runDelivery(ctx, rj.Args.DeliveryID, rj.ID)
}

// RecoverDeliveriesArgs is the periodic delivery recovery job.
type RecoverDeliveriesArgs struct{}

// Kind is the River job kind.
func (RecoverDeliveriesArgs) Kind() string { return "asterion.recover_deliveries" }

type recoverDeliveriesWorker struct {
	river.WorkerDefaults[RecoverDeliveriesArgs]
	svc *Service
}

func (w *recoverDeliveriesWorker) Work(ctx context.Context, _ *river.Job[RecoverDeliveriesArgs]) error {
	_, err := w.svc.RecoverDeliveries(ctx)
	return err
}

// addDeliveryWorkers registers the delivery workers on a worker pool (runtime.go).
func addDeliveryWorkers(workers *river.Workers, svc *Service) {
	river.AddWorker(workers, &deliveryWorker{svc: svc})
	river.AddWorker(workers, &recoverDeliveriesWorker{svc: svc})
}

// deliveryRecoveryJob is the leader's periodic RecoverDeliveries, run on start too (runtime.go).
func deliveryRecoveryJob(svc *Service) *river.PeriodicJob {
	return river.NewPeriodicJob(river.PeriodicInterval(svc.deliveryCfg().RecoverEvery),
		func() (river.JobArgs, *river.InsertOpts) {
			return RecoverDeliveriesArgs{}, &river.InsertOpts{Queue: QueueMaintenance, UniqueOpts: onlyOne}
		}, &river.PeriodicJobOpts{RunOnStart: true})
}
