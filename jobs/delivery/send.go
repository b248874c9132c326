package delivery

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/uptrace/bun"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/registry"
	"asterion/secretbox"
)

// Body is the JSON body of a delivery request (schema asterion.delivery.v1). The
// same delivery always sends the same bytes, on every attempt.
type Body struct {
	Schema      string    `json:"schema"`
	DeliveryID  uuid.UUID `json:"delivery_id"`
	OperationID uuid.UUID `json:"operation_id"`
	PromptID    uuid.UUID `json:"prompt_id"`
	JobID       uuid.UUID `json:"job_id"`
	ResponseID  uuid.UUID `json:"response_id"`
	Text        string    `json:"text"`
	CreatedAt   string    `json:"created_at"`
}

// beginOutcome says what begin decided to do with a vehicle.
type beginOutcome int

const (
	// beginSend: the delivery is in flight under a fresh token; send it.
	beginSend beginOutcome = iota
	// beginDrop: nothing to send (terminal, cancelled, or a stale vehicle); end the vehicle.
	beginDrop
	// beginWait: not due yet, or another execution may still be sending it; look again later.
	beginWait
)

// attemptStart is what begin decided.
type attemptStart struct {
	outcome beginOutcome
	wait    time.Duration
	reason  string
	d       Delivery
	token   string
	body    []byte
	// key is the signing key: the decoded part of the org's secret after whsec_.
	key []byte
}

// run makes one attempt of a delivery and translates the outcome for River: a final
// outcome ends the vehicle, a retry snoozes it until the backoff has passed (River does not
// count a snooze as an attempt; the ledger's attempts is the one counter).
func (ds *Deliveries) run(ctx context.Context, id uuid.UUID, riverJobID int64) error {
	b, err := ds.begin(ctx, id, riverJobID)
	if err != nil {
		return fmt.Errorf("begin delivery %s: %w", id, err)
	}
	switch b.outcome {
	case beginDrop:
		return river.JobCancel(errors.New(b.reason))
	case beginWait:
		return river.JobSnooze(max(b.wait, 0))
	}
	code, sendErr := ds.send(ctx, b)
	interrupted := sendErr != nil && ctx.Err() != nil
	// Recording the outcome must happen even when the worker's context has just ended.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	end, err := ds.finish(fctx, b, code, sendErr, interrupted)
	if err != nil {
		return fmt.Errorf("finish delivery %s: %w", id, err)
	}
	switch {
	case end.dropped:
		return river.JobCancel(errors.New("the delivery is no longer in flight under this execution"))
	case end.state == Retryable:
		return river.JobSnooze(max(end.wait, 0))
	}
	return nil
}

