package handlers

import (
	"bufio"
	"context"
	"fmt"
	"strings"

	"asterion/db"
	"asterion/jobs"
	"asterion/jobs/output"
	"asterion/views"
)

// jobDetailOutputCap is how many characters of a job's output its detail page shows; the API
// has the rest.
const jobDetailOutputCap = 4 * jobs.MissionOutputCap

// jobDetailOutput adds to d what the job's current attempt has written and its progress.
func (s *Server) jobDetailOutput(ctx context.Context, v jobs.Viewer, j db.Job, d *views.JobDetail) error {
	page, err := s.deps.Jobs.Output(ctx, v, j.ID, 0, jobs.MaxOutputChunks)
	if err != nil {
		return fmt.Errorf("read the output of job %s: %w", j.ID, err)
	}
	var b strings.Builder
	for _, c := range page.Chunks {
		b.WriteString(c.Text)
		if b.Len() > jobDetailOutputCap*4 { // far past the cap in bytes: enough to cut from
			break
		}
	}
	d.Output, d.OutputCut = db.CutRunes(b.String(), jobDetailOutputCap)
	if !page.Complete && len(page.Chunks) == jobs.MaxOutputChunks {
		d.OutputCut = true
	}
	if d.OutputChunks, d.OutputTokens, err = s.deps.Jobs.OutputProgress(ctx, page.Job); err != nil {
		return err
	}
	d.HasOutput = len(page.Chunks) > 0 || page.Job.State == string(jobs.StateRunning)
	return nil
}

// jobPageStreamer is the job page's stream: its changed events also come when the job writes
// output, coalesced like state changes, so that the panel (output so far and progress) is read
// again while the job runs.
type jobPageStreamer struct {
	snapshotStreamer
	changed *changedStreamer
	scope   output.Filter
}

func (j jobPageStreamer) outputFilter() output.Filter { return j.scope }

func (j jobPageStreamer) chunk(context.Context, *bufio.Writer, db.OutputChunk) error {
	j.changed.dirty = true
	return nil
}

func (j jobPageStreamer) resyncOutput(context.Context, *bufio.Writer) error {
	j.changed.dirty = true
	return nil
}
