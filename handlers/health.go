package handlers

import (
	"context"
	"time"

	"github.com/gofiber/fiber/v2"
)

// healthz answers while the process is up.
func (s *Server) healthz(c *fiber.Ctx) error {
	return c.JSON(fiber.Map{"status": "ok", "version": s.deps.Version})
}

// readyz answers 200 only when the database is reachable and migrations are current.
func (s *Server) readyz(c *fiber.Ctx) error {
	ctx, cancel := context.WithTimeout(c.UserContext(), 3*time.Second)
	defer cancel()
	if s.deps.Ready != nil {
		if err := s.deps.Ready(ctx); err != nil {
			s.log.Warn("not ready", "err", err)
			return c.Status(fiber.StatusServiceUnavailable).JSON(fiber.Map{"status": "unavailable", "detail": "database unreachable or migrations not current"})
		}
	}
	return c.JSON(fiber.Map{"status": "ready"})
}
