package handlers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs"
	"asterion/views"
)

// missionMaxDrops bounds the field: the newest prompts by created_at.
const missionMaxDrops = 200

// missionPage is one page of MissionRecent while the field is read whole.
const missionPage = 500

// missionViewer is the scope of the mission field: the signed-in user's own prompts, whatever
// the role (operators see their org's work on the dashboard, not in their field). Every
// mission route acts through it, so another user's or org's prompt answers 404.
func missionViewer(p identity.Principal) jobs.Viewer {
	return jobs.Viewer{OrgID: p.OrgID, UserID: p.UserID}
}

// isHTMX reports whether htmx sent the request (otherwise a plain form post, answered with a
// redirect back to the page).
func isHTMX(c *fiber.Ctx) bool { return c.Get("HX-Request") == "true" }

// missionPageHandler is GET /mission.
func (s *Server) missionPageHandler(c *fiber.Ctx) error {
	field, err := s.missionField(c.UserContext(), missionViewer(principalOf(c)))
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return render(c, views.MissionPage(pageFor(c, "Mission", views.NavMission), field))
}

// missionDrops is GET /mission/drops?since=: the drops changed at or after since as OOB
// fragments, for the page's polling fallback (it asks mission/recent first, and fetches these
// only when something changed).
func (s *Server) missionDrops(c *fiber.Ctx) error {
	var since *time.Time
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return fiber.NewError(fiber.StatusUnprocessableEntity, "since must be an RFC 3339 time")
		}
		since = &t
	}
	v := missionViewer(principalOf(c))
	items, _, err := s.missionItems(c.UserContext(), v, since, nil)
	if err != nil {
		return err
	}
	drops, err := s.missionDropsOf(c.UserContext(), v, items)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return render(c, views.MissionDrops(drops, csrfOf(c)))
}

// missionSubmit is POST /mission/prompts: the compose bar. It answers 202 with the new drop,
// queued, which the page shows at once; 422 with the compose error for a bad field.
func (s *Server) missionSubmit(c *fiber.Ctx) error {
	v := missionViewer(principalOf(c))
	req := jobs.SubmitRequest{Viewer: v, Prompt: c.FormValue("prompt")}
	fields := map[string]string{}
	if raw := strings.TrimSpace(c.FormValue("priority")); raw != "" {
		n, err := strconv.Atoi(raw)
		if err != nil {
			fields["priority"] = "must be a whole number between 0 and 100"
		}
		req.Priority = &n
	}
	if raw := strings.TrimSpace(c.FormValue("parent_id")); raw != "" {
		id, err := uuid.Parse(raw)
		if err != nil {
			fields["parent_id"] = "no such entity visible to you"
		}
		req.ParentID = &id
	}
	var (
		out jobs.Submitted
		err error
	)
	if len(fields) > 0 {
		err = &jobs.ValidationError{Fields: fields}
	} else {
		out, err = s.deps.Jobs.Submit(c.UserContext(), req)
	}
	if verr := (*jobs.ValidationError)(nil); errors.As(err, &verr) {
		if !isHTMX(c) {
			return fiber.NewError(fiber.StatusUnprocessableEntity, composeMessage(verr.Fields))
		}
		c.Status(fiber.StatusUnprocessableEntity)
		return render(c, views.MissionComposeError(composeMessage(verr.Fields)))
	}
	if budget := (*jobs.BudgetExhaustedError)(nil); errors.As(err, &budget) {
		msg := "Your org's token budget for this " + string(budget.Status.Budget.Period) +
			" is spent; it resets at " + budget.Status.Resets.UTC().Format("2006-01-02 15:04") + " UTC."
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(budget.RetryAfter))
		if !isHTMX(c) {
			return fiber.NewError(fiber.StatusTooManyRequests, msg)
		}
		c.Status(fiber.StatusTooManyRequests)
		return render(c, views.MissionComposeError(msg))
	}
	if err != nil {
		return err
	}
	if !isHTMX(c) {
		return c.Redirect("/mission", fiber.StatusSeeOther)
	}
	// The drop as accepted: queued, versioned by its creation. When the stream has already
	// shown a later state, the page keeps that one.
	d, err := s.deps.Jobs.GetJob(c.UserContext(), v, out.JobID)
	if err != nil {
		return err
	}
	drop := views.MissionDrop{PromptID: out.PromptID.String(), Text: strings.TrimSpace(req.Prompt), CreatedAt: d.Job.CreatedAt,
		JobID: out.JobID.String(), State: string(jobs.StateQueued), Priority: d.Job.Priority, Attempt: 1,
		MaxAttempts: d.Job.MaxAttempts, UpdatedAt: d.Job.CreatedAt, Depth: -1}
	if req.ParentID != nil {
		drop.ParentID = req.ParentID.String()
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Status(fiber.StatusAccepted)
	return render(c, views.MissionSubmitted(drop, csrfOf(c)))
}

