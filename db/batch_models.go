package db

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
	"github.com/uptrace/bun"
)

// File is one stored file of the OpenAI files API (sa_file).
type File struct {
	bun.BaseModel   `bun:"table:sa_file"`
	ID              string    `bun:"id,pk"`
	OrgID           int64     `bun:"org_id"`
	CreatedBy       int64     `bun:"created_by"`
	Purpose         string    `bun:"purpose"`
	Filename        string    `bun:"filename"`
	Bytes           int64     `bun:"bytes"`
	LineCount       int       `bun:"line_count"`
	EndsWithNewline bool      `bun:"ends_with_newline"`
	CreatedAt       time.Time `bun:"created_at,nullzero,default:now()"`
}

// FileLine is one line of a File, without its newline (sa_file_line).
type FileLine struct {
	bun.BaseModel `bun:"table:sa_file_line"`
	FileID        string `bun:"file_id,pk"`
	LineNo        int    `bun:"line_no,pk"`
	Body          []byte `bun:"body,type:bytea"`
}

// JobBatch is one batch of the OpenAI batch API (sa_batch): the jobs of its input file's lines.
type JobBatch struct {
	bun.BaseModel    `bun:"table:sa_batch"`
	ID               string            `bun:"id,pk"`
	OrgID            int64             `bun:"org_id"`
	CreatedBy        int64             `bun:"created_by"`
	OperationID      uuid.UUID         `bun:"operation_id,type:uuid"`
	Endpoint         string            `bun:"endpoint"`
	CompletionWindow string            `bun:"completion_window"`
	InputFileID      string            `bun:"input_file_id"`
	OutputFileID     *string           `bun:"output_file_id"`
	ErrorFileID      *string           `bun:"error_file_id"`
	Status           string            `bun:"status"`
	EndAs            *string           `bun:"end_as"`
	Metadata         map[string]string `bun:"metadata,type:jsonb"`
	Errors           json.RawMessage   `bun:"errors,type:jsonb,nullzero"`
	TotalLines       int               `bun:"total_lines"`
	ExpandedLines    int               `bun:"expanded_lines"`
	CompletedCount   int               `bun:"completed_count"`
	FailedCount      int               `bun:"failed_count"`
	CreatedAt        time.Time         `bun:"created_at,nullzero,default:now()"`
	ExpiresAt        time.Time         `bun:"expires_at"`
	InProgressAt     *time.Time        `bun:"in_progress_at"`
	FinalizingAt     *time.Time        `bun:"finalizing_at"`
	CompletedAt      *time.Time        `bun:"completed_at"`
	FailedAt         *time.Time        `bun:"failed_at"`
	ExpiredAt        *time.Time        `bun:"expired_at"`
	CancellingAt     *time.Time        `bun:"cancelling_at"`
	CancelledAt      *time.Time        `bun:"cancelled_at"`
}

// JobBatchRequest is one line of a JobBatch: the job it became, or why it did not
// (sa_batch_request).
type JobBatchRequest struct {
	bun.BaseModel `bun:"table:sa_batch_request"`
	BatchID       string     `bun:"batch_id,pk"`
	LineNo        int        `bun:"line_no,pk"`
	CustomID      *string    `bun:"custom_id"`
	JobID         *uuid.UUID `bun:"job_id,type:uuid"`
	ErrorCode     *string    `bun:"error_code"`
	ErrorMessage  *string    `bun:"error_message"`
}

// JobDoor records the door a job came through (sa_job_door).
type JobDoor struct {
	bun.BaseModel `bun:"table:sa_job_door"`
	JobID         uuid.UUID `bun:"job_id,pk,type:uuid"`
	Door          string    `bun:"door"`
}
