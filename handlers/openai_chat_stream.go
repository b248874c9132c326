package handlers

import (
	"bufio"
	"context"
	"sync"

	"github.com/gofiber/fiber/v2"

	"asterion/db"
	"asterion/handlers/openai"
	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/jobs/output"
	"asterion/jobs/readmodel"
)

// streamChat answers a streamed chat completion: the job's live output as
// chat.completion.chunk events, following it as the stream of GET /jobs/{id}/output/events
// does (serveStream, the output hub, the table on a gap), then the finish chunk, the usage
// chunk when asked, and [DONE]. A client that leaves cancels the job.
func (s *Server) streamChat(c *fiber.Ctx, call frontDoorCall) error {
	st := &chatStreamer{call: call, reads: s.deps.Reads, chunks: openai.ChunkStream{ID: call.id, Created: call.created,
		Model: call.model, IncludeUsage: call.req.IncludeUsage}}
	st.jobCatchUp = jobCatchUp{jobID: call.jobID, catchUp: st.catchUp}
	if gc, ok := c.Context().Conn().(*guardedConn); ok {
		// A gone client is otherwise seen only when a write fails, which a job writing nothing
		// yet never makes.
		st.stopWatch = gc.watchPeer(st.leave)
	}
	scope := call.v.Scope()
	scope.Topics = []string{feed.TopicJob}
	if !s.serveStream(c, scope, st) {
		st.stopWatching()
		call.abandon()
		return writeOpenAIError(c, openai.RateLimited("Too many live streams are open for this user; close one and retry.", false, 10))
	}
	return nil
}

// chatStreamer follows one front-door job's output as chat.completion.chunk events.
type chatStreamer struct {
	call   frontDoorCall
	reads  *readmodel.Reads
	chunks openai.ChunkStream
	chunkCursor
	jobCatchUp
	// wrote is true once any content went out.
	wrote bool

	mu        sync.Mutex
	ended     bool // the stream said all it had to: the job is over
	left      bool // the client left first
	stopWatch func()
}

func (o *chatStreamer) outputFilter() output.Filter {
	return output.Filter{Scope: o.call.v.Scope(), JobID: o.call.jobID}
}

// open starts the assistant's message, then sends what the job already wrote.
func (o *chatStreamer) open(ctx context.Context, w *bufio.Writer) error {
	if err := openai.WriteEvent(w, o.chunks.First()); err != nil {
		return err
	}
	return o.catchUp(ctx, w)
}

// catchUp reads the table after the last chunk sent and ends the stream once the job is over
// and nothing is left. A retry that starts after content went out cannot be shown to the
// client (what it read cannot be taken back): the stream ends with an error, the job goes on.
func (o *chatStreamer) catchUp(ctx context.Context, w *bufio.Writer) error {
	for {
		page, err := o.reads.Output(ctx, o.call.v, o.call.jobID, o.seq, 0)
		if err != nil {
			return err
		}
		if o.attempt == 0 {
			o.attempt = page.Job.Attempt
		}
		if page.Job.Attempt != o.attempt {
			if o.wrote {
				return o.fail(w, openai.Server(fiber.StatusServiceUnavailable,
					"The answer's attempt failed after it began streaming; the job is being retried (see x-asterion-job-id).",
					"retried"))
			}
			o.attempt, o.seq = page.Job.Attempt, 0
			continue
		}
		if more, err := writePage(ctx, w, page, o.send, o.end); err != nil || !more {
			return err
		}
	}
}

// chunk sends a live chunk in order: one already sent is skipped, one after a gap first reads
// what is missing.
func (o *chatStreamer) chunk(ctx context.Context, w *bufio.Writer, c db.OutputChunk) error {
	switch o.place(c) {
	case chunkSent:
		return nil
	case chunkAfterGap:
		return o.catchUp(ctx, w)
	}
	return o.send(w, c)
}

func (o *chatStreamer) send(w *bufio.Writer, c db.OutputChunk) error {
	if c.Text != "" {
		if err := openai.WriteEvent(w, o.chunks.Content(c.Text)); err != nil {
			return err
		}
		o.wrote = true
	}
	o.seq = c.Seq
	return nil
}

// end finishes the stream of a job that is over: its finish and usage chunks and [DONE], or
// the error object of a job that did not succeed.
func (o *chatStreamer) end(ctx context.Context, w *bufio.Writer, j db.Job) error {
	if j.State != string(jobs.StateSucceeded) {
		return o.fail(w, failedCall(j))
	}
	u, answered, err := o.call.usage(ctx)
	if err != nil {
		return err
	}
	if err := openai.WriteEvent(w, o.chunks.Finish(openai.FinishReason(answered, o.call.req.MaxTokens))); err != nil {
		return err
	}
	if o.call.req.IncludeUsage {
		if err := openai.WriteEvent(w, o.chunks.Usage(u)); err != nil {
			return err
		}
	}
	if err := openai.WriteDone(w); err != nil {
		return err
	}
	o.markEnded()
	return errStreamEnd
}

// fail ends the stream with an error object, as OpenAI ends a stream whose call failed.
func (o *chatStreamer) fail(w *bufio.Writer, e *openai.APIError) error {
	if err := openai.WriteError(w, e); err != nil {
		return err
	}
	o.markEnded()
	return errStreamEnd
}

func (o *chatStreamer) markEnded() {
	o.mu.Lock()
	o.ended = true
	o.mu.Unlock()
}

// leave is called once the client is seen to have closed its connection: the job is
// cancelled at once, before a write could notice.
func (o *chatStreamer) leave() {
	o.mu.Lock()
	abandon := !o.ended && !o.left
	o.left = true
	o.mu.Unlock()
	if abandon {
		o.call.abandon()
	}
}

func (o *chatStreamer) stopWatching() {
	if o.stopWatch != nil {
		o.stopWatch()
	}
}

// closed runs when the stream ends however it ends: a stream that did not say all it had to
// lost its client (or the server is shutting down), and its job is cancelled.
func (o *chatStreamer) closed() {
	o.stopWatching()
	o.leave()
}
