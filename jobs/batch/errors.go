package batch

import (
	"errors"
	"fmt"
)

// ErrNotFound is a file or a batch that does not exist or is not the caller's org's.
var ErrNotFound = errors.New("batch: no such object")

// ErrConflict is an action the object's state forbids (cancelling an ended batch).
var ErrConflict = errors.New("batch: conflict with the object's state")

// InvalidError is a request that breaks a rule: Param names the field, Code says which rule.
type InvalidError struct {
	Param   string
	Code    string
	Message string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.Param, e.Message)
}

func invalid(param, code, format string, args ...any) *InvalidError {
	return &InvalidError{Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

// LineError is why one line of a batch did not become a job; it goes to the error file.
type LineError struct {
	Code    string
	Message string
}

func (e *LineError) Error() string { return e.Code + ": " + e.Message }
