package handlers

import (
	"bufio"
	"context"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/jobs/feed"
	"asterion/jobs/output"
)

// changedStreamer keeps a detail page live: "changed" on connect and, coalesced, whenever an
// event concerns the page's object.
type changedStreamer struct {
	concerns func(e feed.Event) bool
	dirty    bool
}

func (d *changedStreamer) tickEvery() time.Duration { return 150 * time.Millisecond }

func (d *changedStreamer) snapshot(_ context.Context, w *bufio.Writer) error {
	d.dirty = false
	return writeSSEData(w, "changed", []byte("snapshot"))
}

func (d *changedStreamer) event(_ context.Context, _ *bufio.Writer, e feed.Event) error {
	if d.concerns(e) {
		d.dirty = true
	}
	return nil
}

func (d *changedStreamer) tick(_ context.Context, w *bufio.Writer) error {
	if !d.dirty {
		return nil
	}
	d.dirty = false
	return writeSSEData(w, "changed", []byte("changed"))
}

// operationEvents is GET /admin/deferred-operations/:id/events.
func (s *Server) operationEvents(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "operation")
	}
	v := viewerOf(principalOf(c))
	d, err := s.deps.Reads.GetOperation(c.UserContext(), v, id)
	if err != nil {
		return s.dashError(c, err, "operation")
	}
	var prompts []uuid.UUID
	for _, j := range d.Jobs {
		prompts = append(prompts, j.PromptID)
	}
	scope := v.Scope()
	scope.Topics = []string{feed.TopicJob, feed.TopicOperation}
	concerns := func(e feed.Event) bool {
		if e.OperationID != nil && *e.OperationID == id {
			return true
		}
		for _, p := range prompts {
			if e.PromptID != nil && *e.PromptID == p {
				return true
			}
		}
		return false
	}
	// The page of a prompt operation shows its job's output: follow that too.
	if own, ok := d.OwnJob(); ok {
		s.serveStream(c, scope, newOutputPageStreamer(concerns, output.Filter{Scope: v.Scope(), JobID: own.ID}))
		return nil
	}
	s.pageStream(c, scope, &changedStreamer{concerns: concerns})
	return nil
}

// jobEvents is GET /admin/jobs/:id/events.
func (s *Server) jobEvents(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return s.notFoundPage(c, "job")
	}
	v := viewerOf(principalOf(c))
	d, err := s.deps.Reads.GetJob(c.UserContext(), v, id)
	if err != nil {
		return s.dashError(c, err, "job")
	}
	prompt := d.Job.PromptID
	scope := v.Scope()
	scope.Topics = []string{feed.TopicJob}
	s.serveStream(c, scope, newOutputPageStreamer(func(e feed.Event) bool {
		return (e.JobID != nil && *e.JobID == id) || (e.PromptID != nil && *e.PromptID == prompt)
	}, output.Filter{Scope: v.Scope(), JobID: id}))
	return nil
}