// begin marks the delivery in flight under a fresh token (attempts+1, one attempt
// row, the registry row running and not cancelable) and returns what to send; or says to drop
// the vehicle or to wait.
func (ds *Deliveries) begin(ctx context.Context, id uuid.UUID, riverJobID int64) (attemptStart, error) {
	cfg := ds.cfg
	var out attemptStart
	err := ds.reg.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var opID uuid.UUID
		err := tx.NewSelect().Model((*Delivery)(nil)).Column("operation_id").Where("id = ?", id).Scan(ctx, &opID)
		if errors.Is(err, sql.ErrNoRows) {
			out = attemptStart{outcome: beginDrop, reason: "no such delivery"}
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
			out = attemptStart{outcome: beginDrop, reason: "stale vehicle: the delivery moved to another river job"}
			return nil
		case deferred.Status(op.Status).Terminal():
			// The registry settled it (expired while in flight, say): the ledger follows, so
			// recovery never picks the row up again.
			if err := closeLedgerAfter(ctx, tx, d, op.Status); err != nil {
				return err
			}
			out = attemptStart{outcome: beginDrop, reason: "the delivery operation is " + op.Status}
			return nil
		}
		now, err := registry.TxNow(ctx, tx)
		if err != nil {
			return err
		}
		switch d.State {
		case Accepted, Retryable:
			if d.NextAttemptAt.After(now) {
				out = attemptStart{outcome: beginWait, wait: d.NextAttemptAt.Sub(now)}
				return nil
			}
		case InFlight:
			if age := now.Sub(*d.InFlightSince); age < cfg.Lease {
				out = attemptStart{outcome: beginWait, wait: cfg.Lease - age, reason: "another execution is sending it"}
				return nil
			}
			// The execution that marked it died while its request was in flight: the receiver
			// may or may not have it. It is sent again with the same delivery id.
			if _, err := tx.NewUpdate().Model((*Attempt)(nil)).Set("finished_at = ?", now).
				Set("outcome = 'interrupted'").Set("error = ?", "the execution sending it ended before recording an answer").
				Where("delivery_id = ? AND attempt = ? AND finished_at IS NULL", d.ID, d.Attempts).Exec(ctx); err != nil {
				return fmt.Errorf("close interrupted attempt: %w", err)
			}
		default:
			out = attemptStart{outcome: beginDrop, reason: "the delivery is " + d.State}
			return nil
		}
		if d.Attempts >= d.MaxAttempts {
			return ds.settleTx(ctx, tx, &d, now, Failed, nil, "retries_exhausted",
				fmt.Sprintf("gave up after %d attempts", d.Attempts), &out)
		}
		var org db.Org
		if err := tx.NewSelect().Model(&org).Column("id", "webhook_secret").Where("id = ?", d.OrgID).Scan(ctx); err != nil {
			return fmt.Errorf("read webhook secret: %w", err)
		}
		if org.WebhookSecret == nil || *org.WebhookSecret == "" {
			return ds.settleTx(ctx, tx, &d, now, Failed, nil, "webhook_unsigned",
				"the org has no webhook secret to sign the delivery with", &out)
		}
		key, problem := ds.signingKey(org.ID, *org.WebhookSecret)
		if problem != "" {
			return ds.settleTx(ctx, tx, &d, now, Failed, nil, "webhook_secret", problem, &out)
		}
		var resp db.Entity
		err = tx.NewSelect().Model(&resp).Column("body", "created_at").Where("id = ?", d.ResponseID).Scan(ctx)
		if errors.Is(err, sql.ErrNoRows) {
			return ds.settleTx(ctx, tx, &d, now, Failed, nil, "response_missing",
				"the response to deliver no longer exists", &out)
		}
		if err != nil {
			return fmt.Errorf("read response: %w", err)
		}
		body, err := json.Marshal(Body{Schema: Schema, DeliveryID: d.ID, OperationID: d.OperationID,
			PromptID: d.PromptID, JobID: d.JobID, ResponseID: d.ResponseID, Text: resp.Body,
			CreatedAt: deferred.FormatTime(resp.CreatedAt)})
		if err != nil {
			return err
		}
		token := randomToken()
		if _, err := tx.NewUpdate().Model((*Delivery)(nil)).Set("state = ?", InFlight).
			Set("attempts = attempts + 1").Set("in_flight_since = ?", now).Set("in_flight_token = ?", token).
			Where("id = ?", d.ID).Exec(ctx); err != nil {
			return fmt.Errorf("mark delivery in flight: %w", err)
		}
		d.Attempts++
		if _, err := tx.NewInsert().Model(&Attempt{DeliveryID: d.ID, Attempt: d.Attempts, StartedAt: now}).
			Exec(ctx); err != nil {
			return fmt.Errorf("record attempt %d: %w", d.Attempts, err)
		}
		if _, err := ds.reg.Record(ctx, tx, op.ID, registry.Report{Status: deferred.StatusRunning,
			CancelUnavailable: InFlightReason}); err != nil {
			return err
		}
		out = attemptStart{outcome: beginSend, d: d, token: token, body: body, key: key}
		return nil
	})
	return out, err
}

