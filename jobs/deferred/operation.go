package deferred

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// ErrInvalidOperation is wrapped by every error about a Handle or StatusDoc
// value that breaks a contract rule, returned by Validate, the constructors
// and the JSON marshallers.
var ErrInvalidOperation = errors.New("deferred: invalid operation")

// BasePath is the path of the deferred-operation registry endpoints.
const BasePath = "/sa-core/v1/deferred-operations"

// StatusHref returns the status_href of operation id:
// /sa-core/v1/deferred-operations/<id>/status.
func StatusHref(id uuid.UUID) string { return BasePath + "/" + id.String() + "/status" }

// CancelHref returns the cancel_href of operation id:
// /sa-core/v1/deferred-operations/<id>/cancel.
func CancelHref(id uuid.UUID) string { return BasePath + "/" + id.String() + "/cancel" }

// Handle is a deferred-operation.v1 document, returned with 202 Accepted. Its
// MarshalJSON writes the "schema" field and the cancel surface, formats times
// with TimeFormat, and refuses a handle that breaks a rule (see Validate), so
// every marshalled Handle passes ValidateHandle. Its UnmarshalJSON checks the
// document against the schema first.
type Handle struct {
	// OperationID is the deterministic id, see OperationID.
	OperationID uuid.UUID `json:"operation_id"`
	// Kind is the operation kind, e.g. "prompt.execute".
	Kind string `json:"kind"`
	// Owner is the component that owns the work.
	Owner string `json:"owner"`
	// Status is pending or running: a handle is never terminal.
	Status Status `json:"status"`
	// AcceptedAt is when the operation was accepted.
	AcceptedAt time.Time `json:"accepted_at"`
	// ExpiresAt is when the operation expires; after AcceptedAt.
	ExpiresAt time.Time `json:"expires_at"`
	// RetryAfterSeconds is the polling hint, 1..60.
	RetryAfterSeconds int `json:"retry_after_seconds"`
	// StatusHref is where deferred-operation-status.v1 is read.
	StatusHref string `json:"status_href"`
	// Cancel is written as "cancel_href" or "cancel/unavailable-reason",
	// exactly one of them.
	Cancel Cancel `json:"-"`
	// CorrelationID is optional; omitted when empty.
	CorrelationID string `json:"correlation_id,omitempty"`
	// Subject names what the operation is about, e.g. prompt_id and job_id;
	// nil is written as {}.
	Subject map[string]string `json:"subject"`
}

// handleWire is the exact wire shape of deferred-operation.v1.
type handleWire struct {
	Schema                  string            `json:"schema"`
	OperationID             string            `json:"operation_id"`
	Kind                    string            `json:"kind"`
	Owner                   string            `json:"owner"`
	Status                  Status            `json:"status"`
	AcceptedAt              string            `json:"accepted_at"`
	ExpiresAt               string            `json:"expires_at"`
	RetryAfterSeconds       int               `json:"retry_after_seconds"`
	StatusHref              string            `json:"status_href"`
	CancelHref              *string           `json:"cancel_href,omitempty"`
	CancelUnavailableReason *string           `json:"cancel/unavailable-reason,omitempty"`
	CorrelationID           string            `json:"correlation_id,omitempty"`
	Subject                 map[string]string `json:"subject"`
}

// HandleRequest is what a kind asks for when an operation is accepted; see
// NewHandle.
type HandleRequest struct {
	// Kind is the operation kind, e.g. "prompt.execute".
	Kind string
	// Owner is the component that owns the work.
	Owner string
	// Subject names what the operation is about; it is copied.
	Subject map[string]string
	// IdempotencyKey, when non-empty, replaces Subject in the operation id
	// (not in the document). Scope it to its user before passing it.
	IdempotencyKey string
	// CorrelationID is optional.
	CorrelationID string
	// Status is the status at acceptance: StatusPending when empty, or
	// StatusRunning.
	Status Status
	// TTL is the requested lifetime, clamped by the policy (zero: default).
	TTL time.Duration
	// RetryAfterSeconds is the requested polling hint, clamped by the policy.
	RetryAfterSeconds int
	// NotCancelableReason, when non-empty, makes the operation not
	// cancelable with this reason; when empty the operation is cancelable at
	// CancelHref(id).
	NotCancelableReason string
}

