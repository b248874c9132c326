package handlers

import (
	"bytes"
	"io"
	"strconv"

	"github.com/gofiber/fiber/v2"

	"asterion/handlers/openai"
	"asterion/jobs/batch"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// createBatch is POST /v1/batches: a batch over an uploaded file, run in the background.
func (s *Server) createBatch(c *fiber.Ctx) error {
	req, aerr := openai.DecodeBatchCreate(c.Body())
	if aerr != nil {
		return writeOpenAIError(c, aerr)
	}
	b, err := s.deps.Batches.Create(c.UserContext(), batch.CreateRequest{Viewer: viewerOf(principalOf(c)),
		InputFileID: req.InputFileID, Endpoint: req.Endpoint, CompletionWindow: req.CompletionWindow, Metadata: req.Metadata})
	if err != nil {
		return openaiBatchError(c, err)
	}
	return c.JSON(openai.NewBatchObject(b))
}

// getBatch is GET /v1/batches/{id}.
func (s *Server) getBatch(c *fiber.Ctx) error {
	b, err := s.deps.Batches.Batch(c.UserContext(), viewerOf(principalOf(c)), c.Params("id"))
	if err != nil {
		return openaiBatchError(c, err)
	}
	return c.JSON(openai.NewBatchObject(b))
}

// listBatches is GET /v1/batches: the org's batches, newest first, after the batch named by
// after, limit of them (default 20).
func (s *Server) listBatches(c *fiber.Ctx) error {
	limit := 20
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > batch.MaxPage {
			return writeOpenAIError(c, openai.InvalidRequest("Invalid 'limit': must be an integer between 1 and 100.", "limit",
				"invalid_value"))
		}
		limit = n
	}
	p, err := s.deps.Batches.List(c.UserContext(), viewerOf(principalOf(c)), c.Query("after"), limit)
	if err != nil {
		return openaiBatchError(c, err)
	}
	return c.JSON(openai.NewBatchList(p))
}

// cancelBatch is POST /v1/batches/{id}/cancel: the batch becomes cancelling, and cancelled
// once its unfinished jobs are.
func (s *Server) cancelBatch(c *fiber.Ctx) error {
	p := principalOf(c)
	b, err := s.deps.Batches.CancelBatch(c.UserContext(), viewerOf(p), c.Params("id"), actorOf(p))
	if err != nil {
		return openaiBatchError(c, err)
	}
	return c.JSON(openai.NewBatchObject(b))
}
