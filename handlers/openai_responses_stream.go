package handlers

import (
	"bufio"
	"context"
	"strings"
	"sync"

	"github.com/gofiber/fiber/v2"

	"asterion/db"
	"asterion/handlers/openai"
	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/jobs/output"
)

// streamResponse answers a response as its events, following the job's live output as a
// chat completion's stream does (serveStream, the output hub, the table on a gap). Each event
// carries the number the output gives it (see openai.SeqDelta): the events up to after were
// read before and are not sent again, which is how a reader resumes on any process. created
// says the stream answers the POST that made the job: if it cannot start, the job is
// cancelled; a caller that owns the job cancels it by leaving.
func (s *Server) streamResponse(c *fiber.Ctx, call responseCall, after int, created bool) error {
	st := &responseStreamer{s: s, call: call, after: after,
		events: openai.ResponseEvents{ResponseID: openai.ResponseID(call.jobID)}}
	st.jobCatchUp = jobCatchUp{jobID: call.jobID, catchUp: st.catchUp}
	if gc, ok := c.Context().Conn().(*guardedConn); ok && call.owns {
		// A gone client is otherwise seen only when a write fails, which a job writing nothing
		// yet never makes.
		st.stopWatch = gc.watchPeer(st.leave)
	}
	scope := call.v.Scope()
	scope.Topics = []string{feed.TopicJob}
	if !s.serveStream(c, scope, st) {
		st.stopWatching()
		if created {
			s.abandonResponse(call)
		}
		return writeOpenAIError(c, openai.RateLimited("Too many live streams are open for this user; close one and retry.", false, 10))
	}
	return nil
}

// responseStreamer follows one response's job as response events.
type responseStreamer struct {
	s      *Server
	call   responseCall
	events openai.ResponseEvents
	// after is the number of the last event the reader has; only later ones are written.
	after int
	chunkCursor
	jobCatchUp
	// text is the attempt's output so far, sent or not, for the events that end the stream.
	text strings.Builder
	// opened is true once the events that open the message were reached; wrote once a delta
	// of the current attempt went out on this stream.
	opened, wrote bool

	mu        sync.Mutex
	ended     bool
	left      bool
	stopWatch func()
}

func (o *responseStreamer) outputFilter() output.Filter {
	return output.Filter{Scope: o.call.v.Scope(), JobID: o.call.jobID}
}

// emit writes ev unless the reader has it already.
func (o *responseStreamer) emit(w *bufio.Writer, ev openai.ResponseEvent) error {
	if ev.SequenceNumber <= o.after {
		return nil
	}
	return openai.WriteResponseEvent(w, ev)
}

// open sends response.created, then what the job already did.
func (o *responseStreamer) open(ctx context.Context, w *bufio.Writer) error {
	job, err := o.s.deps.Reads.FindJob(ctx, o.call.v, o.call.jobID)
	if err != nil {
		return err
	}
	r, err := o.s.responseObject(ctx, o.call.v, job)
	if err != nil {
		return err
	}
	status := openai.StatusQueued
	if job.State != string(jobs.StateQueued) {
		status = openai.StatusInProgress
	}
	if err := o.emit(w, o.events.Created(pending(r, status))); err != nil {
		return err
	}
	return o.catchUp(ctx, w)
}

// pending is r as it stood before its job ended: status, and nothing of its outcome.
func pending(r openai.Response, status string) openai.Response {
	r.Status, r.Output, r.Usage, r.Error, r.CompletedAt, r.IncompleteDetails = status, []openai.OutputItem{}, nil, nil, nil, nil
	return r
}

