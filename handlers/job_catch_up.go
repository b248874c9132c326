package handlers

import (
	"bufio"
	"context"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs/feed"
	"asterion/jobs/readmodel"
)

// jobCatchUp gives a stream that follows one job's output the streamer methods that all come
// down to reading the table again: a resync of either subscription and a change-feed event of
// the job. The front door's chat and response streams embed it; what differs between them is
// only how catchUp writes what it read.
type jobCatchUp struct {
	jobID   uuid.UUID
	catchUp func(ctx context.Context, w *bufio.Writer) error
}

func (j jobCatchUp) resync(ctx context.Context, w *bufio.Writer) error { return j.catchUp(ctx, w) }

func (j jobCatchUp) resyncOutput(ctx context.Context, w *bufio.Writer) error {
	return j.catchUp(ctx, w)
}

func (j jobCatchUp) event(ctx context.Context, w *bufio.Writer, e feed.Event) error {
	if e.JobID == nil || *e.JobID != j.jobID {
		return nil
	}
	return j.catchUp(ctx, w)
}

func (jobCatchUp) drained(context.Context, *bufio.Writer) error { return nil }
func (jobCatchUp) tick(context.Context, *bufio.Writer) error    { return nil }
func (jobCatchUp) tickEvery() time.Duration                     { return 0 }

// writePage sends the chunks of one page of a job's output read after the stream's place and,
// when the page ends the output, the stream's end. more says whether the page was full, so
// that the caller reads the next one.
func writePage(ctx context.Context, w *bufio.Writer, page readmodel.JobOutput,
	send func(*bufio.Writer, db.OutputChunk) error, end func(context.Context, *bufio.Writer, db.Job) error) (more bool, err error) {
	for _, c := range page.Chunks {
		if err := send(w, c); err != nil {
			return false, err
		}
	}
	if page.Complete {
		return false, end(ctx, w, page.Job)
	}
	return len(page.Chunks) >= readmodel.MaxOutputChunks, nil
}
