package readmodel

import (
	"asterion/jobs"
	"context"

	"github.com/google/uuid"

	"asterion/db"
)

// MissionOutputCap is how many characters of a job's live output the mission field carries,
// like MissionTextCap for prompts and responses: a field of many drops with long partial
// answers stays bounded. The whole output is in GET /jobs/{id}/output.
const MissionOutputCap = 4 * MissionTextCap

// HasOutput reports whether a job in state shows its own output on the mission field: a running
// job's text so far, and what a cancelled or failed attempt had written (a succeeded job shows
// its response instead).
func HasOutput(state string) bool {
	switch jobs.State(state) {
	case jobs.StateRunning, jobs.StateCancelled, jobs.StateFailed:
		return true
	}
	return false
}

// MissionOutput returns the output heads (MissionOutputCap characters) of the current attempts
// of items' jobs that show output (HasOutput), by job id, in one read whatever their number.
// items come from MissionField or MissionChanged, so they are the viewer's already.
func (s *Reads) MissionOutput(ctx context.Context, items []MissionItem) (map[uuid.UUID]db.OutputHead, error) {
	keys := make([]db.OutputKey, 0, len(items))
	for _, it := range items {
		if HasOutput(it.Job.State) {
			keys = append(keys, db.OutputKey{JobID: it.Job.ID, Attempt: it.Job.Attempt})
		}
	}
	heads, err := db.OutputHeads(ctx, s.db, keys, MissionOutputCap)
	if err != nil {
		return nil, err
	}
	out := make(map[uuid.UUID]db.OutputHead, len(heads))
	for k, h := range heads {
		out[k.JobID] = h
	}
	return out, nil
}
