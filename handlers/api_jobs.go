package handlers

import (
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/jobs"
	"asterion/jobs/readmodel"
)

// getJob is GET /sa-core/v1/jobs/{id}: the job and every job of its prompt, oldest first.
func (s *Server) getJob(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return problem(c, fiber.StatusNotFound, "no such job")
	}
	d, err := s.deps.Reads.GetJob(c.UserContext(), viewerOf(principalOf(c)), id)
	if err != nil {
		return s.jobsError(c, err)
	}
	hist := make([]jobJSON, len(d.History))
	for i, h := range d.History {
		hist[i] = toJobJSON(h)
	}
	// error_message is what a member may see; operators also get the provider's own words.
	var detail *string
	if p := principalOf(c); p.SeesOrg() {
		text, err := s.deps.Reads.ErrorDetail(c.UserContext(), viewerOf(p), id)
		if err != nil {
			return s.jobsError(c, err)
		}
		if text != "" {
			detail = &text
		}
	}
	u, err := s.jobUsageOf(c.UserContext(), d.Job)
	if err != nil {
		return err
	}
	// The whole prompt: mission/recent carries only the head of a long one.
	text, err := s.deps.Reads.PromptText(c.UserContext(), viewerOf(principalOf(c)), d.Job)
	if err != nil {
		return s.jobsError(c, err)
	}
	msgs, err := s.deps.Reads.PromptMessages(c.UserContext(), d.Job.PromptID)
	if err != nil {
		return err
	}
	return c.JSON(struct {
		jobJSON
		jobUsageJSON
		PromptText  string         `json:"prompt_text"`
		Messages    []jobs.Message `json:"messages,omitempty"`
		ErrorDetail *string        `json:"error_detail,omitempty"`
		History     []jobJSON      `json:"history"`
	}{toJobJSON(d.Job), u, text, msgs, detail, hist})
}

// listJobs is GET /sa-core/v1/jobs?state=&org=&since=&limit=&cursor= (operators).
func (s *Server) listJobs(c *fiber.Ctx) error {
	p := principalOf(c)
	fields := map[string]string{}
	f := readmodel.JobFilter{Cursor: c.Query("cursor")}
	if v := c.Query("state"); v != "" {
		st, err := jobs.ParseState(v)
		if err != nil {
			fields["state"] = "must be one of queued, running, succeeded, failed, cancelled, superseded"
		}
		f.State = st
	}
	if v := c.Query("org"); v != "" {
		org, err := s.deps.Identity.OrgByName(c.UserContext(), v)
		switch {
		case err != nil || (!p.SeesAllOrgs() && org.ID != p.OrgID):
			// Another org's name answers like a missing one.
			f.OrgID = -1
		default:
			f.OrgID = org.ID
		}
	}
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			fields["since"] = "must be an RFC 3339 time"
		}
		f.Since = &t
	}
	limit, ok := queryInt(c, "limit", 100, 1, 500)
	if !ok {
		fields["limit"] = "must be an integer between 1 and 500"
	}
	f.Limit = limit
	if len(fields) > 0 {
		return validationProblem(c, fields)
	}
	list, next, err := s.deps.Reads.ListJobs(c.UserContext(), viewerOf(p), f)
	if err != nil {
		return s.jobsError(c, err)
	}
	items := make([]jobJSON, len(list))
	for i, j := range list {
		items[i] = toJobJSON(j)
	}
	var nextCursor any
	if next != "" {
		nextCursor = next
	}
	return c.JSON(fiber.Map{"items": items, "next_cursor": nextCursor})
}

// cancelJob is POST /sa-core/v1/jobs/{id}/cancel.
func (s *Server) cancelJob(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return problem(c, fiber.StatusNotFound, "no such job")
	}
	p := principalOf(c)
	job, err := s.deps.Jobs.Cancel(c.UserContext(), viewerOf(p), id, actorOf(p))
	if err != nil {
		return s.jobsError(c, err)
	}
	return c.JSON(toJobJSON(job))
}

// retryJob is POST /sa-core/v1/jobs/{id}/retry: 202 with the new job and its operation.
func (s *Server) retryJob(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return problem(c, fiber.StatusNotFound, "no such job")
	}
	p := principalOf(c)
	out, err := s.deps.Jobs.Retry(c.UserContext(), viewerOf(p), id, actorOf(p))
	if err != nil {
		return s.jobsError(c, err)
	}
	op, retry, err := s.acceptedHandle(c.UserContext(), out.Operation, nil)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderLocation, out.Operation.StatusHref)
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retry))
	return c.Status(fiber.StatusAccepted).JSON(fiber.Map{"job": toJobJSON(out.Job), "operation": op})
}

// queueMetrics is GET /sa-core/v1/metrics/queue?window=1h (operators; admins see every org).
func (s *Server) queueMetrics(c *fiber.Ctx) error {
	window := time.Hour
	if v := c.Query("window"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 || d > 31*24*time.Hour {
			return validationProblem(c, map[string]string{"window": "must be a duration like 1h, at most 744h"})
		}
		window = d
	}
	release, ok := s.metricsSlot()
	if !ok {
		c.Set(fiber.HeaderRetryAfter, "2")
		return problem(c, fiber.StatusTooManyRequests, "queue metrics are being computed for other callers; retry shortly")
	}
	defer release()
	m, err := s.deps.Reads.QueueMetrics(c.UserContext(), viewerOf(principalOf(c)), window)
	if err != nil {
		return err
	}
	return c.JSON(m)
}
