package handlers

import (
	"bufio"
	"context"
	"encoding/json"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/jobs/output"
)

// The API's mission stream also carries the live output of the caller's running jobs, as
// job.output events. They have no id: the output is not part of the change feed, so a
// reconnect replays state changes only, and a client reads what it missed of a running job's
// text from GET /jobs/{id}/output (a job.state_changed to running tells it to).

func (a *apiStreamer) outputFilter() output.Filter { return output.Filter{Scope: a.scope} }

// chunk writes one job.output event.
func (a *apiStreamer) chunk(_ context.Context, w *bufio.Writer, c db.OutputChunk) error {
	data, err := json.Marshal(struct {
		PromptID uuid.UUID `json:"prompt_id"`
		JobID    uuid.UUID `json:"job_id"`
		Seq      int       `json:"seq"`
		Text     string    `json:"text"`
		// At is when the chunk was stored, so a client can tell how long it took to arrive.
		At time.Time `json:"at"`
	}{c.PromptID, c.JobID, c.Seq, c.Text, c.At})
	if err != nil {
		return err
	}
	return writeSSEData(w, "job.output", data)
}

// resyncOutput says that some output was skipped; GET /jobs/{id}/output has all of it.
func (a *apiStreamer) resyncOutput(_ context.Context, w *bufio.Writer) error {
	_, err := w.WriteString(": output fell behind; read GET /sa-core/v1/jobs/{id}/output for what was skipped\n\n")
	return err
}
