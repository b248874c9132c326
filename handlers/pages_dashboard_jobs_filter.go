package handlers

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/readmodel"
	"asterion/views"
)

// jobsQuery is a parsed jobs filter.
type jobsQuery struct {
	view   views.JobsFilter
	filter readmodel.JobFilter
	errs   map[string]string
	// goTo is the job or prompt id typed in the search field (uuid.Nil when none).
	goTo uuid.UUID
}

// parseJobsQuery reads the jobs filter from get (query or form values).
func (s *Server) parseJobsQuery(ctx context.Context, p identity.Principal, get func(string) string, now time.Time) jobsQuery {
	q := jobsQuery{errs: map[string]string{}}
	q.filter.Limit = dashPageSize
	if v := strings.TrimSpace(get("state")); v == views.JobsScheduled {
		// Not a state of its own: queued jobs still waiting for their scheduled_for.
		q.view.State, q.filter.State, q.filter.Scheduled = v, jobs.StateQueued, true
	} else if v != "" {
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
