package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/jobs/deferred"
	"asterion/jobs/eta"
)

// The server's estimate rides on the documents it serves, never on the registry's: the status
// history digests the registry's document, which must not change with every guess. So, like
// superseded_by, eta_seconds (and the retry hint that follows it) is merged into the JSON here.

// docFields is a document as its JSON fields, to add the server's own to.
func docFields(doc any) (map[string]json.RawMessage, error) {
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, err
	}
	return fields, nil
}

// putETA writes eta_seconds and the retry hint that follows it into fields, and returns the
// hint.
func putETA(fields map[string]json.RawMessage, est eta.ETA) int {
	retry := est.RetryAfter()
	fields["eta_seconds"] = json.RawMessage(strconv.Itoa(est.Seconds))
	fields["retry_after_seconds"] = json.RawMessage(strconv.Itoa(retry))
	return retry
}

// acceptedHandle is the operation object of a 202: the handle with the server's estimate of
// when its work starts (a prompt's job) or ends (a chain), and the Retry-After that goes with
// it (the handle's own hint when there is no estimate: the work already ended).
// known is the estimate made as the work was accepted, nil to read one.
func (s *Server) acceptedHandle(ctx context.Context, h deferred.Handle, known *eta.ETA) (map[string]json.RawMessage, int, error) {
	fields, err := docFields(h)
	if err != nil {
		return nil, 0, fmt.Errorf("write the handle of %s: %w", h.OperationID, err)
	}
	if known != nil {
		return fields, putETA(fields, *known), nil
	}
	est, ok, err := s.deps.Jobs.ETAs().Operation(ctx, h.OperationID)
	if err != nil {
		return nil, 0, err
	}
	if !ok {
		return fields, h.RetryAfterSeconds, nil
	}
	return fields, putETA(fields, est), nil
}

// writeStatus answers a status document: while it is not terminal with the server's estimate
// and a Retry-After that follows it; for a superseded operation with superseded_by and a Link
// to its successor, so a client holding the old handle can follow the retry.
func (s *Server) writeStatus(c *fiber.Ctx, doc deferred.StatusDoc, next *uuid.UUID) error {
	fields, err := docFields(doc)
	if err != nil {
		return fmt.Errorf("write the status of %s: %w", doc.OperationID, err)
	}
	if !doc.Terminal() {
		retry := doc.RetryAfterSeconds
		est, ok, err := s.deps.Jobs.ETAs().Operation(c.UserContext(), doc.OperationID)
		if err != nil {
			return err
		}
		if ok {
			retry = putETA(fields, est)
		}
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retry))
	}
	if next != nil {
		href := deferred.StatusHref(*next)
		c.Set(fiber.HeaderLink, "<"+href+`>; rel="successor"`)
		succ, _ := json.Marshal(map[string]string{"operation_id": next.String(), "status_href": href})
		fields["superseded_by"] = succ
	}
	return c.JSON(fields)
}