// composeMessage turns field errors into one sentence for the compose bar.
func composeMessage(fields map[string]string) string {
	names := map[string]string{"prompt": "The prompt", "priority": "The priority", "parent_id": "The drop to continue from",
		"max_attempts": "Max attempts"}
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		name := names[k]
		if name == "" {
			name = k
		}
		parts = append(parts, name+" "+fields[k]+".")
	}
	return strings.Join(parts, " ")
}

// missionCancel is POST /mission/prompts/{id}/cancel: cancels the prompt's current job.
func (s *Server) missionCancel(c *fiber.Ctx) error {
	return s.missionAction(c, func(ctx context.Context, v jobs.Viewer, job uuid.UUID, a jobs.Actor) error {
		_, err := s.deps.Jobs.Cancel(ctx, v, job, a)
		return err
	}, fiber.StatusOK)
}

// missionRetry is POST /mission/prompts/{id}/retry: supersedes the prompt's current job with a
// new one; the drop follows the new job.
func (s *Server) missionRetry(c *fiber.Ctx) error {
	return s.missionAction(c, func(ctx context.Context, v jobs.Viewer, job uuid.UUID, a jobs.Actor) error {
		_, err := s.deps.Jobs.Retry(ctx, v, job, a)
		return err
	}, fiber.StatusAccepted)
}

// missionAction runs act on the current (newest) job of the prompt in the path. The form names
// the job the drop showed; it must belong to that prompt and be visible to the user, or the
// answer is 404 like for a prompt that does not exist. The answer is the drop as it is now (409
// with it when the job's state no longer allows the action).
func (s *Server) missionAction(c *fiber.Ctx, act func(context.Context, jobs.Viewer, uuid.UUID, jobs.Actor) error, okStatus int) error {
	ctx := c.UserContext()
	p := principalOf(c)
	v := missionViewer(p)
	notFound := func() error { return fiber.NewError(fiber.StatusNotFound, "There is no such prompt.") }
	promptID, ok := pathUUID(c, "id")
	if !ok {
		return notFound()
	}
	jobID, err := uuid.Parse(strings.TrimSpace(c.FormValue("job_id")))
	if err != nil {
		return notFound()
	}
	d, err := s.deps.Jobs.GetJob(ctx, v, jobID)
	if errors.Is(err, jobs.ErrNotFound) || (err == nil && d.Job.PromptID != promptID) {
		return notFound()
	}
	if err != nil {
		return err
	}
	current := d.Job
	if n := len(d.History); n > 0 {
		current = d.History[n-1]
	}
	status := okStatus
	switch err := act(ctx, v, current.ID, actorOf(p)); {
	case errors.Is(err, jobs.ErrConflict):
		status = fiber.StatusConflict
	case errors.Is(err, jobs.ErrNotFound):
		return notFound()
	case err != nil:
		return err
	}
	if !isHTMX(c) {
		return c.Redirect("/mission", fiber.StatusSeeOther)
	}
	drop, err := s.missionDrop(ctx, v, promptID, current.UpdatedAt)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Status(status)
	return render(c, views.MissionDrops([]views.MissionDrop{drop}, csrfOf(c)))
}

// missionField reads the whole field of v: its newest prompts, in threads.
func (s *Server) missionField(ctx context.Context, v jobs.Viewer) (views.MissionField, error) {
	items, asOf, err := s.missionItems(ctx, v, nil, nil)
	if err != nil {
		return views.MissionField{}, err
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].Prompt.CreatedAt.Before(items[j].Prompt.CreatedAt) })
	if len(items) > missionMaxDrops {
		items = items[len(items)-missionMaxDrops:]
	}
	drops, err := s.missionDropsOf(ctx, v, items)
	if err != nil {
		return views.MissionField{}, err
	}
	return views.BuildMissionField(drops, asOf), nil
}

