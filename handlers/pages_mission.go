package handlers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/a-h/templ"
	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/eta"
	"asterion/jobs/readmodel"
	"asterion/views"
)

// missionMaxDrops bounds the field: the newest prompts by created_at.
const missionMaxDrops = 200

// missionCutMark ends a text the field carries only the head of (readmodel.MissionTextCap
// characters); the whole text is in the API's answers.
const missionCutMark = " …"

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
	page := pageFor(c, "Mission", views.NavMission)
	field, _, err := s.missionField(c.UserContext(), missionViewer(principalOf(c)), page.CSRFToken)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return renderSegmented(c.UserContext(), c, views.MissionPage(page, field))
}

// renderStreamed writes comp as the body while it renders, instead of holding the whole page
// in memory until it is sent: a field of 200 long drops is most of a megabyte, once per reload
// in flight. comp holds plain data read before the handler returns (Fiber reuses c after).
func renderStreamed(c *fiber.Ctx, comp templ.Component) error {
	c.Set(fiber.HeaderContentType, fiber.MIMETextHTMLCharsetUTF8)
	ctx := context.WithoutCancel(c.UserContext())
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		_ = comp.Render(ctx, w)
	})
	return nil
}

// missionDrops is GET /mission/drops?since=: the drops changed at or after since (at most
// missionMaxDrops, the newest prompts among them; the whole field without since) as OOB
// fragments, for the page's polling fallback (it asks mission/recent first, and fetches these
// only when something changed).
func (s *Server) missionDrops(c *fiber.Ctx) error {
	v := missionViewer(principalOf(c))
	var items []readmodel.MissionItem
	var err error
	if q := c.Query("since"); q != "" {
		since, perr := time.Parse(time.RFC3339Nano, q)
		if perr != nil {
			return fiber.NewError(fiber.StatusUnprocessableEntity, "since must be an RFC 3339 time")
		}
		items, err = s.deps.Reads.MissionChanged(c.UserContext(), v, since, nil, missionMaxDrops)
	} else {
		_, items, err = s.deps.Reads.MissionField(c.UserContext(), v, missionMaxDrops)
	}
	if err != nil {
		return err
	}
	r, err := s.missionRendered(c.UserContext(), items)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	return renderStreamed(c, views.MissionDrops(r.drops, csrfOf(c)))
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
	if at, msg := runAt(c.FormValue("run_at"), c.FormValue("run_at_offset")); msg != "" {
		fields["run_at"] = msg
	} else {
		req.ScheduledFor = at
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
	if msg, retry, limited := submitLimit(err); limited {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retry))
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
	d, err := s.deps.Reads.GetJob(c.UserContext(), v, out.JobID)
	if err != nil {
		return err
	}
	drop := views.MissionDrop{PromptID: out.PromptID.String(), Text: strings.TrimSpace(req.Prompt), CreatedAt: d.Job.CreatedAt,
		JobID: out.JobID.String(), State: string(jobs.StateQueued), Priority: d.Job.Priority, Attempt: 1,
		MaxAttempts: d.Job.MaxAttempts, UpdatedAt: d.Job.CreatedAt, Depth: -1}
	if req.ParentID != nil {
		drop.ParentID = req.ParentID.String()
	}
	est, ok, err := s.deps.Jobs.ETAs().Job(c.UserContext(), out.JobID)
	if err != nil {
		return err
	}
	if ok {
		withETA(&drop, est)
	}
	c.Set(fiber.HeaderCacheControl, "no-store")
	c.Status(fiber.StatusAccepted)
	return render(c, views.MissionSubmitted(drop, csrfOf(c)))
}

// runAt reads the compose bar's run-at time: a datetime-local value (the reader's wall clock,
// no zone) and the zone's offset at that date in minutes west of UTC, as JavaScript's
// getTimezoneOffset gives it (empty: the value is UTC). Empty means at once; a value that is
// not a time, or an offset that is no zone's, is a message for the field.
func runAt(value, offset string) (*time.Time, string) {
	value = strings.TrimSpace(value)
	if value == "" {
		return nil, ""
	}
	var local time.Time
	var err error
	for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02T15:04:05.999"} {
		if local, err = time.Parse(layout, value); err == nil {
			break
		}
	}
	if err != nil {
		return nil, "must be a date and time"
	}
	mins := 0
	if o := strings.TrimSpace(offset); o != "" {
		n, err := strconv.Atoi(o)
		if err != nil || n < -14*60 || n > 14*60 {
			return nil, "came with a time zone offset that is no time zone's"
		}
		mins = n
	}
	at := local.Add(time.Duration(mins) * time.Minute)
	return &at, ""
}

// withETA shows the estimate on a queued drop: when it is scheduled for, or when it should
// start.
func withETA(d *views.MissionDrop, est eta.ETA) {
	if d.State != string(jobs.StateQueued) || !est.Starts {
		return
	}
	if est.ScheduledFor != nil {
		at := *est.ScheduledFor
		d.ScheduledFor = &at
		return
	}
	secs := est.Seconds
	d.StartsIn = &secs
}

