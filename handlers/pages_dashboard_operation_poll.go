package handlers

import "github.com/gofiber/fiber/v2"

// operationPollAction is POST /admin/deferred-operations/:id/poll.
func (s *Server) operationPollAction(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "operation")
	}
	if _, err := s.deps.Jobs.PollOperation(c.UserContext(), viewerOf(principalOf(c)), id); err != nil {
		return s.dashError(c, err, "operation")
	}
	return c.Redirect(dashWithNotice("/admin/deferred-operations/"+id.String(), "op-polled"), fiber.StatusSeeOther)
}
