package batch

import (
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
)

// Endpoint is what a batch needs of the endpoint its lines name: how to read a line's body
// into a prompt, and how to write the body of the answer that endpoint would have given.
type Endpoint interface {
	// Decode reads a line's body. A body that breaks the endpoint's own rules is a
	// *LineError; the rules on messages, options, text and model are applied after, as for
	// every submit.
	Decode(body []byte) (Prompt, *LineError)
	// Answer is the body of the endpoint's answer to a request that succeeded.
	Answer(a Answered) ([]byte, error)
}

// Prompt is a line read by its endpoint.
type Prompt struct {
	Messages []jobs.Message
	Options  jobs.ExecutionOptions
	// Metadata are the request's own key-value pairs, given back in the answer where the
	// endpoint has them.
	Metadata map[string]string
}

// Answered is a line whose job succeeded.
type Answered struct {
	JobID      uuid.UUID
	Model      string
	Text       string
	FinishedAt time.Time
	// InputTokens and OutputTokens are the job's usage, the sum over its attempts.
	InputTokens, OutputTokens int64
	// AnsweredOutputTokens is the output of the attempt that answered: whether the answer
	// reached MaxTokens is that attempt's fact, not the sum's.
	AnsweredOutputTokens int64
	// MaxTokens is the output bound the request asked for (nil: none).
	MaxTokens *int
}