// catchUp reads the table after the last chunk placed and ends the stream once the job is
// over and nothing is left. A retry restarts the numbering with the new attempt's output: if
// this stream already sent a delta of the earlier attempt, it cannot take it back, and ends
// with an error event instead (the job goes on; its response can be read once it is over).
func (o *responseStreamer) catchUp(ctx context.Context, w *bufio.Writer) error {
	for {
		page, err := o.s.deps.Reads.Output(ctx, o.call.v, o.call.jobID, o.seq, 0)
		if err != nil {
			return err
		}
		if o.attempt == 0 {
			o.attempt = page.Job.Attempt
		}
		if page.Job.Attempt != o.attempt {
			if o.wrote {
				return o.fail(w, "retried", "The response's attempt failed after it began streaming; the job is being retried.")
			}
			o.attempt, o.seq = page.Job.Attempt, 0
			o.text.Reset()
			continue
		}
		if !o.opened && page.Job.State != string(jobs.StateQueued) {
			if err := o.openMessage(ctx, w, page.Job); err != nil {
				return err
			}
		}
		if more, err := writePage(ctx, w, page, o.send, o.end); err != nil || !more {
			return err
		}
	}
}

// openMessage sends response.in_progress and the events that open the assistant's message.
func (o *responseStreamer) openMessage(ctx context.Context, w *bufio.Writer, job db.Job) error {
	o.opened = true
	if o.after >= openai.SeqPartAdded {
		return nil
	}
	r, err := o.s.responseObject(ctx, o.call.v, job)
	if err != nil {
		return err
	}
	for _, ev := range []openai.ResponseEvent{o.events.InProgress(pending(r, openai.StatusInProgress)), o.events.ItemAdded(),
		o.events.PartAdded()} {
		if err := o.emit(w, ev); err != nil {
			return err
		}
	}
	return nil
}

// chunk places a live chunk: one already placed is skipped, one after a gap first reads what
// is missing.
func (o *responseStreamer) chunk(ctx context.Context, w *bufio.Writer, c db.OutputChunk) error {
	switch o.place(c) {
	case chunkSent:
		return nil
	case chunkAfterGap:
		return o.catchUp(ctx, w)
	}
	if !o.opened {
		return o.catchUp(ctx, w)
	}
	return o.send(w, c)
}

func (o *responseStreamer) send(w *bufio.Writer, c db.OutputChunk) error {
	o.text.WriteString(c.Text)
	ev := o.events.Delta(c.Seq, c.Text)
	if err := o.emit(w, ev); err != nil {
		return err
	}
	o.wrote = o.wrote || ev.SequenceNumber > o.after
	o.seq = c.Seq
	return nil
}

// end sends the events that close the message and the response's final event.
func (o *responseStreamer) end(ctx context.Context, w *bufio.Writer, job db.Job) error {
	if !o.opened {
		if err := o.openMessage(ctx, w, job); err != nil {
			return err
		}
	}
	r, err := o.s.responseObject(ctx, o.call.v, job)
	if err != nil {
		return err
	}
	for _, ev := range o.events.Done(o.seq, o.text.String(), r) {
		if err := o.emit(w, ev); err != nil {
			return err
		}
	}
	o.markEnded()
	return errStreamEnd
}

// fail ends the stream with an error event numbered after the last event sent.
func (o *responseStreamer) fail(w *bufio.Writer, code, message string) error {
	if err := openai.WriteStreamError(w, openai.StreamError{Code: code, Message: message,
		SequenceNumber: openai.SeqDelta(o.seq) + 1}); err != nil {
		return err
	}
	o.markEnded()
	return errStreamEnd
}

func (o *responseStreamer) markEnded() {
	o.mu.Lock()
	o.ended = true
	o.mu.Unlock()
}

// leave is called once the client is seen to have gone: the job of a caller that owns it is
// cancelled at once; a background response's work goes on.
func (o *responseStreamer) leave() {
	o.mu.Lock()
	abandon := o.call.owns && !o.ended && !o.left
	o.left = true
	o.mu.Unlock()
	if abandon {
		o.s.abandonResponse(o.call)
	}
}

func (o *responseStreamer) stopWatching() {
	if o.stopWatch != nil {
		o.stopWatch()
	}
}

// closed runs when the stream ends however it ends.
func (o *responseStreamer) closed() {
	o.stopWatching()
	o.leave()
}