// send POSTs the body once and returns the status code, or the error of a request
// that got no answer.
func (ds *Deliveries) send(ctx context.Context, b attemptStart) (int, error) {
	cfg := ds.cfg
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, b.d.URL, bytes.NewReader(b.body))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "asterion-delivery/1")
	// The id is the delivery's, the same on every attempt, so receivers deduplicate on it; the
	// timestamp is this attempt's, so a captured request cannot be replayed past the
	// receiver's tolerance.
	id, ts := b.d.ID.String(), time.Now().Unix()
	req.Header.Set(HeaderID, id)
	req.Header.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	req.Header.Set(HeaderSignature, Sign(b.key, id, ts, b.body))
	req.Header.Set(HeaderAttempt, strconv.Itoa(b.d.Attempts))
	resp, err := ds.client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, nil
}

// attemptEnd is what finish recorded.
type attemptEnd struct {
	state   string
	wait    time.Duration
	dropped bool
}

// finish records the outcome of one attempt, only while the delivery is still in
// flight under the attempt's token; otherwise the attempt is recorded as late and nothing else
// changes.
func (ds *Deliveries) finish(ctx context.Context, b attemptStart, code int, sendErr error, interrupted bool) (attemptEnd, error) {
	cfg := ds.cfg
	var out attemptEnd
	err := ds.reg.InTx(ctx, func(ctx context.Context, tx bun.Tx) error {
		var op db.Operation
		if err := tx.NewSelect().Model(&op).Where("id = ?", b.d.OperationID).Scan(ctx); err != nil {
			return fmt.Errorf("read delivery operation: %w", err)
		}
		var d Delivery
		if err := tx.NewSelect().Model(&d).Where("id = ?", b.d.ID).For("UPDATE").Scan(ctx); err != nil {
			return fmt.Errorf("lock delivery: %w", err)
		}
		now, err := registry.TxNow(ctx, tx)
		if err != nil {
			return err
		}
		state, kind, msg, outcome := Delivered, "", "", Delivered
		var codep *int
		if sendErr == nil {
			codep = &code
		}
		switch {
		case sendErr == nil && code >= 200 && code < 300:
		case sendErr == nil && (code >= 500 || code == http.StatusRequestTimeout || code == http.StatusTooManyRequests):
			state, outcome, msg = Retryable, "retry", fmt.Sprintf("the receiver answered %d %s", code, http.StatusText(code))
		case sendErr == nil:
			state, outcome, kind = Failed, Failed, fmt.Sprintf("receiver_%dxx", code/100)
			msg = fmt.Sprintf("the receiver answered %d %s", code, http.StatusText(code))
		case errors.As(sendErr, new(*PrivateTargetError)):
			// Refused before connecting; a retry would dial the same kind of address.
			state, outcome, kind = Failed, Failed, "target_private"
			msg = truncate("the webhook target is refused: "+privateReason(sendErr), 500)
		case interrupted:
			state, outcome, msg = Retryable, "interrupted", "the request was interrupted when the worker stopped"
		default:
			state, outcome, msg = Retryable, "retry", describeSendError(sendErr, cfg.Timeout)
		}
		attemptMsg := msg
		next := now
		if state == Retryable && deferred.Status(op.Status).Terminal() {
			// The registry settled it while the request was in flight: no retry follows.
			state, kind = ledgerStateAfter(op.Status), "operation_"+op.Status
			msg = "the operation was " + op.Status + " while the request was in flight; the last: " + msg
		}
		if state == Retryable {
			if d.Attempts >= d.MaxAttempts {
				state, kind = Failed, "retries_exhausted"
				msg = fmt.Sprintf("gave up after %d attempts; the last: %s", d.Attempts, msg)
			} else if !interrupted {
				next = now.Add(cfg.Backoff(d.Attempts))
			}
		}
		var errp *string
		if attemptMsg != "" {
			errp = &attemptMsg
		}
		if d.State != InFlight || d.InFlightToken == nil || *d.InFlightToken != b.token {
			out.dropped = true
			_, err := tx.NewUpdate().Model((*Attempt)(nil)).Set("finished_at = ?", now).Set("outcome = 'late'").
				Set("status_code = ?", codep).Set("error = ?", errp).
				Where("delivery_id = ? AND attempt = ? AND finished_at IS NULL", d.ID, b.d.Attempts).Exec(ctx)
			return err
		}
		if _, err := tx.NewUpdate().Model((*Attempt)(nil)).Set("finished_at = ?", now).Set("outcome = ?", outcome).
			Set("status_code = ?", codep).Set("error = ?", errp).
			Where("delivery_id = ? AND attempt = ?", d.ID, d.Attempts).Exec(ctx); err != nil {
			return fmt.Errorf("record attempt %d: %w", d.Attempts, err)
		}
		var ignored attemptStart
		if err := ds.settleTx(ctx, tx, &d, next, state, codep, kind, msg, &ignored); err != nil {
			return err
		}
		out.state, out.wait = state, next.Sub(now)
		return nil
	})
	return out, err
}

