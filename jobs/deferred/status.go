package deferred

import (
	"errors"
	"fmt"
)

// ErrUnknownStatus is returned by ParseStatus for a string that is not one of
// the eight statuses of the contract.
var ErrUnknownStatus = errors.New("deferred: unknown status")

// Status is the state of a deferred operation as written on the wire.
type Status string

// The statuses of the contract. StatusPending and StatusRunning are not
// terminal; every other status is terminal and never changes again.
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusTimedOut  Status = "timed-out"
	StatusCancelled Status = "cancelled"
	StatusExpired   Status = "expired"
	StatusUnknown   Status = "unknown"
)

// Statuses lists every status of the contract, non-terminal ones first.
func Statuses() []Status {
	return []Status{
		StatusPending, StatusRunning,
		StatusCompleted, StatusFailed, StatusTimedOut, StatusCancelled, StatusExpired, StatusUnknown,
	}
}

// Valid reports whether s is one of the statuses of the contract.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusRunning,
		StatusCompleted, StatusFailed, StatusTimedOut, StatusCancelled, StatusExpired, StatusUnknown:
		return true
	}
	return false
}

// Terminal reports whether s is a terminal status: completed, failed,
// timed-out, cancelled, expired or unknown. An invalid status is not terminal.
func (s Status) Terminal() bool {
	switch s {
	case StatusCompleted, StatusFailed, StatusTimedOut, StatusCancelled, StatusExpired, StatusUnknown:
		return true
	}
	return false
}

// CarriesError reports whether a status document with status s carries an
// error object: failed, timed-out, expired and unknown do, every other status
// does not.
func (s Status) CarriesError() bool {
	switch s {
	case StatusFailed, StatusTimedOut, StatusExpired, StatusUnknown:
		return true
	}
	return false
}

// String returns the wire spelling of s.
func (s Status) String() string { return string(s) }

// ParseStatus returns the Status spelled s exactly (case-sensitive), or an
// error wrapping ErrUnknownStatus.
func ParseStatus(s string) (Status, error) {
	st := Status(s)
	if !st.Valid() {
		return "", fmt.Errorf("%w: %q", ErrUnknownStatus, s)
	}
	return st, nil
}