// composeMessage turns field errors into one sentence for the compose bar.
func composeMessage(fields map[string]string) string {
	names := map[string]string{"prompt": "The prompt", "priority": "The priority", "parent_id": "The drop to continue from",
		"max_attempts": "Max attempts", "run_at": "The run-at time", "scheduled_for": "The run-at time"}
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
	d, err := s.deps.Reads.GetJob(ctx, v, jobID)
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
	err = act(ctx, v, current.ID, actorOf(p))
	var verr *jobs.ValidationError
	refusal, refused := admit.AsRefusal(err)
	switch {
	case refused:
		// A retry is new work: admission's limits answer it as they answer the compose bar.
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(refusal.RetryAfter()))
		if !isHTMX(c) {
			return fiber.NewError(fiber.StatusTooManyRequests, "The retry was refused: "+refusal.Error()+".")
		}
		status = fiber.StatusTooManyRequests
	case errors.As(err, &verr):
		return fiber.NewError(fiber.StatusUnprocessableEntity, "This prompt can no longer be retried: "+verr.Error())
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

// missionDrop reads one drop of v that changed at or after since.
func (s *Server) missionDrop(ctx context.Context, v jobs.Viewer, promptID uuid.UUID, since time.Time) (views.MissionDrop, error) {
	r, err := s.missionDropsByID(ctx, v, map[uuid.UUID]bool{promptID: true}, since)
	if err != nil {
		return views.MissionDrop{}, err
	}
	if len(r.drops) == 0 {
		return views.MissionDrop{}, fmt.Errorf("prompt %s vanished from the mission field", promptID)
	}
	return r.drops[0], nil
}

// missionDropsByID reads the drops of the prompts in ids that changed at or after since, in
// prompt created_at order (a parent before its continuations), at most missionMaxDrops (the
// newest prompts among them: the field shows no older ones).
func (s *Server) missionDropsByID(ctx context.Context, v jobs.Viewer, ids map[uuid.UUID]bool, since time.Time) (missionRender, error) {
	list := make([]uuid.UUID, 0, len(ids))
	for id := range ids {
		list = append(list, id)
	}
	// A millisecond of slack: since is compared with the jobs' updated_at, inclusively.
	items, err := s.deps.Reads.MissionChanged(ctx, v, since.Add(-time.Millisecond), list, missionMaxDrops)
	if err != nil {
		return missionRender{}, err
	}
	return s.missionRendered(ctx, items)
}

func missionDropOf(it readmodel.MissionItem, out *db.OutputHead) views.MissionDrop {
	j := it.Job
	d := views.MissionDrop{PromptID: it.Prompt.ID.String(), Text: it.Prompt.Body, CreatedAt: it.Prompt.CreatedAt,
		JobID: j.ID.String(), State: j.State, Priority: j.Priority, Attempt: j.Attempt, MaxAttempts: j.MaxAttempts,
		ErrorKind: missionStr(j.ErrorKind), ErrorMessage: missionStr(j.ErrorMessage), UpdatedAt: j.UpdatedAt, Depth: -1}
	if it.TextCut {
		d.Text += missionCutMark
	}
	if it.Prompt.ParentID != nil {
		d.ParentID = it.Prompt.ParentID.String()
	}
	if readmodel.HasOutput(j.State) && (out != nil || j.State == string(jobs.StateRunning)) {
		d.HasOutput = true
		if out != nil {
			d.Output = out.Text
			if out.Cut {
				d.Output += missionCutMark
			}
		}
	}
	if it.Response != nil {
		d.Response = &views.MissionResponse{ID: it.Response.ID.String(), Text: it.Response.Body, CreatedAt: it.Response.CreatedAt}
		if it.ResponseCut {
			d.Response.Text += missionCutMark
		}
	}
	for _, h := range it.Superseded {
		d.Superseded = append(d.Superseded, views.MissionAttempt{JobID: h.ID.String(), Attempt: h.Attempt,
			ErrorKind: missionStr(h.ErrorKind), UpdatedAt: h.UpdatedAt})
	}
	return d
}

func missionStr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// submitLimit says, for the compose bar, which limit refused a submit and when to try again.
func submitLimit(err error) (msg string, retryAfter int, limited bool) {
	var (
		budget *admit.BudgetExhaustedError
		quota  *admit.QuotaExceededError
		rate   *admit.SubmitRateError
	)
	switch {
	case errors.As(err, &budget):
		return "Your org's token budget for this " + budget.Period +
			" is spent; it resets at " + budget.Resets.UTC().Format("2006-01-02 15:04") + " UTC.", budget.RetryAfter(), true
	case errors.As(err, &quota):
		return fmt.Sprintf("Your org already has %d prompts queued or running, its most; try again when some have finished.",
			quota.Active), quota.RetryAfter(), true
	case errors.As(err, &rate):
		return fmt.Sprintf("Too many prompts at once; try again in %d s.", rate.RetryAfter()), rate.RetryAfter(), true
	}
	if r, ok := admit.AsRefusal(err); ok {
		return r.Error(), r.RetryAfter(), true
	}
	return "", 0, false
}