// settleTx writes the ledger row's new state (clearing the in-flight marker) and
// mirrors it onto the registry row, unless that is already terminal. For a final state it
// tells the vehicle to stop through out.
func (ds *Deliveries) settleTx(ctx context.Context, tx bun.Tx, d *Delivery, next time.Time, state string, code *int, kind, msg string, out *attemptStart) error {
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
	if state != Retryable {
		q = q.Set("finished_at = now()")
	}
	if err := q.Returning("*").Scan(ctx, d); err != nil {
		return fmt.Errorf("record delivery %s %s: %w", d.ID, state, err)
	}
	if _, err := ds.reg.Record(ctx, tx, d.OperationID, report(*d)); err != nil {
		return err
	}
	if state != Retryable {
		*out = attemptStart{outcome: beginDrop, reason: "the delivery " + state + ": " + msg}
	}
	return jobs.Audit(ctx, tx, d.OrgID, nil, "delivery", "delivery.attempt", "delivery", d.ID.String(),
		map[string]any{"attempt": d.Attempts, "state": state, "status_code": code})
}

// ledgerStateAfter is the final ledger state of a delivery whose operation the registry
// settled with status.
func ledgerStateAfter(status string) string {
	switch deferred.Status(status) {
	case deferred.StatusExpired:
		return Expired
	case deferred.StatusCancelled:
		return Cancelled
	case deferred.StatusCompleted:
		return Delivered
	}
	return Failed
}

// closeLedgerAfter ends an open ledger row of an operation the registry has settled.
func closeLedgerAfter(ctx context.Context, tx bun.Tx, d Delivery, status string) error {
	switch d.State {
	case Accepted, Retryable, InFlight:
	default:
		return nil
	}
	if d.State == InFlight {
		if _, err := tx.NewUpdate().Model((*Attempt)(nil)).Set("finished_at = now()").Set("outcome = 'interrupted'").
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

// signingKey opens an org's stored webhook secret and returns its signing key, or says why it
// cannot be used. A failure is logged too: it needs the operator (a wrong ASTERION_SECRET_KEY,
// or a secret written to the database by hand), and no delivery can be signed until it is fixed.
func (ds *Deliveries) signingKey(orgID int64, stored string) ([]byte, string) {
	k, err := ds.cfg.SecretKey.Key()
	if err != nil {
		ds.log.Error("webhook delivery: the server's secret key is unavailable", "org_id", orgID, "err", err)
		return nil, "the server's secret key is unavailable"
	}
	secret, err := OpenSecret(k, orgID, stored)
	switch {
	case errors.Is(err, secretbox.ErrNotSealed):
		ds.log.Error("webhook delivery: the org's webhook secret is stored in plain text; set it again with asterion org set-webhook", "org_id", orgID)
		return nil, "the org's webhook secret is not sealed; set it again with asterion org set-webhook"
	case err != nil:
		ds.log.Error("webhook delivery: the org's webhook secret does not open with the server's secret key", "org_id", orgID, "err", err)
		return nil, "the org's webhook secret does not open with the server's secret key"
	}
	key, err := ParseSecret(secret)
	if err != nil {
		return nil, "the org's webhook secret is malformed"
	}
	return key, ""
}

// privateReason is the guard's own message out of a send error.
func privateReason(err error) string {
	var pe *PrivateTargetError
	if errors.As(err, &pe) {
		return pe.Error()
	}
	return err.Error()
}

func randomToken() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// truncate cuts s to at most n bytes.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
