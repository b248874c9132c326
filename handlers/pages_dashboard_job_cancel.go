package handlers

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"asterion/jobs"
)

// jobCancelAction is POST /admin/jobs/:id/cancel.
func (s *Server) jobCancelAction(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "job")
	}
	p := principalOf(c)
	_, err := s.deps.Jobs.Cancel(c.UserContext(), viewerOf(p), id, actorOf(p))
	switch {
	case err == nil:
		return c.Redirect(dashWithNotice("/admin/jobs/"+id.String(), "job-cancelled"), fiber.StatusSeeOther)
	case errors.Is(err, jobs.ErrConflict):
		return c.Redirect(dashWithNotice("/admin/jobs/"+id.String(), "job-finished"), fiber.StatusSeeOther)
	}
	return s.dashError(c, err, "job")
}
