package handlers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"

	"asterion/handlers/openai"
	"asterion/jobs/batch"
)

// filesPath is the front door's file upload.
const filesPath = "/v1/files"

// uploadBodyLimit bounds the body of an upload: the largest file and room for the form around
// it.
const uploadBodyLimit = batch.MaxBytes + 1<<20

// uploadTime is how long an upload of the largest file may take, past the request deadline.
const uploadTime = 5 * time.Minute

// contentTime bounds the writing of one file's content.
const contentTime = 5 * time.Minute

// streamsItsBody reports whether c is a file upload, whose handler reads its body as it
// arrives, up to uploadBodyLimit, instead of the transport reading BodyLimit of it first.
func streamsItsBody(c *fiber.Ctx) bool {
	return c.Method() == fiber.MethodPost && c.Path() == filesPath
}

// openaiBatchError answers an error of package batch on the front door; any other goes to
// the error handler.
func openaiBatchError(c *fiber.Ctx, err error) error {
	var inv *batch.InvalidError
	switch {
	case errors.As(err, &inv):
		return writeOpenAIError(c, openai.InvalidRequest(inv.Message, inv.Param, inv.Code))
	case errors.Is(err, batch.ErrNotFound):
		return writeOpenAIError(c, openai.NotFound("No such object: '"+c.Params("id")+"'.", "id", ""))
	case errors.Is(err, batch.ErrConflict):
		return writeOpenAIError(c, openai.Status(fiber.StatusConflict, err.Error()))
	}
	return err
}

// countingReader counts what was read through it and stops past its limit with errTooLarge.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
}

var errUploadTooLarge = errors.New("the upload is larger than the largest file allows")

func (cr *countingReader) Read(p []byte) (int, error) {
	n, err := cr.r.Read(p)
	cr.n += int64(n)
	if cr.n > cr.limit {
		return n, errUploadTooLarge
	}
	return n, err
}

// uploadFile is POST /v1/files: a multipart form with the file and its purpose, read and
// stored as it arrives.
func (s *Server) uploadFile(c *fiber.Ctx) error {
	stretchDeadline(c, uploadTime)
	mt, params, err := mime.ParseMediaType(c.Get(fiber.HeaderContentType))
	if err != nil || mt != fiber.MIMEMultipartForm || params["boundary"] == "" {
		return writeOpenAIError(c, openai.InvalidRequest("The body must be a multipart/form-data form with 'file' and 'purpose'.",
			"file", "invalid_multipart"))
	}
	var body io.Reader = c.Context().RequestBodyStream()
	if body == nil || !c.Request().IsBodyStream() {
		body = bytesReader(c.Body())
	}
	cr := &countingReader{r: body, limit: uploadBodyLimit}
	f, err := s.deps.Batches.Upload(c.UserContext(), viewerOf(principalOf(c)), multipart.NewReader(cr, params["boundary"]))
	if cr.n > cr.limit {
		c.Context().SetConnectionClose()
		return writeOpenAIError(c, openai.InvalidRequest(fmt.Sprintf("The file is larger than %d bytes.", batch.MaxBytes),
			"file", "file_too_large"))
	}
	if err != nil {
		// What the form did not read yet is no request.
		c.Context().SetConnectionClose()
		return openaiBatchError(c, err)
	}
	return c.JSON(openai.NewFileObject(f))
}

// listFiles is GET /v1/files: the files the caller may see, as GET /v1/files/{id} finds them,
// newest first (oldest with order=asc), of the given purpose if one is named, after the file
// named by after, limit of them (OpenAI's default, every file up to 10,000).
func (s *Server) listFiles(c *fiber.Ctx) error {
	q := batch.FileQuery{Purpose: c.Query("purpose"), After: c.Query("after"), Order: c.Query("order"),
		Limit: batch.DefaultFileLimit}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return writeOpenAIError(c, openai.InvalidRequest(
				fmt.Sprintf("Invalid 'limit': must be an integer between 1 and %d.", batch.MaxFileLimit), "limit", "invalid_value"))
		}
		q.Limit = n
	}
	p, err := s.deps.Batches.ListFiles(c.UserContext(), viewerOf(principalOf(c)), q)
	if err != nil {
		return openaiBatchError(c, err)
	}
	return c.JSON(openai.NewFileList(p))
}

// getFile is GET /v1/files/{id}.
func (s *Server) getFile(c *fiber.Ctx) error {
	f, err := s.deps.Batches.File(c.UserContext(), viewerOf(principalOf(c)), c.Params("id"))
	if err != nil {
		return openaiBatchError(c, err)
	}
	return c.JSON(openai.NewFileObject(f))
}

// fileContent is GET /v1/files/{id}/content: the file as it was uploaded (or written), read
// from the database a chunk at a time as the client takes it.
func (s *Server) fileContent(c *fiber.Ctx) error {
	f, err := s.deps.Batches.File(c.UserContext(), viewerOf(principalOf(c)), c.Params("id"))
	if err != nil {
		return openaiBatchError(c, err)
	}
	c.Set(fiber.HeaderContentType, fiber.MIMEOctetStream)
	c.Set(fiber.HeaderContentDisposition, fmt.Sprintf("attachment; filename=%q", f.Filename))
	bs, log := s.deps.Batches, s.log
	c.Context().SetBodyStreamWriter(func(w *bufio.Writer) {
		// The writer runs after the handler returned: the request's context is over by then.
		ctx, cancel := context.WithTimeout(context.Background(), contentTime)
		defer cancel()
		if err := bs.WriteContent(ctx, f, w); err != nil {
			log.Warn("the content of a file was cut short", "file_id", f.ID, "err", err)
		}
	})
	return nil
}

// deleteFile is DELETE /v1/files/{id}.
func (s *Server) deleteFile(c *fiber.Ctx) error {
	id := c.Params("id")
	if err := s.deps.Batches.DeleteFile(c.UserContext(), viewerOf(principalOf(c)), id); err != nil {
		return openaiBatchError(c, err)
	}
	return c.JSON(openai.FileDeleted{ID: id, Object: "file", Deleted: true})
}
