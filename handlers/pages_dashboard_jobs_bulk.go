package handlers

import (
	"errors"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/views"
)

// dashBulkCap is the most jobs one bulk cancel or retry touches (the newest first); the
// confirmation page says so when more match.
const dashBulkCap = 1000

// bulkStates are the states a bulk action applies to: those the jobs state machine lets the
// action move a job out of.
func bulkStates(action string) ([]jobs.State, bool) {
	var allowed func(jobs.State) bool
	switch action {
	case "cancel":
		allowed = jobCanCancel
	case "retry":
		allowed = jobCanRetry
	default:
		return nil, false
	}
	var out []jobs.State
	for _, st := range dashJobStates {
		if allowed(st) {
			out = append(out, st)
		}
	}
	return out, true
}

// jobsBulkConfirm is GET /admin/jobs/bulk?action=cancel|retry&<filter>: the confirmation page,
// stating how many jobs the action would touch now.
func (s *Server) jobsBulkConfirm(c *fiber.Ctx) error {
	p := principalOf(c)
	ctx := c.UserContext()
	action := c.Query("action")
	states, ok := bulkStates(action)
	if !ok {
		return s.errorPage(c, fiber.StatusBadRequest, "Unknown action", "A bulk action is cancel or retry.")
	}
	q := s.parseJobsQuery(ctx, p, func(k string) string { return c.Query(k) }, time.Now())
	ids, err := s.deps.Reads.BulkSelect(ctx, viewerOf(p), q.filter, states, dashBulkCap+1)
	if err != nil {
		return err
	}
	b := views.BulkConfirm{Action: action, Filter: q.view, Count: min(len(ids), dashBulkCap), More: len(ids) > dashBulkCap, Cap: dashBulkCap}
	b.Filter.Q = ""
	return render(c, views.JobsBulkConfirmPage(dashPage(c, "Bulk "+action, views.NavJobs), b))
}

// jobsBulkAction is POST /admin/jobs/bulk: cancels or retries the newest dashBulkCap jobs of
// the filtered selection one by one (each in its own transaction, exactly as a single cancel
// or retry), then goes back to the list with the numbers.
func (s *Server) jobsBulkAction(c *fiber.Ctx) error {
	p := principalOf(c)
	ctx := c.UserContext()
	action := c.FormValue("action")
	states, ok := bulkStates(action)
	if !ok {
		return s.errorPage(c, fiber.StatusBadRequest, "Unknown action", "A bulk action is cancel or retry.")
	}
	q := s.parseJobsQuery(ctx, p, func(k string) string { return c.FormValue(k) }, time.Now())
	v, actor := viewerOf(p), actorOf(p)
	ids, err := s.deps.Reads.BulkSelect(ctx, v, q.filter, states, dashBulkCap)
	if err != nil {
		return err
	}
	if err := checkBulkCount(c.FormValue("expected"), len(ids)); err != nil {
		return err
	}
	done, skipped, refused, failed := 0, 0, 0, 0
	for _, id := range ids {
		var err error
		if action == "cancel" {
			_, err = s.deps.Jobs.Cancel(ctx, v, id, actor)
		} else {
			_, err = s.deps.Jobs.Retry(ctx, v, id, actor)
		}
		switch {
		case err == nil:
			done++
		case errors.Is(err, jobs.ErrConflict), errors.Is(err, jobs.ErrNotFound):
			skipped++
		case isRefusal(err):
			refused++
		default:
			failed++
			s.log.Warn("bulk job action", "action", action, "job_id", id, "err", err)
		}
	}
	back := q.view
	back.Q = ""
	vals := back.Values()
	vals.Set("notice", "bulk")
	vals.Set("action", action)
	vals.Set("done", strconv.Itoa(done))
	vals.Set("skipped", strconv.Itoa(skipped))
	vals.Set("failed", strconv.Itoa(failed))
	vals.Set("refused", strconv.Itoa(refused))
	return c.Redirect("/admin/jobs?"+vals.Encode(), fiber.StatusSeeOther)
}

// isRefusal says whether err is admission's refusal (a limit, or a field rule a retry breaks,
// such as a model the deployment no longer lists).
func isRefusal(err error) bool {
	var verr *jobs.ValidationError
	_, refused := admit.AsRefusal(err)
	return refused || errors.As(err, &verr)
}
