package handlers

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/deferred"
	"asterion/jobs/readmodel"
)

// operationJSON is the registry's operator-visible read model of one operation: never the
// continuation or a payload, only digests.
type operationJSON struct {
	OperationID        uuid.UUID           `json:"operation_id"`
	Kind               string              `json:"kind"`
	Owner              string              `json:"owner"`
	Status             string              `json:"status"`
	Terminal           bool                `json:"terminal"`
	OrgID              int64               `json:"org_id"`
	CreatedBy          int64               `json:"created_by"`
	AcceptedAt         string              `json:"accepted_at"`
	UpdatedAt          string              `json:"updated_at"`
	ExpiresAt          string              `json:"expires_at"`
	RetryAfterSeconds  int                 `json:"retry_after_seconds"`
	Cancelable         bool                `json:"cancelable"`
	CancelHref         *string             `json:"cancel_href,omitempty"`
	CancelUnavailable  *string             `json:"cancel/unavailable-reason,omitempty"`
	CorrelationID      uuid.UUID           `json:"correlation_id"`
	Subject            map[string]string   `json:"subject"`
	ContinuationDigest *string             `json:"continuation_digest"`
	DiagnosticsDigest  *string             `json:"diagnostics_digest"`
	LastError          *deferred.ErrorInfo `json:"last_error"`
	SuccessorID        *uuid.UUID          `json:"successor_id"`
	PollCount          int                 `json:"poll_count"`
	NextPollAt         *string             `json:"next_poll_at"`
	StatusHref         string              `json:"status_href"`
}

func toOperationJSON(op db.Operation) operationJSON {
	st := deferred.Status(op.Status)
	out := operationJSON{OperationID: op.ID, Kind: op.Kind, Owner: op.Owner, Status: op.Status, Terminal: st.Terminal(),
		OrgID: op.OrgID, CreatedBy: op.CreatedBy, AcceptedAt: ts(op.AcceptedAt), UpdatedAt: ts(op.UpdatedAt),
		ExpiresAt: ts(op.ExpiresAt), RetryAfterSeconds: op.RetryAfterSeconds, CorrelationID: op.CorrelationID,
		ContinuationDigest: op.ContinuationDigest, DiagnosticsDigest: op.DiagnosticsDigest, SuccessorID: op.SuccessorID,
		PollCount: op.PollCount, StatusHref: deferred.StatusHref(op.ID), Subject: map[string]string{}}
	_ = json.Unmarshal(op.Subject, &out.Subject)
	if !st.Terminal() {
		out.NextPollAt = tsp(&op.NextPollAt)
		if op.CancelUnavailableReason != nil {
			out.CancelUnavailable = op.CancelUnavailableReason
		} else {
			h := deferred.CancelHref(op.ID)
			out.CancelHref, out.Cancelable = &h, true
		}
	}
	if op.LastErrorKind != nil {
		out.LastError = &deferred.ErrorInfo{Kind: *op.LastErrorKind, Message: deref(op.LastErrorMessage)}
	}
	return out
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// listOperations is GET /sa-core/v1/deferred-operations?status=&kind=&owner=&cursor=&limit=.
func (s *Server) listOperations(c *fiber.Ctx) error {
	fields := map[string]string{}
	f := readmodel.OperationFilter{Kind: c.Query("kind"), Owner: c.Query("owner"), Cursor: c.Query("cursor"), Search: c.Query("q")}
	if v := c.Query("status"); v != "" {
		if _, err := deferred.ParseStatus(v); err != nil {
			fields["status"] = "must be a deferred-operation status"
		}
		f.Status = v
	}
	limit, ok := queryInt(c, "limit", 50, 1, 500)
	if !ok {
		fields["limit"] = "must be an integer between 1 and 500"
	}
	f.Limit = limit
	if len(fields) > 0 {
		return validationProblem(c, fields)
	}
	ops, next, err := s.deps.Reads.ListOperations(c.UserContext(), viewerOf(principalOf(c)), f)
	if err != nil {
		return s.jobsError(c, err)
	}
	items := make([]operationJSON, len(ops))
	for i, op := range ops {
		items[i] = toOperationJSON(op)
	}
	var nextCursor any
	if next != "" {
		nextCursor = next
	}
	return c.JSON(fiber.Map{"items": items, "next_cursor": nextCursor})
}

// getOperation is GET /sa-core/v1/deferred-operations/{id}: the detail with history digests.
func (s *Server) getOperation(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return problem(c, fiber.StatusNotFound, "no such operation")
	}
	d, err := s.deps.Reads.GetOperation(c.UserContext(), viewerOf(principalOf(c)), id)
	if err != nil {
		return s.operationError(c, err)
	}
	hist := make([]deferred.HistoryEntry, len(d.History))
	copy(hist, d.History)
	jobsOut := make([]jobJSON, len(d.Jobs))
	for i, j := range d.Jobs {
		jobsOut[i] = toJobJSON(j)
	}
	return c.JSON(struct {
		operationJSON
		History       []deferred.HistoryEntry `json:"history"`
		ChainVerified bool                    `json:"history_verified"`
		ChainBrokenAt *int                    `json:"history_broken_at"`
		Jobs          []jobJSON               `json:"jobs"`
	}{toOperationJSON(d.Operation), hist, d.ChainBrokenAt < 0, brokenAt(d.ChainBrokenAt), jobsOut})
}

