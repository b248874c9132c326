package handlers

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/identity"
	"asterion/jobs"
	"asterion/views"
)

// dashBulkCap is the most jobs one bulk cancel or retry touches (the newest first); the
// confirmation page says so when more match.
const dashBulkCap = 1000

// jobsQuery is a parsed jobs filter.
type jobsQuery struct {
	view   views.JobsFilter
	filter jobs.JobFilter
	errs   map[string]string
	// goTo is the job or prompt id typed in the search field (uuid.Nil when none).
	goTo uuid.UUID
}

// parseJobsQuery reads the jobs filter from get (query or form values).
func (s *Server) parseJobsQuery(ctx context.Context, p identity.Principal, get func(string) string, now time.Time) jobsQuery {
	q := jobsQuery{errs: map[string]string{}}
	q.filter.Limit = dashPageSize
	if v := strings.TrimSpace(get("state")); v != "" {
		if st, err := jobs.ParseState(v); err != nil {
			q.errs["state"] = "not a job state"
		} else {
			q.view.State, q.filter.State = v, st
		}
	}
	if id, name, msg := s.resolveOrg(ctx, p, get("org")); msg != "" {
		q.errs["org"] = msg
	} else if id != 0 {
		q.view.Org, q.filter.OrgID = name, id
	}
	if v := get("range"); v != "" {
		if d, ok := dashRanges[v]; ok {
			since := now.Add(-d)
			q.view.Range, q.filter.Since = v, &since
		} else {
			q.errs["range"] = "not a known range"
		}
	}
	if v := strings.TrimSpace(get("q")); v != "" {
		if id, err := uuid.Parse(v); err == nil {
			q.goTo = id
			q.view.Q = id.String()
		} else {
			q.view.Q = v
			q.errs["q"] = "enter a full job or prompt id (a UUID)"
		}
	}
	q.filter.Cursor = get("cursor")
	return q
}

// matches reports whether job passes the filter (for rows that arrive over the stream).
func (q jobsQuery) matches(j db.Job) bool {
	f := q.filter
	switch {
	case f.State != "" && j.State != string(f.State),
		f.OrgID != 0 && j.OrgID != f.OrgID,
		f.Since != nil && j.CreatedAt.Before(*f.Since):
		return false
	}
	return true
}

// jobRowOf is a job as a table row.
func jobRowOf(j db.Job, orgs, users map[int64]string) views.JobRow {
	r := views.JobRow{ID: j.ID.String(), PromptID: j.PromptID.String(), State: j.State, Priority: j.Priority,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, Org: orgs[j.OrgID], Creator: users[j.CreatedBy],
		ErrorKind: deref(j.ErrorKind), CreatedAt: j.CreatedAt, ScheduledAt: j.ScheduledAt, StartedAt: j.StartedAt,
		FinishedAt: j.FinishedAt, UpdatedAt: j.UpdatedAt}
	if j.OperationID != nil {
		r.OperationID = j.OperationID.String()
	}
	if j.Supersedes != nil {
		r.Supersedes = j.Supersedes.String()
	}
	return r
}

// jobRows converts jobs with their names.
func (s *Server) jobRows(ctx context.Context, list []db.Job) []views.JobRow {
	var orgIDs, userIDs []int64
	for _, j := range list {
		orgIDs = append(orgIDs, j.OrgID)
		userIDs = append(userIDs, j.CreatedBy)
	}
	orgs, users := s.names(ctx, orgIDs, userIDs)
	out := make([]views.JobRow, len(list))
	for i, j := range list {
		out[i] = jobRowOf(j, orgs, users)
	}
	return out
}

// jobsCounts are jobs by state from the trigger-kept counters, shared for a second.
func (s *Server) jobsCounts(ctx context.Context, v jobs.Viewer, q jobsQuery, notBefore time.Time) ([]views.Count, error) {
	key := "jobcounts:" + strconv.FormatBool(v.AllOrgs) + ":" + strconv.FormatInt(v.OrgID, 10) + ":" + strconv.FormatInt(q.filter.OrgID, 10)
	val, err := s.dash().cache.getFresh(ctx, key, time.Second, notBefore, func(ctx context.Context) (any, error) {
		return s.deps.Jobs.JobCounts(ctx, v, q.filter.OrgID)
	})
	if err != nil {
		return nil, err
	}
	m := val.(map[string]int64)
	var total int64
	var out []views.Count
	for _, st := range []jobs.State{jobs.StateQueued, jobs.StateRunning, jobs.StateSucceeded, jobs.StateFailed, jobs.StateCancelled, jobs.StateSuperseded} {
		n := m[string(st)]
		total += n
		f := q.view
		f.State = string(st)
		out = append(out, views.Count{Key: string(st), Label: string(st), N: n, Href: views.JobsPath(f, ""), Current: q.view.State == string(st)})
	}
	all := q.view
	all.State = ""
	return append([]views.Count{{Key: "all", Label: "all", N: total, Href: views.JobsPath(all, ""), Current: q.view.State == ""}}, out...), nil
}

func jobsLive(q jobsQuery) views.Live {
	v := q.view.Values()
	v.Del("q")
	if q.filter.Cursor != "" {
		v.Set("cursor", q.filter.Cursor)
	}
	enc := ""
	if len(v) > 0 {
		enc = "?" + v.Encode()
	}
	return views.Live{StreamURL: "/admin/jobs/events" + enc, PollURL: "/admin/jobs/list" + enc}
}

