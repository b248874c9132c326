package handlers

import (
	"context"
	"errors"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/readmodel"
	"asterion/views"
)

// dashJobStates are the job states in the order the dashboard shows them.
var dashJobStates = []jobs.State{jobs.StateQueued, jobs.StateRunning, jobs.StateSucceeded, jobs.StateFailed,
	jobs.StateCancelled, jobs.StateSuperseded}

// jobCanCancel reports whether a job in st may be cancelled: a cancel moves it to cancelled.
func jobCanCancel(st jobs.State) bool { return jobs.CanTransition(st, jobs.StateCancelled) }

// jobCanRetry reports whether a job in st may be retried: a retry supersedes it.
func jobCanRetry(st jobs.State) bool { return jobs.CanTransition(st, jobs.StateSuperseded) }

// jobRowOf is a job as a table row.
func jobRowOf(j db.Job, orgs, users map[int64]string) views.JobRow {
	r := views.JobRow{ID: j.ID.String(), PromptID: j.PromptID.String(), State: j.State, Priority: j.Priority,
		Attempt: j.Attempt, MaxAttempts: j.MaxAttempts, Org: orgs[j.OrgID], Creator: users[j.CreatedBy],
		ErrorKind: deref(j.ErrorKind), CreatedAt: j.CreatedAt, ScheduledAt: j.ScheduledAt, StartedAt: j.StartedAt,
		FinishedAt: j.FinishedAt, UpdatedAt: j.UpdatedAt, Cancelable: jobCanCancel(jobs.State(j.State)),
		Retryable: jobCanRetry(jobs.State(j.State))}
	if j.OperationID != nil {
		r.OperationID = j.OperationID.String()
	}
	if j.Supersedes != nil {
		r.Supersedes = j.Supersedes.String()
	}
	if j.ScheduledFor != nil {
		at := *j.ScheduledFor
		r.ScheduledFor = &at
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
	ids := make([]uuid.UUID, len(list))
	for i, j := range list {
		ids[i] = j.ID
	}
	doors, err := db.JobDoors(ctx, s.deps.Jobs.DB(), ids)
	if err != nil {
		// The door is a badge: a list without it is still the list.
		s.log.Warn("the doors of listed jobs were not read", "err", err)
	}
	out := make([]views.JobRow, len(list))
	for i, j := range list {
		out[i] = jobRowOf(j, orgs, users)
		out[i].Door = doors[j.ID]
	}
	return out
}

// jobsCounts are jobs by state from the trigger-kept counters, shared for a second.
func (s *Server) jobsCounts(ctx context.Context, v jobs.Viewer, q jobsQuery, notBefore time.Time) ([]views.Count, error) {
	m, err := s.dashboard.jobCounts.getFresh(ctx, countsKeyOf(v, q.filter.OrgID), notBefore, func(ctx context.Context) (map[string]int64, error) {
		return s.deps.Reads.JobCounts(ctx, v, q.filter.OrgID)
	})
	if err != nil {
		return nil, err
	}
	var total int64
	var out []views.Count
	for _, st := range dashJobStates {
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
	list, next, err := s.deps.Reads.ListJobs(ctx, v, q.filter)
	if errors.Is(err, readmodel.ErrBadCursor) {
		q.errs["cursor"] = "bad page link"
		q.filter.Cursor = ""
		list, next, err = s.deps.Reads.ListJobs(ctx, v, q.filter)
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
		j, err := s.deps.Reads.FindJob(ctx, viewerOf(p), q.goTo)
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
