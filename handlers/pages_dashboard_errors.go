package handlers

import (
	"errors"

	"github.com/gofiber/fiber/v2"

	"asterion/jobs"
	"asterion/jobs/readmodel"
	"asterion/views"
)

// dashPage builds the layout data of a dashboard page.
func dashPage(c *fiber.Ctx, title, nav string) views.Page { return pageFor(c, title, nav) }

// notFoundPage answers 404 for a missing object and for another org's, identically.
func (s *Server) notFoundPage(c *fiber.Ctx, what string) error {
	return s.errorPage(c, fiber.StatusNotFound, "Not found", "There is no such "+what+".")
}

// dashError turns errors of the jobs package into pages.
func (s *Server) dashError(c *fiber.Ctx, err error, what string) error {
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return s.notFoundPage(c, what)
	case errors.Is(err, readmodel.ErrBadCursor):
		return s.errorPage(c, fiber.StatusBadRequest, "Bad page link", "This page link is not one the server gave out; start again from the newest page.")
	case errors.Is(err, jobs.ErrInvalid):
		return s.errorPage(c, fiber.StatusBadRequest, "Bad request", "The request is not understood.")
	}
	return err
}