func brokenAt(i int) *int {
	if i < 0 {
		return nil
	}
	return &i
}

// operationStatus is GET …/{id}/status.
func (s *Server) operationStatus(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return problem(c, fiber.StatusNotFound, "no such operation")
	}
	v := viewerOf(principalOf(c))
	doc, next, err := s.deps.Jobs.StatusAndSuccessor(c.UserContext(), v, id)
	if err != nil {
		return s.operationError(c, err)
	}
	if doc.Terminal() {
		return s.writeStatus(c, doc, next)
	}
	if wait, release := s.preferredWait(c); wait > 0 {
		defer release()
		// Prefer: wait holds the answer until the operation is terminal, if it is in time.
		done, err := s.awaitTerminal(c.UserContext(), v.Scope(), aboutOperation(id), time.Duration(wait)*time.Second,
			func(ctx context.Context) (bool, error) {
				d, n, err := s.deps.Jobs.StatusAndSuccessor(ctx, v, id)
				if err != nil {
					return false, err
				}
				doc, next = d, n
				return d.Terminal(), nil
			})
		if err != nil {
			return s.operationError(c, err)
		}
		if done {
			c.Set("Preference-Applied", "wait="+strconv.Itoa(wait))
		}
	}
	return s.writeStatus(c, doc, next)
}

// pollOperation is POST …/{id}/poll: poll the owning runtime now.
func (s *Server) pollOperation(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return problem(c, fiber.StatusNotFound, "no such operation")
	}
	doc, err := s.deps.Jobs.PollOperation(c.UserContext(), viewerOf(principalOf(c)), id)
	if err != nil {
		return s.operationError(c, err)
	}
	return s.writeStatus(c, doc, nil)
}

// cancelOperation is POST …/{id}/cancel: 200 with the status, or 409 with the reason.
func (s *Server) cancelOperation(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return problem(c, fiber.StatusNotFound, "no such operation")
	}
	p := principalOf(c)
	doc, err := s.deps.Jobs.CancelOperation(c.UserContext(), viewerOf(p), id, actorOf(p))
	if err != nil {
		return s.operationError(c, err)
	}
	return s.writeStatus(c, doc, nil)
}

// operationError maps registry errors; a refused cancel carries cancel/unavailable-reason.
func (s *Server) operationError(c *fiber.Ctx, err error) error {
	var nc *jobs.ErrNotCancelable
	switch {
	case errors.As(err, &nc):
		return c.Status(fiber.StatusConflict).JSON(fiber.Map{"type": "about:blank", "title": "Conflict", "status": 409,
			"detail": "this operation cannot be cancelled", "cancel/unavailable-reason": nc.Reason}, "application/problem+json")
	case errors.Is(err, jobs.ErrConflict):
		reason := "the operation has already finished"
		return c.Status(fiber.StatusConflict).JSON(fiber.Map{"type": "about:blank", "title": "Conflict", "status": 409,
			"detail": reason, "cancel/unavailable-reason": reason}, "application/problem+json")
	case errors.Is(err, jobs.ErrNotFound):
		return problem(c, fiber.StatusNotFound, "no such operation")
	}
	return s.jobsError(c, err)
}
