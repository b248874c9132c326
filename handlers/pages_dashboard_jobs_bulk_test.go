package handlers

import (
	"slices"
	"testing"

	"asterion/jobs"
)

// TestBulkStates: a bulk action touches exactly the jobs the state machine lets it move.
func TestBulkStates(t *testing.T) {
	t.Parallel()
	for action, want := range map[string][]jobs.State{
		"cancel": {jobs.StateQueued, jobs.StateRunning},
		"retry":  {jobs.StateSucceeded, jobs.StateFailed, jobs.StateCancelled},
	} {
		got, ok := bulkStates(action)
		if !ok || !slices.Equal(got, want) {
			t.Errorf("bulkStates(%q) = %v, %v; want %v", action, got, ok, want)
		}
	}
	if got, ok := bulkStates("explode"); ok || got != nil {
		t.Errorf("bulkStates(explode) = %v, %v; want nothing", got, ok)
	}
}