// NewHandle accepts an operation at now: it derives the operation id with
// OperationID, clamps the TTL and retry hint through policy, fills the hrefs
// from BasePath, and returns a Handle that passes Validate, or an error
// wrapping ErrInvalidPolicy or ErrInvalidOperation.
func NewHandle(req HandleRequest, policy Policy, now time.Time) (Handle, error) {
	if err := policy.Validate(); err != nil {
		return Handle{}, err
	}
	status := req.Status
	if status == "" {
		status = StatusPending
	}
	id := OperationID(req.Kind, req.Owner, req.Subject, req.IdempotencyKey)
	cancel := Cancelable(CancelHref(id))
	if req.NotCancelableReason != "" {
		cancel = NotCancelable(req.NotCancelableReason)
	}
	accepted := NormalizeTime(now)
	subject := maps.Clone(req.Subject)
	if subject == nil {
		subject = map[string]string{}
	}
	h := Handle{
		OperationID:       id,
		Kind:              req.Kind,
		Owner:             req.Owner,
		Status:            status,
		AcceptedAt:        accepted,
		ExpiresAt:         NormalizeTime(accepted.Add(policy.ClampTTL(req.TTL))),
		RetryAfterSeconds: policy.ClampRetryAfter(req.RetryAfterSeconds),
		StatusHref:        StatusHref(id),
		Cancel:            cancel,
		CorrelationID:     req.CorrelationID,
		Subject:           subject,
	}
	if err := h.Validate(); err != nil {
		return Handle{}, err
	}
	return h, nil
}

// Validate returns nil when h can be written as a valid deferred-operation.v1
// document, and otherwise an error wrapping ErrInvalidOperation (and
// ErrCancelSurface for a break of the cancel rule). Beyond the schema it
// requires ExpiresAt to be after AcceptedAt and a non-nil OperationID.
func (h Handle) Validate() error {
	bad := func(field string, err error) error {
		return fmt.Errorf("%w: %s %s: %w", ErrInvalidOperation, HandleSchema, field, err)
	}
	switch {
	case h.OperationID == uuid.Nil:
		return bad("operation_id", errors.New("is the nil UUID"))
	case checkText(h.Kind) != nil:
		return bad("kind", checkText(h.Kind))
	case checkText(h.Owner) != nil:
		return bad("owner", checkText(h.Owner))
	case h.Status != StatusPending && h.Status != StatusRunning:
		return bad("status", fmt.Errorf("%q is not pending or running", h.Status))
	case checkTime(h.AcceptedAt) != nil:
		return bad("accepted_at", checkTime(h.AcceptedAt))
	case checkTime(h.ExpiresAt) != nil:
		return bad("expires_at", checkTime(h.ExpiresAt))
	case !NormalizeTime(h.ExpiresAt).After(NormalizeTime(h.AcceptedAt)):
		return bad("expires_at", errors.New("is not after accepted_at"))
	case checkRetry(h.RetryAfterSeconds) != nil:
		return bad("retry_after_seconds", checkRetry(h.RetryAfterSeconds))
	case checkHref(h.StatusHref) != nil:
		return bad("status_href", checkHref(h.StatusHref))
	case h.CorrelationID != "" && checkText(h.CorrelationID) != nil:
		return bad("correlation_id", checkText(h.CorrelationID))
	}
	for k, v := range h.Subject {
		if err := checkText(k); err != nil {
			return bad("subject key", err)
		}
		if !utf8.ValidString(v) {
			return bad("subject["+k+"]", errors.New("is not valid UTF-8"))
		}
	}
	if err := h.Cancel.Validate(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidOperation, HandleSchema, err)
	}
	return nil
}

