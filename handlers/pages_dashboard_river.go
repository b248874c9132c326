package handlers

import "github.com/gofiber/fiber/v2"

// riverUI is GET /admin/river and below (admins): River's own web UI, mounted read-only.
// Only GET routes reach it, so its cancel, retry, delete and pause buttons fail: acting on the
// queue goes through /admin/jobs, which keeps sa_job (the truth) and River's vehicle in step.
func (s *Server) riverUI(c *fiber.Ctx) error {
	if s.dashboard.river == nil {
		return s.errorPage(c, fiber.StatusNotFound, "River UI is not mounted",
			"This server runs without River's own UI; the Jobs and Queue health pages show the queue.")
	}
	return s.dashboard.river(c)
}
