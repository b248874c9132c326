package batch

import "asterion/db"

// The statuses of a batch, as OpenAI names them.
const (
	StatusValidating = "validating"
	StatusInProgress = "in_progress"
	StatusFinalizing = "finalizing"
	StatusCompleted  = "completed"
	StatusFailed     = "failed"
	StatusExpired    = "expired"
	StatusCancelling = "cancelling"
	StatusCancelled  = "cancelled"
)

// terminal reports whether a batch of status s has ended.
func terminal(s string) bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusExpired || s == StatusCancelled
}

// File is one stored file, Batch one batch: the bun models of their tables live in db with
// the others.
type (
	File  = db.File
	Batch = db.JobBatch

	fileLine = db.FileLine
	request  = db.JobBatchRequest
	jobDoor  = db.JobDoor
)

// Problem is a reason the batch's file itself was unusable (Batch.Errors holds a list of
// them).
type Problem struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Line    *int   `json:"line,omitempty"`
}
