package provider

import (
	"context"
	"encoding/json"
	"time"
)

// Options carries the per-prompt provider options of the API
// (the "options" object of POST /sa-core/v1/prompt). Each provider uses
// what it understands and ignores the rest.
type Options struct {
	// Model overrides the provider's configured model when not empty.
	Model string
	// PreferProvider names the provider the prompt would like; routing is
	// the caller's business, a provider ignores it.
	PreferProvider string
	// RouterModel names a routing model; a provider ignores it.
	RouterModel string
	// Depth is an opaque depth hint passed through from the prompt.
	Depth int
	// MaxTokens, when positive, bounds the answer's output tokens.
	MaxTokens int
	// Temperature, when set, is the sampling temperature.
	Temperature *float64
	// ResponseFormat, when set, is the response_format object of OpenAI's chat completions,
	// passed on unchanged.
	ResponseFormat json.RawMessage
}

// Message is one message of a prompt given as a conversation.
type Message struct {
	Role    string
	Content string
}

// Request is one attempt at answering one prompt.
type Request struct {
	// PromptID is the prompt being answered.
	PromptID string
	// JobID is the job running this attempt.
	JobID string
	// Attempt is the 1-based attempt number of the job.
	Attempt int
	// Text is the prompt text, sent to the provider unchanged. For a prompt given as a
	// conversation it is the last user message.
	Text string
	// Messages, when set, is the prompt as a conversation (its last user message is Text); a
	// provider that takes conversations sends them instead of Text.
	Messages []Message
	// Options are the prompt's provider options.
	Options Options
	// Output, when set, receives the answer's text in pieces as the provider produces it,
	// in order, from the goroutine that called Complete; the pieces of a successful answer
	// concatenate to its Text exactly. It must not block for long: the provider's stream
	// waits for it.
	Output func(piece string)
}

// emit passes piece to r.Output when there is one.
func (r Request) emit(piece string) {
	if r.Output != nil && piece != "" {
		r.Output(piece)
	}
}

// Response is a provider's successful answer.
type Response struct {
	// Text is the answer.
	Text string
	// RequestID is the provider's request or response id, "" if none.
	RequestID string
	// Provider is the Name of the provider that answered.
	Provider string
	// Model is the model that answered, as the provider reports it.
	Model string
	// PromptTokens is the provider's count of input tokens.
	PromptTokens int
	// CompletionTokens is the provider's count of output tokens.
	CompletionTokens int
	// Limits are the provider's rate-limit figures sent with the answer, if any.
	Limits Limits
}

// Limits are the rate-limit figures a provider reports with an answer or a failure, as
// OpenAI's x-ratelimit-* headers carry them. A figure is meaningful only when its Has flag
// is set.
type Limits struct {
	// LimitRequests and LimitTokens are the account's limits per window.
	LimitRequests, LimitTokens       int
	HasLimitRequests, HasLimitTokens bool
	// RemainingRequests and RemainingTokens are what is left in the current window.
	RemainingRequests, RemainingTokens       int
	HasRemainingRequests, HasRemainingTokens bool
	// ResetRequests and ResetTokens are how long until the window restores them in full.
	ResetRequests, ResetTokens time.Duration
}

// Known reports whether l holds any figure.
func (l Limits) Known() bool {
	return l.HasLimitRequests || l.HasLimitTokens || l.HasRemainingRequests || l.HasRemainingTokens
}

// Provider answers prompts.
//
// Complete returns either a Response or an error for which Classify gives
// the failure's kind; both built-in providers return an *Error directly.
// Complete honours ctx: when ctx is done it returns promptly with a
// timeout (deadline) or cancellation (IsCanceled) error. Implementations
// are safe for concurrent use.
type Provider interface {
	// Name is the provider's short name, such as "sim" or "openai".
	Name() string
	// Complete answers one attempt of one prompt.
	Complete(ctx context.Context, req Request) (Response, error)
}
