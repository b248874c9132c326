package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/jobs/output"
	"asterion/jobs/readmodel"
)

// outputIDSpan separates the event ids of a job's attempts on its output stream: the id of
// chunk seq of attempt a is (a-1) × outputIDSpan + seq, so the first attempt's ids are its seqs
// (as GET /jobs/{id}/output numbers them) and a retry's chunks still come after, never repeating an id. An
// attempt writes far fewer chunks than that (one per 250 ms at most).
const outputIDSpan = 1_000_000

// outputEventID is the SSE id of chunk seq of attempt.
func outputEventID(attempt, seq int) int64 { return int64(attempt-1)*outputIDSpan + int64(seq) }

// splitOutputEventID reads an id back into its attempt and seq.
func splitOutputEventID(id int64) (attempt, seq int) {
	return int(id/outputIDSpan) + 1, int(id % outputIDSpan)
}

// jobOutputEvents is GET /sa-core/v1/jobs/{id}/output/events: the job's output as SSE, each
// chunk `event: output`, then `event: end` once the job is terminal and every chunk was sent,
// and the stream closes. Last-Event-ID (or ?after=) resumes after that chunk.
func (s *Server) jobOutputEvents(c *fiber.Ctx) error {
	id, ok := pathUUID(c, "id")
	if !ok {
		return problem(c, fiber.StatusNotFound, "no such job")
	}
	v := viewerOf(principalOf(c))
	last := parseLastEventID(c.Get("Last-Event-ID"))
	if last == 0 && c.Query("after") != "" {
		after, ok := parseAfter(c.Query("after"))
		if !ok {
			return validationProblem(c, map[string]string{"after": "must be a whole number of at least 0"})
		}
		last = int64(after)
	}
	// Scoped like the job: another org's job is 404 before any stream starts.
	first, err := s.deps.Reads.Output(c.UserContext(), v, id, 0, 1)
	if err != nil {
		return s.jobsError(c, err)
	}
	attempt, seq := splitOutputEventID(last)
	if last == 0 {
		attempt, seq = first.Job.Attempt, 0
	}
	scope := v.Scope()
	scope.Topics = []string{feed.TopicJob}
	s.serveStream(c, scope, &outputStreamer{reads: s.deps.Reads, v: v, jobID: id, chunkCursor: chunkCursor{attempt: attempt, seq: seq}})
	return nil
}

// outputStreamer follows one job's output: chunks as they are stored, and the job's state
// changes for its end.
type outputStreamer struct {
	reads *readmodel.Reads
	v     jobs.Viewer
	jobID uuid.UUID
	chunkCursor
}

func (o *outputStreamer) outputFilter() output.Filter {
	return output.Filter{Scope: o.v.Scope(), JobID: o.jobID}
}

// open sends what was stored after the resume point, and the end when the job is over.
func (o *outputStreamer) open(ctx context.Context, w *bufio.Writer) error { return o.catchUp(ctx, w) }

func (o *outputStreamer) resync(ctx context.Context, w *bufio.Writer) error { return o.catchUp(ctx, w) }

func (o *outputStreamer) resyncOutput(ctx context.Context, w *bufio.Writer) error {
	return o.catchUp(ctx, w)
}

// catchUp reads the table after the last chunk sent (of the job's current attempt) and sends
// the end once the job is terminal and nothing is left.
func (o *outputStreamer) catchUp(ctx context.Context, w *bufio.Writer) error {
	for {
		page, err := o.reads.Output(ctx, o.v, o.jobID, o.seq, 0)
		if err != nil {
			return err
		}
		if page.Job.Attempt != o.attempt {
			// A new attempt started a new output: follow it from its beginning.
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
func (o *outputStreamer) chunk(ctx context.Context, w *bufio.Writer, c db.OutputChunk) error {
	switch o.place(c) {
	case chunkSent:
		return nil
	case chunkAfterGap:
		return o.catchUp(ctx, w)
	}
	return o.send(w, c)
}

func (o *outputStreamer) send(w *bufio.Writer, c db.OutputChunk) error {
	data, err := json.Marshal(struct {
		Seq  int    `json:"seq"`
		Text string `json:"text"`
	}{c.Seq, c.Text})
	if err != nil {
		return err
	}
	w.WriteString("id: ")
	w.WriteString(strconv.FormatInt(outputEventID(c.Attempt, c.Seq), 10))
	w.WriteByte('\n')
	if err := writeSSEData(w, "output", data); err != nil {
		return err
	}
	o.seq = c.Seq
	return nil
}

// end sends the end event with the job's state, response and usage, and ends the stream.
func (o *outputStreamer) end(ctx context.Context, w *bufio.Writer, j db.Job) error {
	_, total, err := o.reads.JobUsage(ctx, j.ID)
	if err != nil {
		return err
	}
	data, err := json.Marshal(struct {
		State      string     `json:"state"`
		ResponseID *uuid.UUID `json:"response_id"`
		Usage      any        `json:"usage"`
	}{j.State, j.ResponseID, total})
	if err != nil {
		return err
	}
	if err := writeSSEData(w, "end", data); err != nil {
		return err
	}
	return errStreamEnd
}

// event looks again at the job when its state changed: a retry starts a new output, and a
// terminal job ends the stream once every chunk was sent.
func (o *outputStreamer) event(ctx context.Context, w *bufio.Writer, e feed.Event) error {
	if e.JobID == nil || *e.JobID != o.jobID {
		return nil
	}
	return o.catchUp(ctx, w)
}

func (o *outputStreamer) drained(context.Context, *bufio.Writer) error { return nil }
func (o *outputStreamer) tick(context.Context, *bufio.Writer) error    { return nil }
func (o *outputStreamer) tickEvery() time.Duration                     { return 0 }