// MarshalJSON writes h as deferred-operation.v1, or fails with the error of
// Validate.
func (h Handle) MarshalJSON() ([]byte, error) {
	if err := h.Validate(); err != nil {
		return nil, err
	}
	href, reason := h.Cancel.wire()
	subject := h.Subject
	if subject == nil {
		subject = map[string]string{}
	}
	return json.Marshal(handleWire{
		Schema:                  HandleSchema,
		OperationID:             h.OperationID.String(),
		Kind:                    h.Kind,
		Owner:                   h.Owner,
		Status:                  h.Status,
		AcceptedAt:              FormatTime(h.AcceptedAt),
		ExpiresAt:               FormatTime(h.ExpiresAt),
		RetryAfterSeconds:       h.RetryAfterSeconds,
		StatusHref:              h.StatusHref,
		CancelHref:              href,
		CancelUnavailableReason: reason,
		CorrelationID:           h.CorrelationID,
		Subject:                 subject,
	})
}

// UnmarshalJSON reads a deferred-operation.v1 document: it must pass
// ValidateHandle and Validate, or the error wraps ErrInvalidDocument.
func (h *Handle) UnmarshalJSON(data []byte) error {
	if err := ValidateHandle(data); err != nil {
		return err
	}
	var w handleWire
	if err := json.Unmarshal(data, &w); err != nil {
		return docErr(HandleSchema, err)
	}
	out := Handle{
		Kind:              w.Kind,
		Owner:             w.Owner,
		Status:            w.Status,
		RetryAfterSeconds: w.RetryAfterSeconds,
		StatusHref:        w.StatusHref,
		CorrelationID:     w.CorrelationID,
		Subject:           w.Subject,
	}
	var err error
	if out.OperationID, err = uuid.Parse(w.OperationID); err != nil {
		return docErr(HandleSchema, fmt.Errorf("operation_id: %w", err))
	}
	if out.AcceptedAt, err = parseTime(w.AcceptedAt); err != nil {
		return docErr(HandleSchema, fmt.Errorf("accepted_at: %w", err))
	}
	if out.ExpiresAt, err = parseTime(w.ExpiresAt); err != nil {
		return docErr(HandleSchema, fmt.Errorf("expires_at: %w", err))
	}
	if out.Cancel, err = cancelFromWire(w.CancelHref, w.CancelUnavailableReason); err != nil {
		return docErr(HandleSchema, err)
	}
	if err := out.Validate(); err != nil {
		return docErr(HandleSchema, err)
	}
	*h = out
	return nil
}

// ParseHandle reads a deferred-operation.v1 document; see Handle.UnmarshalJSON.
func ParseHandle(doc []byte) (Handle, error) {
	var h Handle
	if err := h.UnmarshalJSON(doc); err != nil {
		return Handle{}, err
	}
	return h, nil
}

// InitialStatus returns the status document of h as accepted: same status,
// retry hint and cancel surface, updated at AcceptedAt. It is what the status
// endpoint answers before the owning runtime reports anything, and the first
// entry of the status history.
func (h Handle) InitialStatus() (StatusDoc, error) {
	return NewActiveStatus(h.OperationID, h.Kind, h.Status, h.AcceptedAt, h.ExpiresAt, h.RetryAfterSeconds, h.Cancel)
}

// ErrorInfo is the "error" object of a status document: an error kind (for
// prompt jobs, the job's error_kind) and a human-readable message.
type ErrorInfo struct {
	Kind    string `json:"kind"`
	Message string `json:"message"`
}

