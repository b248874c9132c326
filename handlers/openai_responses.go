package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/handlers/openai"
	"asterion/jobs"
)

// responsesPath is the front door's responses.
const responsesPath = "/v1/responses"

// responseCall is one response being answered by its job. owns is true for the caller of a
// POST that did not ask for background work: that caller leaving cancels the job, as a chat
// completion's does.
type responseCall struct {
	v     jobs.Viewer
	actor jobs.Actor
	jobID uuid.UUID
	owns  bool
}

// abandon cancels the call's job (its caller left, or its stream could not start).
func (s *Server) abandonResponse(call responseCall) {
	frontDoorCall{s: s, v: call.v, actor: call.actor, jobID: call.jobID}.abandon()
}

// createResponse is POST /v1/responses: the request becomes a job, admitted as every submit
// is. The caller waits while it runs for its response object, or gets it at once (background),
// or follows it as response events (stream).
func (s *Server) createResponse(c *fiber.Ctx) error {
	rr, aerr := openai.DecodeResponses(c.Body())
	if aerr != nil {
		return writeOpenAIError(c, aerr)
	}
	p := principalOf(c)
	v := viewerOf(p)
	out, err := s.deps.Jobs.Submit(c.UserContext(), rr.Submit(v))
	if err != nil {
		var verr *jobs.ValidationError
		if errors.As(err, &verr) {
			return writeOpenAIError(c, openai.ResponsesFieldsError(verr.Fields, rr))
		}
		return openaiJobsError(c, err, rr.Model)
	}
	c.Set(jobIDHeader, out.JobID.String())
	call := responseCall{v: v, actor: actorOf(p), jobID: out.JobID, owns: !rr.Background}
	if rr.Stream {
		return s.streamResponse(c, call, -1, true)
	}
	if !rr.Background {
		_, over, err := s.awaitChat(c, frontDoorCall{s: s, v: v, actor: call.actor, jobID: out.JobID})
		if err != nil || !over {
			return err
		}
	}
	job, err := s.deps.Reads.FindJob(c.UserContext(), v, out.JobID)
	if err != nil {
		return err
	}
	return s.answerResponse(c, v, job)
}

// getResponse is GET /v1/responses/{id}: the response as its job stands, or with stream=true
// its events from after starting_after.
func (s *Server) getResponse(c *fiber.Ctx) error {
	v := viewerOf(principalOf(c))
	job, aerr, err := s.findResponse(c, v)
	if aerr != nil || err != nil {
		return orOpenAIError(c, aerr, err)
	}
	c.Set(jobIDHeader, job.ID.String())
	stream, after, aerr := streamQuery(c)
	if aerr != nil {
		return writeOpenAIError(c, aerr)
	}
	if stream {
		return s.streamResponse(c, responseCall{v: v, actor: actorOf(principalOf(c)), jobID: job.ID}, after, false)
	}
	return s.answerResponse(c, v, job)
}

// cancelResponse is POST /v1/responses/{id}/cancel. As OpenAI, only a background response can
// be cancelled (a caller waiting for its answer cancels by leaving), and cancelling one that
// is over answers it as it is.
func (s *Server) cancelResponse(c *fiber.Ctx) error {
	p := principalOf(c)
	v := viewerOf(p)
	job, aerr, err := s.findResponse(c, v)
	if aerr != nil || err != nil {
		return orOpenAIError(c, aerr, err)
	}
	c.Set(jobIDHeader, job.ID.String())
	if echo, _ := openai.ReadResponseEcho(job.ExecutionOptions); !echo.Background {
		return writeOpenAIError(c, openai.InvalidRequest("Only responses created with background=true can be cancelled.", "", ""))
	}
	if !jobs.State(job.State).Terminal() {
		if _, err := s.deps.Jobs.Cancel(c.UserContext(), v, job.ID, actorOf(p)); err != nil && !errors.Is(err, jobs.ErrConflict) {
			return openaiJobsError(c, err, "")
		}
		if job, err = s.deps.Reads.FindJob(c.UserContext(), v, job.ID); err != nil {
			return openaiJobsError(c, err, "")
		}
	}
	return s.answerResponse(c, v, job)
}

