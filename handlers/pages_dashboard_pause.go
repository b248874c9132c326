package handlers

import (
	"errors"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"asterion/jobs/flowctl"
)

// healthFlowBack is where a pause or resume returns to: the health page's flow tables.
const healthFlowBack = "/admin/health"

// orgPauseAction is POST /admin/health/orgs/:id/pause.
func (s *Server) orgPauseAction(c *fiber.Ctx) error { return s.setOrgPaused(c, true) }

// orgResumeAction is POST /admin/health/orgs/:id/resume.
func (s *Server) orgResumeAction(c *fiber.Ctx) error { return s.setOrgPaused(c, false) }

// modelPauseAction is POST /admin/health/models/pause with the model in the form.
func (s *Server) modelPauseAction(c *fiber.Ctx) error { return s.setModelPaused(c, true) }

// modelResumeAction is POST /admin/health/models/resume with the model in the form.
func (s *Server) modelResumeAction(c *fiber.Ctx) error { return s.setModelPaused(c, false) }

func (s *Server) setOrgPaused(c *fiber.Ctx, paused bool) error {
	id, err := strconv.ParseInt(c.Params("id"), 10, 64)
	if err != nil || id <= 0 || s.deps.Flow == nil {
		return s.notFoundPage(c, "organisation")
	}
	p := principalOf(c)
	err = s.deps.Flow.SetOrgPaused(c.UserContext(), viewerOf(p), actorOf(p), id, paused)
	if errors.Is(err, flowctl.ErrPauseHeld) {
		// The viewer sees the org and acts on it, but a higher role holds its pause: say so on
		// the page rather than answer as if the org were out of reach.
		return c.Redirect(dashWithNotice(healthFlowBack, "org-pause-held")+"#flow-orgs", fiber.StatusSeeOther)
	}
	if err != nil {
		return s.flowError(c, err, "organisation")
	}
	s.dashboard.health.clear()
	code := "org-resumed"
	if paused {
		code = "org-paused"
	}
	return c.Redirect(dashWithNotice(healthFlowBack, code)+"#flow-orgs", fiber.StatusSeeOther)
}

func (s *Server) setModelPaused(c *fiber.Ctx, paused bool) error {
	if s.deps.Flow == nil {
		return s.notFoundPage(c, "model")
	}
	p := principalOf(c)
	err := s.deps.Flow.SetModelPaused(c.UserContext(), viewerOf(p), actorOf(p), bodyFormValue(c, "model"), paused)
	if err != nil {
		return s.flowError(c, err, "model")
	}
	s.dashboard.health.clear()
	code := "model-resumed"
	if paused {
		code = "model-paused"
	}
	return c.Redirect(dashWithNotice(healthFlowBack, code)+"#flow-models", fiber.StatusSeeOther)
}

// flowError turns errors of flow control into pages.
func (s *Server) flowError(c *fiber.Ctx, err error, what string) error {
	switch {
	case errors.Is(err, flowctl.ErrNotFound):
		return s.notFoundPage(c, what)
	case errors.Is(err, flowctl.ErrForbidden):
		return s.forbidden(c, Page, "your role does not allow this")
	case errors.Is(err, flowctl.ErrInvalid):
		return s.errorPage(c, fiber.StatusBadRequest, "Bad request", "Name a model the provider serves.")
	}
	return err
}
