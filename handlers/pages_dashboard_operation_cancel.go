package handlers

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"asterion/jobs"
	"asterion/views"
)

// operationCancelAction is POST /admin/deferred-operations/:id/cancel. A refusal answers 409
// with the page and the owner's reason.
func (s *Server) operationCancelAction(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "operation")
	}
	p := principalOf(c)
	v := viewerOf(p)
	_, err := s.deps.Jobs.CancelOperation(c.UserContext(), v, id, actorOf(p))
	var nc *jobs.ErrNotCancelable
	switch {
	case err == nil:
		return c.Redirect(dashWithNotice("/admin/deferred-operations/"+id.String(), "op-cancelled"), fiber.StatusSeeOther)
	case errors.As(err, &nc), errors.Is(err, jobs.ErrConflict):
		d, derr := s.operationDetail(c.UserContext(), v, id)
		if derr != nil {
			return s.dashError(c, derr, "operation")
		}
		n := dashNotices["op-finished"]
		if nc != nil {
			n = views.Notice{Tone: "error", Text: "Not cancelled: " + nc.Reason}
		}
		d.Notice = &n
		c.Status(fiber.StatusConflict)
		return render(c, views.OperationDetailPage(dashPage(c, "Operation "+views.ShortID(d.ID), views.NavOperations), d))
	}
	return s.dashError(c, err, "operation")
}