func orOpenAIError(c *fiber.Ctx, aerr *openai.APIError, err error) error {
	if aerr != nil {
		return writeOpenAIError(c, aerr)
	}
	return err
}

// findResponse is the job of the response named by the path's id. An id that is not a
// response's, or a response of another org, is the same 404.
func (s *Server) findResponse(c *fiber.Ctx, v jobs.Viewer) (db.Job, *openai.APIError, error) {
	id := c.Params("id")
	notFound := openai.NotFound(fmt.Sprintf("No response found with id '%s'.", id), "", "")
	jobID, ok := openai.ParseResponseID(id)
	if !ok {
		return db.Job{}, notFound, nil
	}
	job, err := s.deps.Reads.FindJob(c.UserContext(), v, jobID)
	switch {
	case errors.Is(err, jobs.ErrNotFound):
		return db.Job{}, notFound, nil
	case err != nil:
		return db.Job{}, nil, err
	}
	if _, isResponse := openai.ReadResponseEcho(job.ExecutionOptions); !isResponse || job.ID != jobID {
		return db.Job{}, notFound, nil
	}
	return job, nil, nil
}

// streamQuery reads whether a GET asks for the stream (stream=true in the query, or in a JSON
// body as the SDKs send it) and after which event (-1: from the start).
func streamQuery(c *fiber.Ctx) (stream bool, after int, aerr *openai.APIError) {
	after = -1
	stream = c.Query("stream") == "true"
	if body := bytes.TrimSpace(c.Body()); !stream && len(body) > 0 && body[0] == '{' {
		var b struct {
			Stream bool `json:"stream"`
		}
		stream = json.Unmarshal(body, &b) == nil && b.Stream
	}
	if q := c.Query("starting_after"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 0 {
			return false, 0, openai.InvalidRequest("Invalid 'starting_after': expected a non-negative integer.", "starting_after",
				"invalid_value")
		}
		after = n
	}
	return stream, after, nil
}

// answerResponse answers the response object of job.
func (s *Server) answerResponse(c *fiber.Ctx, v jobs.Viewer, job db.Job) error {
	r, err := s.responseObject(c.UserContext(), v, job)
	if err != nil {
		return err
	}
	return c.JSON(r)
}

// responseObject is the response object of a response's job as it stands.
func (s *Server) responseObject(ctx context.Context, v jobs.Viewer, job db.Job) (openai.Response, error) {
	echo, _ := openai.ReadResponseEcho(job.ExecutionOptions)
	var o jobs.ExecutionOptions
	_ = json.Unmarshal(job.ExecutionOptions, &o)
	f := openai.ResponseFacts{ID: openai.ResponseID(job.ID), CreatedAt: job.CreatedAt.Unix(), Model: o.Model, Echo: echo,
		MaxOutputTokens: o.MaxTokens, Temperature: o.Temperature}
	if f.Model == "" {
		f.Model = s.deps.Jobs.Admission().DefaultModel()
	}
	if echo.Instructions {
		msgs, err := s.deps.Reads.PromptMessages(ctx, job.PromptID)
		if err != nil {
			return openai.Response{}, err
		}
		if len(msgs) > 0 {
			f.Instructions = &msgs[0].Content
		}
	}
	var u openai.Usage
	var answered int64
	if jobs.State(job.State).Terminal() {
		var err error
		if u, answered, err = (frontDoorCall{s: s, jobID: job.ID}).usage(ctx); err != nil {
			return openai.Response{}, err
		}
		f.Usage = &u
		if job.FinishedAt != nil {
			at := job.FinishedAt.Unix()
			f.FinishedAt = &at
		}
	}
	f.Status = openai.ResponseStatus(job.State, job.ErrorKind, job.ResponseID != nil, answered, o.MaxTokens)
	switch f.Status {
	case openai.StatusCompleted, openai.StatusIncomplete:
		e, err := s.deps.Reads.Response(ctx, v, job)
		if err != nil {
			return openai.Response{}, err
		}
		f.Text = e.Body
	case openai.StatusFailed:
		if job.ErrorKind != nil {
			f.ErrorCode = *job.ErrorKind
		}
		if job.ErrorMessage != nil {
			f.ErrorMessage = *job.ErrorMessage
		}
	}
	return openai.NewResponse(f), nil
}
