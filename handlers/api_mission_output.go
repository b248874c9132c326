package handlers

import (
	"bufio"
	"context"

	"asterion/db"
	"asterion/jobs/output"
)

// The API's mission stream also carries the live output of the caller's running jobs, as
// job.output events. They have no id: the output is not part of the change feed, so a
// reconnect replays state changes only, and a client reads what it missed of a running job's
// text from GET /jobs/{id}/output (a job.state_changed to running tells it to).

func (a *apiStreamer) outputFilter() output.Filter { return output.Filter{Scope: a.scope} }

// chunk writes one job.output event, encoded once for every stream that carries it.
func (a *apiStreamer) chunk(_ context.Context, w *bufio.Writer, c db.OutputChunk) error {
	frame, err := a.frames.frame(c)
	if err != nil {
		return err
	}
	_, err = w.Write(frame)
	return err
}

// resyncOutput says that some output was skipped; GET /jobs/{id}/output has all of it.
func (a *apiStreamer) resyncOutput(_ context.Context, w *bufio.Writer) error {
	_, err := w.WriteString(": output fell behind; read GET /sa-core/v1/jobs/{id}/output for what was skipped\n\n")
	return err
}
