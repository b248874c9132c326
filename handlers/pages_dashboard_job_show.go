package handlers

import (
	"context"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/views"
)

// jobDetail builds one job's page data with its prompt's chain.
func (s *Server) jobDetail(ctx context.Context, v jobs.Viewer, id uuid.UUID) (views.JobDetail, error) {
	jd, err := s.deps.Reads.GetJob(ctx, v, id)
	if err != nil {
		return views.JobDetail{}, err
	}
	rows := s.jobRows(ctx, append([]db.Job{jd.Job}, jd.History...))
	d := views.JobDetail{Job: rows[0], Chain: rows[1:], ErrorMessage: deref(jd.Job.ErrorMessage),
		WorkerClaim: deref(jd.Job.WorkerClaim), HeartbeatAt: jd.Job.RunningHeartbeatAt, ClaimedAt: jd.Job.ClaimedAt,
		Live: views.Live{StreamURL: "/admin/jobs/" + id.String() + "/events", PollURL: "/admin/jobs/" + id.String() + "/panel"}}
	if jd.Job.ResponseID != nil {
		d.ResponseID = jd.Job.ResponseID.String()
	}
	if d.ErrorMessage, err = s.operatorErrorText(ctx, v, jd.Job); err != nil {
		return views.JobDetail{}, err
	}
	for i := range d.Chain {
		d.Chain[i].Current = d.Chain[i].ID == d.Job.ID
	}
	if d.Output, err = s.outputSoFar(ctx, v, jd.Job.ID); err != nil {
		return views.JobDetail{}, err
	}
	return d, nil
}

// jobPage is GET /admin/jobs/:id.
func (s *Server) jobPage(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "job")
	}
	d, err := s.jobDetail(c.UserContext(), viewerOf(principalOf(c)), id)
	if err != nil {
		return s.dashError(c, err, "job")
	}
	d.Notice = dashNoticeOf(c)
	return render(c, views.JobDetailPage(dashPage(c, "Job "+views.ShortID(d.Job.ID), views.NavJobs), d))
}

// jobPanel is GET /admin/jobs/:id/panel.
func (s *Server) jobPanel(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "job")
	}
	d, err := s.jobDetail(c.UserContext(), viewerOf(principalOf(c)), id)
	if err != nil {
		return s.dashError(c, err, "job")
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return render(c, views.JobPanel(d, csrfOf(c)))
}