// StatusDoc is a deferred-operation-status.v1 document, the answer of
// GET <status_href>. Its MarshalJSON writes "schema" and "terminal" (from
// Status), formats times with TimeFormat, and refuses a document that breaks
// a rule (see Validate), so every marshalled StatusDoc passes ValidateStatus.
// Build it with NewActiveStatus, NewCompletedStatus, NewFailedStatus or
// NewCancelledStatus.
type StatusDoc struct {
	// OperationID is the operation's id.
	OperationID uuid.UUID `json:"operation_id"`
	// Kind is the operation kind.
	Kind string `json:"kind"`
	// Status is any status; "terminal" is written from Status.Terminal.
	Status Status `json:"status"`
	// UpdatedAt is when the status last changed or was last confirmed.
	UpdatedAt time.Time `json:"updated_at"`
	// ExpiresAt is when the operation expires.
	ExpiresAt time.Time `json:"expires_at"`
	// RetryAfterSeconds is the polling hint, 1..60 while not terminal and 0
	// (omitted) when terminal; also sent as the Retry-After header.
	RetryAfterSeconds int `json:"retry_after_seconds,omitempty"`
	// Result is the final result, a JSON object, only when completed.
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the failure, only when failed, timed-out, expired or unknown.
	Error *ErrorInfo `json:"error,omitempty"`
	// Cancel is written as "cancel_href" or "cancel/unavailable-reason"
	// while not terminal; it is the zero Cancel when terminal.
	Cancel Cancel `json:"-"`
}

// statusWire is the exact wire shape of deferred-operation-status.v1.
type statusWire struct {
	Schema                  string          `json:"schema"`
	OperationID             string          `json:"operation_id"`
	Kind                    string          `json:"kind"`
	Status                  Status          `json:"status"`
	Terminal                bool            `json:"terminal"`
	UpdatedAt               string          `json:"updated_at"`
	ExpiresAt               string          `json:"expires_at"`
	RetryAfterSeconds       int             `json:"retry_after_seconds,omitempty"`
	Result                  json.RawMessage `json:"result,omitempty"`
	Error                   *ErrorInfo      `json:"error,omitempty"`
	CancelHref              *string         `json:"cancel_href,omitempty"`
	CancelUnavailableReason *string         `json:"cancel/unavailable-reason,omitempty"`
}

// NewActiveStatus returns the document of a non-terminal operation (pending
// or running) with its retry hint and cancel surface.
func NewActiveStatus(id uuid.UUID, kind string, status Status, updatedAt, expiresAt time.Time, retryAfterSeconds int, cancel Cancel) (StatusDoc, error) {
	if status.Terminal() {
		return StatusDoc{}, fmt.Errorf("%w: %s status: %q is terminal", ErrInvalidOperation, StatusSchema, status)
	}
	return newStatus(StatusDoc{
		OperationID: id, Kind: kind, Status: status, UpdatedAt: updatedAt, ExpiresAt: expiresAt,
		RetryAfterSeconds: retryAfterSeconds, Cancel: cancel,
	})
}

// NewCompletedStatus returns the document of a completed operation with its
// result, which must be a JSON object; the result is compacted and copied.
func NewCompletedStatus(id uuid.UUID, kind string, updatedAt, expiresAt time.Time, result json.RawMessage) (StatusDoc, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, result); err != nil {
		return StatusDoc{}, fmt.Errorf("%w: %s result: %w", ErrInvalidOperation, StatusSchema, err)
	}
	return newStatus(StatusDoc{
		OperationID: id, Kind: kind, Status: StatusCompleted, UpdatedAt: updatedAt, ExpiresAt: expiresAt,
		Result: json.RawMessage(buf.Bytes()),
	})
}

// NewFailedStatus returns the document of an operation that ended with
// status failed, timed-out, expired or unknown, and the error e.
func NewFailedStatus(id uuid.UUID, kind string, status Status, updatedAt, expiresAt time.Time, e ErrorInfo) (StatusDoc, error) {
	if !status.CarriesError() {
		return StatusDoc{}, fmt.Errorf("%w: %s status: %q carries no error", ErrInvalidOperation, StatusSchema, status)
	}
	return newStatus(StatusDoc{
		OperationID: id, Kind: kind, Status: status, UpdatedAt: updatedAt, ExpiresAt: expiresAt,
		Error: &e,
	})
}

