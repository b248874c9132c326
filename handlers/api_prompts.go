package handlers

import (
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/admit"
	"asterion/jobs/readmodel"
)

// viewerOf maps the principal onto what the jobs package needs to scope reads.
func viewerOf(p identity.Principal) jobs.Viewer {
	return jobs.Viewer{OrgID: p.OrgID, UserID: p.UserID, OrgWide: p.SeesOrg(), AllOrgs: p.SeesAllOrgs()}
}

func actorOf(p identity.Principal) jobs.Actor {
	id := p.UserID
	return jobs.Actor{UserID: &id, Name: "user:" + p.UserName}
}

// submitPrompt is POST /sa-core/v1/prompt.
func (s *Server) submitPrompt(c *fiber.Ctx) error {
	if ct := strings.ToLower(c.Get(fiber.HeaderContentType)); !strings.HasPrefix(ct, fiber.MIMEApplicationJSON) {
		return problem(c, fiber.StatusUnsupportedMediaType, "the body must be application/json")
	}
	req, derr := decodeSubmit(c.Body())
	if derr != nil {
		if derr.status == fiber.StatusUnprocessableEntity {
			return validationProblem(c, derr.fields)
		}
		return problem(c, derr.status, derr.detail)
	}
	req.Viewer = viewerOf(principalOf(c))
	req.IdempotencyKey = c.Get("Idempotency-Key")
	if _, present := c.GetReqHeaders()["Idempotency-Key"]; present && req.IdempotencyKey == "" {
		return validationProblem(c, map[string]string{"Idempotency-Key": "must be 1..255 visible ASCII characters"})
	}
	out, err := s.deps.Jobs.Submit(c.UserContext(), req)
	if err != nil {
		return s.jobsError(c, err)
	}
	h := out.Operation
	c.Set(fiber.HeaderLocation, h.StatusHref)
	body := fiber.Map{"prompt_id": out.PromptID, "job_id": out.JobID, "state": out.State, "operation": h}
	// The estimate made as the job was accepted, unless the answer waits: the job has moved on.
	eta := out.ETA
	if wait, release := s.preferredWait(c); wait > 0 {
		defer release()
		eta = nil
		// Prefer: wait holds the answer until the job ends, if it does in time: 200 with the
		// answer; otherwise the usual 202.
		job, done, err := s.awaitJob(c.UserContext(), req.Viewer, out.JobID, wait)
		if err != nil {
			return err
		}
		if done {
			extra, err := s.waitedResult(c, req.Viewer, job)
			if err != nil {
				return err
			}
			for k, v := range extra {
				body[k] = v
			}
			body["state"] = job.State
			c.Set("Preference-Applied", "wait="+strconv.Itoa(wait))
			return c.Status(fiber.StatusOK).JSON(body)
		}
	}
	op, retry, err := s.acceptedHandle(c.UserContext(), h, eta)
	if err != nil {
		return err
	}
	body["operation"] = op
	c.Set(fiber.HeaderRetryAfter, strconv.Itoa(retry))
	return c.Status(fiber.StatusAccepted).JSON(body)
}

// jobsError maps the jobs package's sentinel errors onto the contract's status codes.
func (s *Server) jobsError(c *fiber.Ctx, err error) error {
	var verr *jobs.ValidationError
	if refusal, ok := admit.AsRefusal(err); ok {
		// Every limit of the one admission answers alike, by whichever door it was reached.
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(refusal.RetryAfter()))
		return typedProblem(c, fiber.StatusTooManyRequests, refusal.Kind(), refusal.Error())
	}
	switch {
	case errors.As(err, &verr):
		return validationProblem(c, verr.Fields)
	case errors.Is(err, jobs.ErrNotFound):
		return problem(c, fiber.StatusNotFound, "no such job")
	case errors.Is(err, jobs.ErrConflict):
		return problem(c, fiber.StatusConflict, conflictDetail(err))
	case errors.Is(err, jobs.ErrIdempotencyConflict):
		return problem(c, fiber.StatusConflict, "this Idempotency-Key was already used with a different request body")
	case errors.Is(err, readmodel.ErrBadCursor):
		return validationProblem(c, map[string]string{"cursor": "is not a cursor this server gave out"})
	}
	return err
}

// conflictDetail keeps the state part of a conflict message ("it is succeeded").
func conflictDetail(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "it is "); i >= 0 {
		return "the job " + strings.TrimSuffix(msg[i+3:], ": "+jobs.ErrConflict.Error())
	}
	return "the job's state does not allow this"
}

// missionRecent is GET /sa-core/v1/mission/recent?since=&limit=.
func (s *Server) missionRecent(c *fiber.Ctx) error {
	fields := map[string]string{}
	var since *time.Time
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			fields["since"] = "must be an RFC 3339 time"
		} else {
			since = &t
		}
	}
	limit, ok := queryInt(c, "limit", 100, 1, 500)
	if !ok {
		fields["limit"] = "must be an integer between 1 and 500"
	}
	if len(fields) > 0 {
		return validationProblem(c, fields)
	}
	asOf, items, err := s.deps.Reads.MissionRecent(c.UserContext(), viewerOf(principalOf(c)), since, limit)
	if err != nil {
		return err
	}
	out := make([]missionItemJSON, len(items))
	for i, it := range items {
		out[i] = toMissionItem(it)
	}
	return c.JSON(fiber.Map{"as_of": ts(asOf), "items": out})
}

// queryInt reads an optional bounded integer query parameter.
func queryInt(c *fiber.Ctx, name string, def, lo, hi int) (int, bool) {
	v := c.Query(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return def, false
	}
	return n, true
}

// pathUUID reads a UUID path parameter; a malformed one answers like a missing object.
func pathUUID(c *fiber.Ctx, name string) (uuid.UUID, bool) {
	id, err := uuid.Parse(c.Params(name))
	return id, err == nil
}
