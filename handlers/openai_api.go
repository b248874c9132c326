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
	"asterion/handlers/openai"
	"asterion/jobs"
	"asterion/jobs/admit"
)

// chatCompletionsPath is the front door's chat completions.
const chatCompletionsPath = "/v1/chat/completions"

// jobIDHeader names the Asterion job that answered a front-door call.
const jobIDHeader = "x-asterion-job-id"

// isOpenAIPath reports whether p is under the front door's /v1, which answers OpenAI's error
// object instead of a problem document.
func isOpenAIPath(p string) bool { return p == "/v1" || strings.HasPrefix(p, "/v1/") }

// writeOpenAIError answers e as OpenAI does: its status, its error object, and Retry-After for
// a refusal.
func writeOpenAIError(c *fiber.Ctx, e *openai.APIError) error {
	if e.RetryAfter > 0 {
		c.Set(fiber.HeaderRetryAfter, strconv.Itoa(e.RetryAfter))
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSONCharsetUTF8)
	return c.Status(e.Status).Send(e.Body())
}

// openaiJobsError answers an error of the jobs package on the front door; model is the model
// the request asked for. An error it does not know goes to the error handler (a 500 or 503 in
// OpenAI's shape, logged).
func openaiJobsError(c *fiber.Ctx, err error, model string) error {
	var verr *jobs.ValidationError
	if refusal, ok := admit.AsRefusal(err); ok {
		return writeOpenAIError(c, openai.RateLimited(refusal.Error(), errors.Is(err, admit.ErrBudgetExhausted), refusal.RetryAfter()))
	}
	switch {
	case errors.As(err, &verr):
		return writeOpenAIError(c, openai.FieldsError(verr.Fields, model))
	case errors.Is(err, jobs.ErrNotFound):
		return writeOpenAIError(c, openai.NotFound("No such object.", "", ""))
	}
	return err
}

// openaiModels is GET /v1/models: the models a caller may ask for, the default first.
func (s *Server) openaiModels(c *fiber.Ctx) error {
	return c.JSON(openai.NewModelList(s.deps.Jobs.Admission().Models(), modelsCreated))
}

// modelsCreated is the "created" time of every listed model: a deployment's models have no
// creation date of their own, and a fixed one keeps the list the same on every call.
var modelsCreated = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Unix()

// chatCompletions is POST /v1/chat/completions: the request becomes a job, admitted as every
// submit is; the caller waits while it runs, for its chat.completion or, with stream, its
// chunks as the model writes them.
func (s *Server) chatCompletions(c *fiber.Ctx) error {
	cr, aerr := openai.DecodeChat(c.Body())
	if aerr != nil {
		return writeOpenAIError(c, aerr)
	}
	p := principalOf(c)
	v := viewerOf(p)
	out, err := s.deps.Jobs.Submit(c.UserContext(), cr.Submit(v))
	if err != nil {
		return openaiJobsError(c, err, cr.Model)
	}
	c.Set(jobIDHeader, out.JobID.String())
	model := cr.Model
	if model == "" {
		model = s.deps.Jobs.Admission().DefaultModel()
	}
	call := frontDoorCall{s: s, v: v, actor: actorOf(p), jobID: out.JobID, req: cr, model: model,
		id: openai.CompletionID(out.JobID.String()), created: time.Now().Unix()}
	if cr.Stream {
		return s.streamChat(c, call)
	}
	job, over, err := s.awaitChat(c, call)
	if err != nil || !over {
		return err
	}
	if job.State != string(jobs.StateSucceeded) {
		return writeOpenAIError(c, failedCall(job))
	}
	resp, err := s.deps.Reads.Response(c.UserContext(), v, job)
	if err != nil {
		return err
	}
	u, answered, err := call.usage(c.UserContext())
	if err != nil {
		return err
	}
	return c.JSON(openai.NewCompletion(call.id, call.created, model, resp.Body,
		openai.FinishReason(answered, cr.MaxTokens), u))
}

