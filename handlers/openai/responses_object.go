package openai

import (
	"encoding/hex"
	"encoding/json"
	"strings"

	"github.com/google/uuid"

	"asterion/jobs"
)

// The statuses of a response.
const (
	StatusQueued     = "queued"
	StatusInProgress = "in_progress"
	StatusCompleted  = "completed"
	StatusFailed     = "failed"
	StatusCancelled  = "cancelled"
	StatusIncomplete = "incomplete"
)

// responseIDPrefix starts every response id; the rest is the job's id in 32 hex digits, so
// that any process reads the job back from the id alone.
const responseIDPrefix = "resp_"

// ResponseID is the id of the response answered by job jobID.
func ResponseID(jobID uuid.UUID) string { return responseIDPrefix + hex.EncodeToString(jobID[:]) }

// ParseResponseID is the job of a response id; ok is false for a string that is not one.
func ParseResponseID(id string) (uuid.UUID, bool) {
	h, found := strings.CutPrefix(id, responseIDPrefix)
	if !found || len(h) != 32 || strings.ToLower(h) != h {
		return uuid.Nil, false
	}
	b, err := hex.DecodeString(h)
	if err != nil {
		return uuid.Nil, false
	}
	return uuid.UUID(b), true
}

// messageID is the id of a response's one output message.
func messageID(responseID string) string {
	return "msg_" + strings.TrimPrefix(responseID, responseIDPrefix)
}

// ResponseStatus is the status of a response whose job is in state, with the error kind the
// job recorded (nil: none) and whether it wrote a response. A job that succeeded with
// outputTokens reaching maxTokens is incomplete: the provider does not report why it stopped,
// and an answer that used up its bound is taken to have been cut by it. A superseded job (one
// retried since) answers as it had ended.
func ResponseStatus(state string, errorKind *string, hasResponse bool, outputTokens int64, maxTokens *int) string {
	switch jobs.State(state) {
	case jobs.StateQueued:
		return StatusQueued
	case jobs.StateRunning:
		return StatusInProgress
	case jobs.StateFailed:
		return StatusFailed
	case jobs.StateCancelled:
		return StatusCancelled
	case jobs.StateSuperseded:
		switch {
		case hasResponse:
		case errorKind != nil:
			return StatusFailed
		default:
			return StatusCancelled
		}
	}
	if maxTokens != nil && outputTokens >= int64(*maxTokens) {
		return StatusIncomplete
	}
	return StatusCompleted
}

// ResponseError is a failed response's error.
type ResponseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// IncompleteDetails says why a response is incomplete.
type IncompleteDetails struct {
	Reason string `json:"reason"`
}

// OutputText is an output_text content part.
type OutputText struct {
	Type        string     `json:"type"`
	Text        string     `json:"text"`
	Annotations []struct{} `json:"annotations"`
}

// OutputItem is a response's one output message.
type OutputItem struct {
	ID      string       `json:"id"`
	Type    string       `json:"type"`
	Status  string       `json:"status"`
	Role    string       `json:"role"`
	Content []OutputText `json:"content"`
}

// ResponseUsage is a response's token counts.
type ResponseUsage struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

// TextConfig is a response's text settings: its format.
type TextConfig struct {
	Format json.RawMessage `json:"format"`
}

// Response is OpenAI's response object, with every field the SDKs read.
type Response struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	CompletedAt        *int64             `json:"completed_at"`
	Error              *ResponseError     `json:"error"`
	IncompleteDetails  *IncompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int               `json:"max_output_tokens"`
	Metadata           map[string]string  `json:"metadata"`
	Model              string             `json:"model"`
	Output             []OutputItem       `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	ServiceTier        string             `json:"service_tier"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               TextConfig         `json:"text"`
	ToolChoice         string             `json:"tool_choice"`
	Tools              []struct{}         `json:"tools"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *ResponseUsage     `json:"usage"`
	User               *string            `json:"user"`
}

// ResponseFacts is what a response object is made of, read from its job.
type ResponseFacts struct {
	ID        string
	CreatedAt int64
	// FinishedAt is when the job ended (nil: it has not).
	FinishedAt *int64
	Status     string
	Model      string
	Echo       ResponseEcho
	// Instructions are the request's instructions (nil: none).
	Instructions    *string
	MaxOutputTokens *int
	Temperature     *float64
	// Text is the answer, for a completed or incomplete response.
	Text string
	// Usage is the job's usage, once it is over (nil before).
	Usage *Usage
	// ErrorCode and ErrorMessage are a failed job's.
	ErrorCode, ErrorMessage string
}

// NewResponse is the response object of f.
func NewResponse(f ResponseFacts) Response {
	r := Response{ID: f.ID, Object: "response", CreatedAt: f.CreatedAt, Status: f.Status, Background: f.Echo.Background,
		Instructions: f.Instructions, MaxOutputTokens: f.MaxOutputTokens, Metadata: f.Echo.Metadata, Model: f.Model,
		Output: []OutputItem{}, ServiceTier: "default", Store: true, Temperature: 1, Text: TextConfig{Format: f.Echo.Format},
		ToolChoice: "auto", Tools: []struct{}{}, TopP: 1, Truncation: "disabled"}
	if r.Metadata == nil {
		r.Metadata = map[string]string{}
	}
	if len(r.Text.Format) == 0 {
		r.Text.Format = json.RawMessage(`{"type":"text"}`)
	}
	if f.Temperature != nil {
		r.Temperature = *f.Temperature
	}
	switch f.Status {
	case StatusCompleted, StatusIncomplete:
		r.Output = []OutputItem{outputMessage(f.ID, f.Status, f.Text)}
		if f.Status == StatusCompleted {
			r.CompletedAt = f.FinishedAt
		} else {
			r.IncompleteDetails = &IncompleteDetails{Reason: "max_output_tokens"}
		}
	case StatusFailed:
		code, msg := f.ErrorCode, f.ErrorMessage
		if code == "" {
			code = "server_error"
		}
		if msg == "" {
			msg = "The job answering this response failed."
		}
		r.Error = &ResponseError{Code: code, Message: msg}
	}
	if f.Usage != nil {
		r.Usage = &ResponseUsage{InputTokens: f.Usage.PromptTokens, OutputTokens: f.Usage.CompletionTokens,
			TotalTokens: f.Usage.TotalTokens}
	}
	return r
}

// outputMessage is the assistant's message of a response: one output_text part.
func outputMessage(responseID, status, text string) OutputItem {
	itemStatus := StatusCompleted
	if status != StatusCompleted {
		itemStatus = status
	}
	return OutputItem{ID: messageID(responseID), Type: "message", Status: itemStatus, Role: "assistant",
		Content: []OutputText{{Type: "output_text", Text: text, Annotations: []struct{}{}}}}
}