// loadJobsList reads one page of jobs with counts; a bad cursor restarts at the newest.
func (s *Server) loadJobsList(ctx context.Context, p identity.Principal, q jobsQuery) (views.JobsList, []db.Job, error) {
	v := viewerOf(p)
	list, next, err := s.deps.Jobs.ListJobs(ctx, v, q.filter)
	if errors.Is(err, jobs.ErrBadCursor) {
		q.errs["cursor"] = "bad page link"
		q.filter.Cursor = ""
		list, next, err = s.deps.Jobs.ListJobs(ctx, v, q.filter)
	}
	if err != nil {
		return views.JobsList{}, nil, err
	}
	counts, err := s.jobsCounts(ctx, v, q, time.Time{})
	if err != nil {
		return views.JobsList{}, nil, err
	}
	return views.JobsList{Filter: q.view, Errors: q.errs, Counts: counts, Rows: s.jobRows(ctx, list), NextCursor: next,
		Paged: q.filter.Cursor != "", ShowOrg: p.SeesAllOrgs(), Live: jobsLive(q), BulkCap: dashBulkCap}, list, nil
}

// jobsPage is GET /admin/jobs. A job or prompt id in q goes straight to that job's page.
func (s *Server) jobsPage(c *fiber.Ctx) error {
	p := principalOf(c)
	ctx := c.UserContext()
	q := s.parseJobsQuery(ctx, p, func(k string) string { return c.Query(k) }, time.Now())
	if q.goTo != uuid.Nil {
		j, err := s.deps.Jobs.FindJob(ctx, viewerOf(p), q.goTo)
		if err == nil {
			return c.Redirect("/admin/jobs/"+j.ID.String(), fiber.StatusSeeOther)
		}
		if !errors.Is(err, jobs.ErrNotFound) {
			return err
		}
		q.errs["q"] = "no job or prompt you can see has this id"
	}
	d, _, err := s.loadJobsList(ctx, p, q)
	if err != nil {
		return s.dashError(c, err, "page")
	}
	d.Notice = dashNoticeOf(c)
	if d.ShowOrg {
		d.Orgs = s.orgOptions(ctx)
	}
	return render(c, views.JobsPage(dashPage(c, "Jobs", views.NavJobs), d))
}

// jobsList is GET /admin/jobs/list: the table fragment for the polling fallback.
func (s *Server) jobsList(c *fiber.Ctx) error {
	p := principalOf(c)
	ctx := c.UserContext()
	q := s.parseJobsQuery(ctx, p, func(k string) string { return c.Query(k) }, time.Now())
	d, _, err := s.loadJobsList(ctx, p, q)
	if err != nil {
		return s.dashError(c, err, "page")
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	if err := render(c, views.JobsListFragment(d, false)); err != nil {
		return err
	}
	return views.JobsCounts(d.Counts).Render(ctx, c.Response().BodyWriter())
}

// jobDetail builds one job's page data with its prompt's chain.
func (s *Server) jobDetail(ctx context.Context, v jobs.Viewer, id uuid.UUID) (views.JobDetail, error) {
	jd, err := s.deps.Jobs.GetJob(ctx, v, id)
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

// jobRetryAction is POST /admin/jobs/:id/retry: on to the new job's page, or to its operation
// when the form came from an operation page (return=operation).
func (s *Server) jobRetryAction(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "job")
	}
	p := principalOf(c)
	toOp := c.FormValue("return") == "operation"
	out, err := s.deps.Jobs.Retry(c.UserContext(), viewerOf(p), id, actorOf(p))
	switch {
	case err == nil && toOp:
		return c.Redirect(dashWithNotice("/admin/deferred-operations/"+out.Operation.OperationID.String(), "op-retried"), fiber.StatusSeeOther)
	case err == nil:
		return c.Redirect(dashWithNotice("/admin/jobs/"+out.Job.ID.String(), "job-retried"), fiber.StatusSeeOther)
	case errors.Is(err, jobs.ErrConflict):
		back := "/admin/jobs/" + id.String()
		if toOp {
			if j, gerr := s.deps.Jobs.GetJob(c.UserContext(), viewerOf(p), id); gerr == nil && j.Job.OperationID != nil {
				back = "/admin/deferred-operations/" + j.Job.OperationID.String()
			}
		}
		return c.Redirect(dashWithNotice(back, "retry-conflict"), fiber.StatusSeeOther)
	}
	return s.dashError(c, err, "job")
}

// bulkStates are the states a bulk action applies to.
func bulkStates(action string) ([]jobs.State, bool) {
	switch action {
	case "cancel":
		return []jobs.State{jobs.StateQueued, jobs.StateRunning}, true
	case "retry":
		return []jobs.State{jobs.StateSucceeded, jobs.StateFailed, jobs.StateCancelled}, true
	}
	return nil, false
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
	ids, err := s.deps.Jobs.BulkSelect(ctx, viewerOf(p), q.filter, states, dashBulkCap+1)
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
	ids, err := s.deps.Jobs.BulkSelect(ctx, v, q.filter, states, dashBulkCap)
	if err != nil {
		return err
	}
	if err := checkBulkCount(c.FormValue("expected"), len(ids)); err != nil {
		return err
	}
	done, skipped, failed := 0, 0, 0
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
	return c.Redirect("/admin/jobs?"+vals.Encode(), fiber.StatusSeeOther)
}