// NewCancelledStatus returns the document of a cancelled operation.
func NewCancelledStatus(id uuid.UUID, kind string, updatedAt, expiresAt time.Time) (StatusDoc, error) {
	return newStatus(StatusDoc{
		OperationID: id, Kind: kind, Status: StatusCancelled, UpdatedAt: updatedAt, ExpiresAt: expiresAt,
	})
}

// newStatus normalizes the times of d and validates it.
func newStatus(d StatusDoc) (StatusDoc, error) {
	d.UpdatedAt = NormalizeTime(d.UpdatedAt)
	d.ExpiresAt = NormalizeTime(d.ExpiresAt)
	if err := d.Validate(); err != nil {
		return StatusDoc{}, err
	}
	return d, nil
}

// Terminal reports whether the document's status is terminal.
func (d StatusDoc) Terminal() bool { return d.Status.Terminal() }

// Validate returns nil when d can be written as a valid
// deferred-operation-status.v1 document, and otherwise an error wrapping
// ErrInvalidOperation (and ErrCancelSurface for a break of the cancel rule).
func (d StatusDoc) Validate() error {
	bad := func(field string, err error) error {
		return fmt.Errorf("%w: %s %s: %w", ErrInvalidOperation, StatusSchema, field, err)
	}
	switch {
	case d.OperationID == uuid.Nil:
		return bad("operation_id", errors.New("is the nil UUID"))
	case checkText(d.Kind) != nil:
		return bad("kind", checkText(d.Kind))
	case !d.Status.Valid():
		return bad("status", fmt.Errorf("%w: %q", ErrUnknownStatus, d.Status))
	case checkTime(d.UpdatedAt) != nil:
		return bad("updated_at", checkTime(d.UpdatedAt))
	case checkTime(d.ExpiresAt) != nil:
		return bad("expires_at", checkTime(d.ExpiresAt))
	}
	if d.Status == StatusCompleted {
		if err := checkObject(d.Result); err != nil {
			return bad("result", err)
		}
	} else if d.Result != nil {
		return bad("result", fmt.Errorf("is only allowed when completed, not %s", d.Status))
	}
	if d.Status.CarriesError() {
		switch {
		case d.Error == nil:
			return bad("error", fmt.Errorf("is required when %s", d.Status))
		case checkText(d.Error.Kind) != nil:
			return bad("error.kind", checkText(d.Error.Kind))
		case checkText(d.Error.Message) != nil:
			return bad("error.message", checkText(d.Error.Message))
		}
	} else if d.Error != nil {
		return bad("error", fmt.Errorf("is not allowed when %s", d.Status))
	}
	if d.Terminal() {
		if d.RetryAfterSeconds != 0 {
			return bad("retry_after_seconds", errors.New("is not allowed when terminal"))
		}
		if !d.Cancel.IsZero() {
			return fmt.Errorf("%w: %s: %w: a terminal status carries no cancel surface", ErrInvalidOperation, StatusSchema, ErrCancelSurface)
		}
		return nil
	}
	if err := checkRetry(d.RetryAfterSeconds); err != nil {
		return bad("retry_after_seconds", err)
	}
	if err := d.Cancel.Validate(); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrInvalidOperation, StatusSchema, err)
	}
	return nil
}

// MarshalJSON writes d as deferred-operation-status.v1, or fails with the
// error of Validate.
func (d StatusDoc) MarshalJSON() ([]byte, error) {
	if err := d.Validate(); err != nil {
		return nil, err
	}
	href, reason := d.Cancel.wire()
	return json.Marshal(statusWire{
		Schema:                  StatusSchema,
		OperationID:             d.OperationID.String(),
		Kind:                    d.Kind,
		Status:                  d.Status,
		Terminal:                d.Terminal(),
		UpdatedAt:               FormatTime(d.UpdatedAt),
		ExpiresAt:               FormatTime(d.ExpiresAt),
		RetryAfterSeconds:       d.RetryAfterSeconds,
		Result:                  d.Result,
		Error:                   d.Error,
		CancelHref:              href,
		CancelUnavailableReason: reason,
	})
}