// frontDoorCall is one chat completion being answered by its job.
type frontDoorCall struct {
	s       *Server
	v       jobs.Viewer
	actor   jobs.Actor
	jobID   uuid.UUID
	req     openai.ChatRequest
	model   string
	id      string
	created int64
}

// usage is the job's usage, the sum over its attempts (what the provider was paid for), and the
// output tokens of the attempt that answered: whether an answer reached its max_tokens is a fact
// of that answer alone, not of the attempts cut short before it.
func (f frontDoorCall) usage(ctx context.Context) (openai.Usage, int64, error) {
	attempts, total, err := f.s.deps.Reads.JobUsage(ctx, f.jobID)
	if err != nil {
		return openai.Usage{}, 0, err
	}
	return openai.NewUsage(total.InputTokens, total.OutputTokens), answeredOutput(attempts), nil
}

// answeredOutput is the output tokens of the last attempt of attempts that succeeded (zero if
// none did).
func answeredOutput(attempts []db.Attempt) int64 {
	for i := len(attempts) - 1; i >= 0; i-- {
		if attempts[i].ErrorKind == nil {
			return int64(attempts[i].OutputTokens)
		}
	}
	return 0
}

// abandon cancels the job of a caller that left: nobody will read its answer, and its provider
// call is stopped. A job already over stays as it is.
func (f frontDoorCall) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := f.s.deps.Jobs.Cancel(ctx, f.v, f.jobID, f.actor); err != nil && !errors.Is(err, jobs.ErrConflict) {
		f.s.log.Warn("the job of a front-door caller that left was not cancelled", "job_id", f.jobID, "err", err)
	}
}

// awaitChat waits until the call's job is over, holding no database connection meanwhile, and
// returns it (over). A caller that leaves cancels the job; a server shutting down answers 503
// itself (not over) and leaves the job to run (its id is in the answer's header).
func (s *Server) awaitChat(c *fiber.Ctx, call frontDoorCall) (job db.Job, over bool, err error) {
	ctx, cancel := context.WithCancel(c.UserContext())
	defer cancel()
	shutdown := c.Context().Done()
	go func() {
		select {
		case <-shutdown:
			cancel()
		case <-ctx.Done():
		}
	}()
	done, err := s.awaitTerminal(ctx, call.v.Scope(), aboutJob(call.jobID), jobWaitForever,
		func(ctx context.Context) (bool, error) {
			j, err := s.deps.Reads.FindJob(ctx, call.v, call.jobID)
			if err != nil {
				return false, err
			}
			job = j
			return jobs.State(j.State).Terminal(), nil
		})
	switch {
	case done:
		return job, true, nil
	case errors.Is(context.Cause(c.UserContext()), errClientGone):
		call.abandon()
		return db.Job{}, false, errClientGone
	case ctx.Err() != nil && c.UserContext().Err() == nil:
		return db.Job{}, false, writeOpenAIError(c, openai.Server(fiber.StatusServiceUnavailable,
			"The server is shutting down; the job goes on (see the x-asterion-job-id header).", ""))
	case err == nil:
		// awaitTerminal gives up only when its context ends; it ended without a reason above.
		err = ctx.Err()
	}
	return db.Job{}, false, err
}

// jobWaitForever bounds nothing: a front-door caller waits for as long as its job runs.
const jobWaitForever = time.Duration(1<<63 - 1)

// failedCall is the answer of a call whose job did not succeed, as OpenAI answers a call that
// failed: 503 for what may pass on a retry (the provider's limit, its 5xx, a timeout), 500
// otherwise, with the job's error kind as the code.
func failedCall(j db.Job) *openai.APIError {
	kind, msg := j.State, "The job answering this call ended "+j.State+"."
	if j.ErrorKind != nil && *j.ErrorKind != "" {
		kind = *j.ErrorKind
	}
	if j.ErrorMessage != nil && *j.ErrorMessage != "" {
		msg = *j.ErrorMessage
	}
	status := fiber.StatusInternalServerError
	switch kind {
	case "rate_limit", "provider_5xx", "timeout":
		status = fiber.StatusServiceUnavailable
	}
	return openai.Server(status, msg, kind)
}
