package handlers

import (
	"errors"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"asterion/jobs"
	"asterion/jobs/admit"
)

// jobRetryAction is POST /admin/jobs/:id/retry: on to the new job's page, or to its operation
// when the form came from an operation page (return=operation).
func (s *Server) jobRetryAction(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "job")
	}
	p := principalOf(c)
	toOp := c.FormValue("return") == "operation"
	out, err := s.deps.Jobs.Retry(c.UserContext(), viewerOf(p), id, actorOf(p))
	if refusal, ok := admit.AsRefusal(err); ok {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(refusal.RetryAfter()))
		return s.errorPage(c, fiber.StatusTooManyRequests, "Retry refused", "A retry is new work and admission refused it: "+refusal.Error()+".")
	}
	var verr *jobs.ValidationError
	if errors.As(err, &verr) {
		return s.errorPage(c, fiber.StatusUnprocessableEntity, "Retry refused", "This job can no longer be retried: "+verr.Error()+".")
	}
	switch {
	case err == nil && toOp:
		return c.Redirect(dashWithNotice("/admin/deferred-operations/"+out.Operation.OperationID.String(), "op-retried"), fiber.StatusSeeOther)
	case err == nil:
		return c.Redirect(dashWithNotice("/admin/jobs/"+out.Job.ID.String(), "job-retried"), fiber.StatusSeeOther)
	case errors.Is(err, jobs.ErrConflict):
		back := "/admin/jobs/" + id.String()
		if toOp {
			if j, gerr := s.deps.Reads.GetJob(c.UserContext(), viewerOf(p), id); gerr == nil && j.Job.OperationID != nil {
				back = "/admin/deferred-operations/" + j.Job.OperationID.String()
			}
		}
		return c.Redirect(dashWithNotice(back, "retry-conflict"), fiber.StatusSeeOther)
	}
	return s.dashError(c, err, "job")
}