// UnmarshalJSON reads a deferred-operation-status.v1 document: it must pass
// ValidateStatus and Validate, or the error wraps ErrInvalidDocument.
func (d *StatusDoc) UnmarshalJSON(data []byte) error {
	if err := ValidateStatus(data); err != nil {
		return err
	}
	var w statusWire
	if err := json.Unmarshal(data, &w); err != nil {
		return docErr(StatusSchema, err)
	}
	out := StatusDoc{
		Kind:              w.Kind,
		Status:            w.Status,
		RetryAfterSeconds: w.RetryAfterSeconds,
		Error:             w.Error,
	}
	if w.Result != nil {
		var buf bytes.Buffer
		if err := json.Compact(&buf, w.Result); err != nil {
			return docErr(StatusSchema, fmt.Errorf("result: %w", err))
		}
		out.Result = json.RawMessage(buf.Bytes())
	}
	var err error
	if out.OperationID, err = uuid.Parse(w.OperationID); err != nil {
		return docErr(StatusSchema, fmt.Errorf("operation_id: %w", err))
	}
	if out.UpdatedAt, err = parseTime(w.UpdatedAt); err != nil {
		return docErr(StatusSchema, fmt.Errorf("updated_at: %w", err))
	}
	if out.ExpiresAt, err = parseTime(w.ExpiresAt); err != nil {
		return docErr(StatusSchema, fmt.Errorf("expires_at: %w", err))
	}
	if !out.Terminal() {
		if out.Cancel, err = cancelFromWire(w.CancelHref, w.CancelUnavailableReason); err != nil {
			return docErr(StatusSchema, err)
		}
	}
	if err := out.Validate(); err != nil {
		return docErr(StatusSchema, err)
	}
	*d = out
	return nil
}

// ParseStatusDoc reads a deferred-operation-status.v1 document; see
// StatusDoc.UnmarshalJSON.
func ParseStatusDoc(doc []byte) (StatusDoc, error) {
	var d StatusDoc
	if err := d.UnmarshalJSON(doc); err != nil {
		return StatusDoc{}, err
	}
	return d, nil
}

// docErr wraps err, found while reading a document of the named schema, into
// a *DocumentError.
func docErr(schema string, err error) error {
	return &DocumentError{Schema: schema, Reason: oneLine(err.Error()), Err: err}
}

// checkText requires a non-empty, valid UTF-8 string.
func checkText(s string) error {
	switch {
	case s == "":
		return errors.New("is empty")
	case !utf8.ValidString(s):
		return errors.New("is not valid UTF-8")
	}
	return nil
}

// checkRetry requires a retry hint within the contract's 1..60 seconds.
func checkRetry(n int) error {
	if n < MinRetryAfterSeconds || n > MaxRetryAfterSeconds {
		return fmt.Errorf("%d is outside %d..%d", n, MinRetryAfterSeconds, MaxRetryAfterSeconds)
	}
	return nil
}

// checkHref requires a non-empty URI reference, as the schema's
// "uri-reference" format assertion reads it.
func checkHref(s string) error {
	if err := checkText(s); err != nil {
		return err
	}
	if strings.Contains(s, `\`) {
		return errors.New(`contains \`)
	}
	u, err := url.Parse(s)
	if err != nil {
		return err
	}
	if host := u.Hostname(); strings.Contains(host, ":") {
		if !strings.Contains(u.Host, "[") || net.ParseIP(host) == nil {
			return errors.New("invalid IPv6 host")
		}
	}
	return nil
}

// checkObject requires raw to be one JSON object.
func checkObject(raw json.RawMessage) error {
	if len(raw) == 0 {
		return errors.New("is required when completed")
	}
	if !json.Valid(raw) {
		return errors.New("is not valid JSON")
	}
	if b := bytes.TrimLeft(raw, " \t\r\n"); len(b) == 0 || b[0] != '{' {
		return errors.New("is not a JSON object")
	}
	return nil
}
