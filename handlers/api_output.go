package handlers

import (
	"strconv"

	"github.com/gofiber/fiber/v2"

	"asterion/db"
)

// outputChunkJSON is one chunk of a job's output on the wire.
type outputChunkJSON struct {
	Seq  int    `json:"seq"`
	Text string `json:"text"`
	At   string `json:"at"`
}

func toOutputChunks(cs []db.OutputChunk) []outputChunkJSON {
	out := make([]outputChunkJSON, len(cs))
	for i, c := range cs {
		out[i] = outputChunkJSON{Seq: c.Seq, Text: c.Text, At: ts(c.At)}
	}
	return out
}

// parseAfter reads an "after" sequence number: absent is 0, anything but a whole number of
// at least 0 is a field error.
func parseAfter(raw string) (int, bool) {
	if raw == "" {
		return 0, true
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// jobOutput is GET /sa-core/v1/jobs/{id}/output?after=<seq>: the chunks of the job's output
// after that seq, at most 1,000, and whether the output is complete.
func (s *Server) jobOutput(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return problem(c, fiber.StatusNotFound, "no such job")
	}
	after, ok := parseAfter(c.Query("after"))
	if !ok {
		return validationProblem(c, map[string]string{"after": "must be a whole number of at least 0"})
	}
	out, err := s.deps.Reads.Output(c.UserContext(), viewerOf(principalOf(c)), id, after, 0)
	if err != nil {
		return s.jobsError(c, err)
	}
	return c.JSON(fiber.Map{"job_id": out.Job.ID, "state": out.Job.State, "chunks": toOutputChunks(out.Chunks),
		"complete": out.Complete})
}
