package handlers

import (
	"github.com/gofiber/fiber/v2"

	"asterion/views"
)

func (s *Server) operationsPage(c *fiber.Ctx) error {
	return render(c, views.OperationsShell(pageFor(c, "Deferred operations", views.NavOperations)))
}
