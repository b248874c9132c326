package openai

import (
	"encoding/json"
	"time"

	"asterion/jobs/batch"
)

// FileObject is OpenAI's file object.
type FileObject struct {
	ID            string  `json:"id"`
	Object        string  `json:"object"`
	Bytes         int64   `json:"bytes"`
	CreatedAt     int64   `json:"created_at"`
	ExpiresAt     *int64  `json:"expires_at"`
	Filename      string  `json:"filename"`
	Purpose       string  `json:"purpose"`
	Status        string  `json:"status"`
	StatusDetails *string `json:"status_details"`
}

// NewFileObject is the file object of f.
func NewFileObject(f batch.File) FileObject {
	return FileObject{ID: f.ID, Object: "file", Bytes: f.Bytes, CreatedAt: f.CreatedAt.Unix(), Filename: f.Filename,
		Purpose: f.Purpose, Status: "processed"}
}

// FileDeleted is the answer to a file's deletion.
type FileDeleted struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Deleted bool   `json:"deleted"`
}

// RequestCounts are a batch's requests by how they stand.
type RequestCounts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// BatchErrors are the problems of a batch whose file was unusable.
type BatchErrors struct {
	Object string          `json:"object"`
	Data   []batch.Problem `json:"data"`
}

// BatchObject is OpenAI's batch object.
type BatchObject struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Errors           *BatchErrors      `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        *int64            `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    RequestCounts     `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
}

func unixp(t *time.Time) *int64 {
	if t == nil {
		return nil
	}
	u := t.Unix()
	return &u
}

// NewBatchObject is the batch object of b.
func NewBatchObject(b batch.Batch) BatchObject {
	o := BatchObject{ID: b.ID, Object: "batch", Endpoint: b.Endpoint, InputFileID: b.InputFileID,
		CompletionWindow: b.CompletionWindow, Status: b.Status, OutputFileID: b.OutputFileID, ErrorFileID: b.ErrorFileID,
		CreatedAt: b.CreatedAt.Unix(), InProgressAt: unixp(b.InProgressAt), ExpiresAt: unixp(&b.ExpiresAt),
		FinalizingAt: unixp(b.FinalizingAt), CompletedAt: unixp(b.CompletedAt), FailedAt: unixp(b.FailedAt),
		ExpiredAt: unixp(b.ExpiredAt), CancellingAt: unixp(b.CancellingAt), CancelledAt: unixp(b.CancelledAt),
		RequestCounts: RequestCounts{Total: b.TotalLines, Completed: b.CompletedCount, Failed: b.FailedCount},
		Metadata:      b.Metadata}
	if len(b.Errors) > 0 {
		var data []batch.Problem
		if json.Unmarshal(b.Errors, &data) == nil {
			o.Errors = &BatchErrors{Object: "list", Data: data}
		}
	}
	return o
}

// NewBatchList is the list object of page p.
func NewBatchList(p batch.Page) List[BatchObject] {
	return newList(p.Batches, p.HasMore, NewBatchObject, func(b batch.Batch) string { return b.ID })
}

// BatchCreate is what a batch's creation reads.
type BatchCreate struct {
	InputFileID      string
	Endpoint         string
	CompletionWindow string
	Metadata         map[string]string
}

// DecodeBatchCreate reads the body of POST /v1/batches.
func DecodeBatchCreate(body []byte) (BatchCreate, *APIError) {
	var r BatchCreate
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil || top == nil {
		return r, InvalidRequest("We could not parse the JSON body of your request. The body must be one JSON object.", "", "")
	}
	for _, f := range []struct {
		name string
		dst  *string
	}{{"input_file_id", &r.InputFileID}, {"endpoint", &r.Endpoint}, {"completion_window", &r.CompletionWindow}} {
		name, dst := f.name, f.dst
		raw, ok := present(top, name)
		if !ok {
			return r, InvalidRequest("Missing required parameter: '"+name+"'.", name, "missing_required_parameter")
		}
		if json.Unmarshal(raw, dst) != nil {
			return r, typeError(name, "a string")
		}
	}
	if raw, ok := present(top, "metadata"); ok && json.Unmarshal(raw, &r.Metadata) != nil {
		return r, typeError("metadata", "an object of strings")
	}
	return r, nil
}
