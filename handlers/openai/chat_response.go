package openai

import (
	"encoding/json"
	"strings"
)

// The objects of OpenAI's chat completions.
const (
	ObjectCompletion = "chat.completion"
	ObjectChunk      = "chat.completion.chunk"
)

// Usage is a completion's token counts.
type Usage struct {
	PromptTokens     int64 `json:"prompt_tokens"`
	CompletionTokens int64 `json:"completion_tokens"`
	TotalTokens      int64 `json:"total_tokens"`
}

// NewUsage is the usage of input and output tokens.
func NewUsage(input, output int64) Usage {
	return Usage{PromptTokens: input, CompletionTokens: output, TotalTokens: input + output}
}

// AssistantMessage is the message of a completion's choice.
type AssistantMessage struct {
	Role    string  `json:"role"`
	Content string  `json:"content"`
	Refusal *string `json:"refusal"`
}

// Choice is a completion's one choice.
type Choice struct {
	Index        int              `json:"index"`
	Message      AssistantMessage `json:"message"`
	Logprobs     *struct{}        `json:"logprobs"`
	FinishReason string           `json:"finish_reason"`
}

// Completion is a chat.completion answer.
type Completion struct {
	ID      string   `json:"id"`
	Object  string   `json:"object"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   Usage    `json:"usage"`
	// ServiceTier and SystemFingerprint are sent as OpenAI sends them.
	ServiceTier       string  `json:"service_tier"`
	SystemFingerprint *string `json:"system_fingerprint"`
}

// CompletionID is the id of the completion answered by job jobID: OpenAI's "chatcmpl-" prefix
// and the job's id, so the two name each other.
func CompletionID(jobID string) string { return "chatcmpl-" + strings.ReplaceAll(jobID, "-", "") }

// NewCompletion is the chat.completion of a finished answer.
func NewCompletion(id string, created int64, model, text, finish string, usage Usage) Completion {
	return Completion{ID: id, Object: ObjectCompletion, Created: created, Model: model, ServiceTier: "default",
		Choices: []Choice{{Index: 0, Message: AssistantMessage{Role: "assistant", Content: text}, FinishReason: finish}},
		Usage:   usage}
}

// Delta is what a chunk adds to its choice.
type Delta struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

// ChunkChoice is a chunk's one choice.
type ChunkChoice struct {
	Index        int       `json:"index"`
	Delta        Delta     `json:"delta"`
	Logprobs     *struct{} `json:"logprobs"`
	FinishReason *string   `json:"finish_reason"`
}

// Chunk is one chat.completion.chunk event. As OpenAI's, a chunk of a stream that asked for
// usage carries "usage": null, but its last one, whose choices are empty, carries the usage;
// a chunk of a stream that did not ask has no usage field.
type Chunk struct {
	ID                string        `json:"id"`
	Object            string        `json:"object"`
	Created           int64         `json:"created"`
	Model             string        `json:"model"`
	ServiceTier       string        `json:"service_tier"`
	SystemFingerprint *string       `json:"system_fingerprint"`
	Choices           []ChunkChoice `json:"choices"`
	// Usage is nil (no field), nullUsage or the *Usage of the last chunk.
	Usage any `json:"usage,omitempty"`
}

// nullUsage is the "usage": null of a chunk before the last of a stream that asked for usage.
var nullUsage = json.RawMessage("null")

// ChunkStream makes the chunks of one streamed completion, which share id, created and model;
// IncludeUsage is the request's stream_options.include_usage.
type ChunkStream struct {
	ID           string
	Created      int64
	Model        string
	IncludeUsage bool
}

func (s ChunkStream) chunk(choices []ChunkChoice) Chunk {
	c := Chunk{ID: s.ID, Object: ObjectChunk, Created: s.Created, Model: s.Model, ServiceTier: "default",
		Choices: choices}
	if s.IncludeUsage {
		c.Usage = nullUsage
	}
	return c
}

// First is the chunk that opens the assistant's message: its role and an empty content.
func (s ChunkStream) First() Chunk {
	empty := ""
	return s.chunk([]ChunkChoice{{Delta: Delta{Role: "assistant", Content: &empty}}})
}

// Content is a chunk of the answer's text.
func (s ChunkStream) Content(text string) Chunk {
	return s.chunk([]ChunkChoice{{Delta: Delta{Content: &text}}})
}

// Finish is the chunk that ends the choice with why it ended.
func (s ChunkStream) Finish(reason string) Chunk {
	return s.chunk([]ChunkChoice{{FinishReason: &reason}})
}

// Usage is the last chunk of a stream that asked for usage: no choices, and the counts.
func (s ChunkStream) Usage(u Usage) Chunk {
	c := s.chunk([]ChunkChoice{})
	c.Usage = &u
	return c
}

// FinishReason is why an answer of output tokens ended, given the max_tokens asked for (nil:
// none): "length" when it reached the bound, "stop" otherwise.
func FinishReason(outputTokens int64, maxTokens *int) string {
	if maxTokens != nil && outputTokens >= int64(*maxTokens) {
		return "length"
	}
	return "stop"
}
