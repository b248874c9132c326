package handlers

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/feed"
	"asterion/jobs/output"
	"asterion/jobs/readmodel"
	"asterion/views"
)

// jobDetailOutputCap is how many characters of a job's output a detail page shows; the API
// has the rest.
const jobDetailOutputCap = 4 * readmodel.MissionOutputCap

// outputSoFar reads what job id's current attempt has written so far and its progress, as the
// job's page and its operation's page show them.
func (s *Server) outputSoFar(ctx context.Context, v jobs.Viewer, id uuid.UUID) (views.JobOutput, error) {
	page, err := s.deps.Reads.Output(ctx, v, id, 0, readmodel.MaxOutputChunks)
	if err != nil {
		return views.JobOutput{}, fmt.Errorf("read the output of job %s: %w", id, err)
	}
	var b strings.Builder
	for _, c := range page.Chunks {
		b.WriteString(c.Text)
		if b.Len() > jobDetailOutputCap*4 { // far past the cap in bytes: enough to cut from
			break
		}
	}
	o := views.JobOutput{JobID: id.String()}
	o.Text, o.Cut = db.CutRunes(b.String(), jobDetailOutputCap)
	if !page.Complete && len(page.Chunks) == readmodel.MaxOutputChunks {
		o.Cut = true
	}
	if o.Chunks, o.Tokens, err = s.deps.Reads.OutputProgress(ctx, page.Job); err != nil {
		return views.JobOutput{}, err
	}
	o.Shown = len(page.Chunks) > 0 || page.Job.State == string(jobs.StateRunning)
	return o, nil
}

// outputPageStreamer is the stream of a detail page that shows a job's output (the job's page,
// its operation's page): its changed events also come when the job writes output, coalesced
// like state changes, so that the panel (output so far and progress) is read again while the
// job runs.
type outputPageStreamer struct {
	snapshotStreamer
	changed *changedStreamer
	scope   output.Filter
}

// newOutputPageStreamer follows the events concerns picks and the output of scope's job.
func newOutputPageStreamer(concerns func(feed.Event) bool, scope output.Filter) outputPageStreamer {
	changed := &changedStreamer{concerns: concerns}
	return outputPageStreamer{snapshotStreamer: snapshotStreamer{changed}, changed: changed, scope: scope}
}

func (j outputPageStreamer) outputFilter() output.Filter { return j.scope }

func (j outputPageStreamer) chunk(context.Context, *bufio.Writer, db.OutputChunk) error {
	j.changed.dirty = true
	return nil
}

func (j outputPageStreamer) resyncOutput(context.Context, *bufio.Writer) error {
	j.changed.dirty = true
	return nil
}
