package registry

import (
	"errors"
	"fmt"
)

// Sentinel errors callers branch on.
var (
	// ErrNotFound means no such object in the caller's view (another org's id included).
	ErrNotFound = errors.New("not found")
	// ErrConflict means the object's state does not allow the action (cancel a terminal
	// operation, retry a running job).
	ErrConflict = errors.New("conflict with the job's state")
	// ErrInvalid wraps a ValidationError.
	ErrInvalid = errors.New("invalid request")
)

// ValidationError names each field that broke a rule.
type ValidationError struct{ Fields map[string]string }

func (e *ValidationError) Error() string { return fmt.Sprintf("invalid request: %v", e.Fields) }

// Unwrap lets errors.Is(err, ErrInvalid) match.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// ErrNotCancelable means the operation's owner cannot cancel it now; Reason says why.
type ErrNotCancelable struct {
	Reason string
	// Busy marks a refusal that clears by itself moments later: the work is locked by its
	// own settlement or heartbeat right now. CancelOperation retries such refusals briefly
	// before passing them on, so a caller sees one only when the work stays busy.
	Busy bool
}

func (e *ErrNotCancelable) Error() string { return "not cancelable: " + e.Reason }
