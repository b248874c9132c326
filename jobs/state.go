package jobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/uptrace/bun"

	"asterion/jobs/registry"
)

// State is a job state (docs/architecture.md, "Job states").
type State string

// The six job states.
const (
	StateQueued     State = "queued"
	StateRunning    State = "running"
	StateSucceeded  State = "succeeded"
	StateFailed     State = "failed"
	StateCancelled  State = "cancelled"
	StateSuperseded State = "superseded"
)

// ErrIllegalTransition reports a state change the state machine does not allow.
var ErrIllegalTransition = errors.New("illegal job state transition")

// transitions is the one table of legal changes. A terminal state changes only into
// superseded.
var transitions = map[State][]State{
	StateQueued:    {StateRunning, StateCancelled},
	StateRunning:   {StateSucceeded, StateQueued, StateFailed, StateCancelled},
	StateSucceeded: {StateSuperseded},
	StateFailed:    {StateSuperseded},
	StateCancelled: {StateSuperseded},
}

// CanTransition reports whether from → to is legal.
func CanTransition(from, to State) bool {
	for _, t := range transitions[from] {
		if t == to {
			return true
		}
	}
	return false
}

// checkTransition returns ErrIllegalTransition unless every from → to is legal.
func checkTransition(to State, from ...State) error {
	for _, f := range from {
		if !CanTransition(f, to) {
			return fmt.Errorf("%w: %s → %s", ErrIllegalTransition, f, to)
		}
	}
	return nil
}

// ParseState validates a state name.
func ParseState(s string) (State, error) {
	switch st := State(s); st {
	case StateQueued, StateRunning, StateSucceeded, StateFailed, StateCancelled, StateSuperseded:
		return st, nil
	}
	return "", fmt.Errorf("unknown job state %q", s)
}

// Terminal reports whether s is final (only superseded may follow).
func (s State) Terminal() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCancelled || s == StateSuperseded
}

// Job error kinds beyond the provider's (provider.ErrorKind covers the rest).
const (
	KindWorkerCrash = "worker_crash"
	KindStuck       = "stuck"
	KindExpired     = registry.ErrorKindExpired
)

// recordErrorDetail keeps the full text of a job's latest failure for operators.
func recordErrorDetail(ctx context.Context, tx bun.Tx, jobID uuid.UUID, attempt int, detail string) error {
	_, err := tx.Tx.ExecContext(ctx, recordErrorDetailSQL, jobID.String(), attempt, detail)
	if err != nil {
		return fmt.Errorf("record error detail of job %s: %w", jobID, err)
	}
	return nil
}