// missionItems pages through MissionRecent from since (everything when nil), one item per
// prompt (the latest read wins), until the feed is exhausted or, when want is set, every
// prompt in want was found. It returns the items and the as_of to pass as the next since.
func (s *Server) missionItems(ctx context.Context, v jobs.Viewer, since *time.Time, want map[uuid.UUID]bool) ([]jobs.MissionItem, time.Time, error) {
	byPrompt := map[uuid.UUID]jobs.MissionItem{}
	var order []uuid.UUID
	var asOf time.Time
	found := 0
	for range 1000 {
		next, items, err := s.deps.Jobs.MissionRecent(ctx, v, since, missionPage)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("read the mission field: %w", err)
		}
		asOf = next
		for _, it := range items {
			if _, seen := byPrompt[it.Prompt.ID]; !seen {
				order = append(order, it.Prompt.ID)
				if want[it.Prompt.ID] {
					found++
				}
			}
			byPrompt[it.Prompt.ID] = it
		}
		if len(items) < missionPage || (want != nil && found == len(want)) ||
			(since != nil && !next.After(*since)) {
			break
		}
		since = &next
	}
	out := make([]jobs.MissionItem, 0, len(order))
	for _, id := range order {
		if want == nil || want[id] {
			out = append(out, byPrompt[id])
		}
	}
	return out, asOf, nil
}

// missionDrop reads one drop of v that changed at or after since.
func (s *Server) missionDrop(ctx context.Context, v jobs.Viewer, promptID uuid.UUID, since time.Time) (views.MissionDrop, error) {
	drops, err := s.missionDropsByID(ctx, v, map[uuid.UUID]bool{promptID: true}, since)
	if err != nil {
		return views.MissionDrop{}, err
	}
	if len(drops) == 0 {
		return views.MissionDrop{}, fmt.Errorf("prompt %s vanished from the mission field", promptID)
	}
	return drops[0], nil
}

// missionDropsByID reads the drops of the prompts in ids that changed at or after since, in
// prompt created_at order (a parent before its continuations).
func (s *Server) missionDropsByID(ctx context.Context, v jobs.Viewer, ids map[uuid.UUID]bool, since time.Time) ([]views.MissionDrop, error) {
	// A millisecond of slack: since is compared with the jobs' updated_at, inclusively.
	from := since.Add(-time.Millisecond)
	items, _, err := s.missionItems(ctx, v, &from, ids)
	if err != nil {
		return nil, err
	}
	sort.SliceStable(items, func(i, j int) bool { return items[i].Prompt.CreatedAt.Before(items[j].Prompt.CreatedAt) })
	return s.missionDropsOf(ctx, v, items)
}

// missionDropsOf turns items into drops (depth unknown) and lists the superseded jobs of
// prompts that were retried.
func (s *Server) missionDropsOf(ctx context.Context, v jobs.Viewer, items []jobs.MissionItem) ([]views.MissionDrop, error) {
	drops := make([]views.MissionDrop, len(items))
	for i, it := range items {
		drops[i] = missionDropOf(it)
		if it.Job.Supersedes == nil {
			continue
		}
		d, err := s.deps.Jobs.GetJob(ctx, v, it.Job.ID)
		if errors.Is(err, jobs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("history of prompt %s: %w", it.Prompt.ID, err)
		}
		for _, h := range d.History {
			if h.State == string(jobs.StateSuperseded) {
				drops[i].Superseded = append(drops[i].Superseded, views.MissionAttempt{JobID: h.ID.String(),
					Attempt: h.Attempt, ErrorKind: missionStr(h.ErrorKind), UpdatedAt: h.UpdatedAt})
			}
		}
	}
	return drops, nil
}

func missionDropOf(it jobs.MissionItem) views.MissionDrop {
	j := it.Job
	d := views.MissionDrop{PromptID: it.Prompt.ID.String(), Text: it.Prompt.Body, CreatedAt: it.Prompt.CreatedAt,
		JobID: j.ID.String(), State: j.State, Priority: j.Priority, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		ErrorKind: missionStr(j.ErrorKind), ErrorMessage: missionStr(j.ErrorMessage), UpdatedAt: j.UpdatedAt, Depth: -1}
	if it.Prompt.ParentID != nil {
		d.ParentID = it.Prompt.ParentID.String()
	}
	if it.Response != nil {
		d.Response = &views.MissionResponse{ID: it.Response.ID.String(), Text: it.Response.Body, CreatedAt: it.Response.CreatedAt}
	}
	return d
}

func missionStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
