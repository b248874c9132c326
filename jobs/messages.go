package jobs

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"asterion/db"
	"asterion/jobs/admit"
	"asterion/jobs/provider"
)

// Limits of a prompt submitted as messages and of its output options.
const (
	// MaxMessages is the most messages one prompt may hold.
	MaxMessages = 256
	// MaxOutputTokens is the largest max_tokens a prompt may ask for.
	MaxOutputTokens = 1_000_000
	// MaxTemperature is the largest temperature a prompt may ask for.
	MaxTemperature = 2.0
	// maxResponseFormatBytes bounds the response_format object passed to the provider.
	maxResponseFormatBytes = 16 << 10
)

// The roles a message may have.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one message of a prompt submitted as a conversation: who speaks and what they say.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// lastUser is the index of the last user message of msgs, or -1.
func lastUser(msgs []Message) int {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == RoleUser {
			return i
		}
	}
	return -1
}

// messageProblems checks the rules of a conversation other than the text rules on its last user
// message, which admission applies: 1..MaxMessages entries of a known role, a user message (the
// prompt's text), at most MaxPromptChars characters in all, and no content with control
// characters. The submit door takes a conversation whose last message is the user's; OpenAI's
// doors (the front door and a batch's lines) take one ending in any role, as OpenAI does. Each
// problem is recorded in fields under the field it concerns.
func messageProblems(msgs []Message, door admit.Door, fields map[string]string) {
	if len(msgs) == 0 || len(msgs) > MaxMessages {
		fields["messages"] = fmt.Sprintf("must hold 1..%d messages, got %d", MaxMessages, len(msgs))
		return
	}
	total := 0
	for i, m := range msgs {
		switch m.Role {
		case RoleSystem, RoleUser, RoleAssistant:
		default:
			fields[fmt.Sprintf("messages[%d].role", i)] = "must be one of system, user, assistant"
		}
		if !utf8.ValidString(m.Content) {
			fields[fmt.Sprintf("messages[%d].content", i)] = "must be valid UTF-8"
		} else if msg := ControlCharProblem(m.Content); msg != "" {
			fields[fmt.Sprintf("messages[%d].content", i)] = msg
		}
		total += utf8.RuneCountInString(m.Content)
	}
	last := len(msgs) - 1
	switch {
	case door != admit.DoorFrontDoor && door != admit.DoorBatch && msgs[last].Role != RoleUser:
		fields[fmt.Sprintf("messages[%d].role", last)] = "the last message must be a user message"
	case lastUser(msgs) < 0:
		fields["messages"] = "must hold a user message"
	}
	if total > MaxPromptChars {
		fields["messages"] = fmt.Sprintf("must hold at most %d characters in all, got %d", MaxPromptChars, total)
	}
}

// outputOptionProblems checks max_tokens, temperature and response_format.
func outputOptionProblems(o ExecutionOptions, fields map[string]string) {
	if o.MaxTokens != nil && (*o.MaxTokens < 1 || *o.MaxTokens > MaxOutputTokens) {
		fields["options.max_tokens"] = fmt.Sprintf("must be between 1 and %d", MaxOutputTokens)
	}
	if o.Temperature != nil && (*o.Temperature < 0 || *o.Temperature > MaxTemperature) {
		fields["options.temperature"] = "must be between 0 and 2"
	}
	if len(o.ResponseFormat) > 0 {
		var obj map[string]json.RawMessage
		switch {
		case len(o.ResponseFormat) > maxResponseFormatBytes:
			fields["options.response_format"] = fmt.Sprintf("must be at most %d bytes of JSON", maxResponseFormatBytes)
		case json.Unmarshal(o.ResponseFormat, &obj) != nil || obj == nil:
			fields["options.response_format"] = "must be an object"
		default:
			if msg := admit.JSONTextProblem(o.ResponseFormat); msg != "" {
				fields["options.response_format"] = msg
			}
		}
	}
}

// providerMessages are the messages of a prompt as its provider receives them.
func providerMessages(msgs []Message) []provider.Message {
	if len(msgs) == 0 {
		return nil
	}
	out := make([]provider.Message, len(msgs))
	for i, m := range msgs {
		out[i] = provider.Message{Role: m.Role, Content: m.Content}
	}
	return out
}

// provider is o as the provider receives it, with depth its depth hint.
func (o ExecutionOptions) provider(depth int) provider.Options {
	p := provider.Options{Model: o.Model, PreferProvider: o.PreferProvider, RouterModel: o.RouterModel, Depth: depth,
		Temperature: o.Temperature, ResponseFormat: o.ResponseFormat}
	if o.MaxTokens != nil {
		p.MaxTokens = *o.MaxTokens
	}
	return p
}

// conversationText is every message's content, for an estimate of the prompt's input tokens.
func conversationText(msgs []Message) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString(m.Content)
		b.WriteByte('\n')
	}
	return b.String()
}

// promptInput is all the provider reads of a stored prompt: its conversation, or its text.
func promptInput(prompt db.Entity) (string, error) {
	msgs, err := PromptMessages(prompt.Messages)
	if err != nil {
		return "", fmt.Errorf("prompt %s: %w", prompt.ID, err)
	}
	if msgs == nil {
		return prompt.Body, nil
	}
	return conversationText(msgs), nil
}

// PromptMessages reads the messages stored with a prompt entity (nil for one submitted as plain
// text).
func PromptMessages(raw json.RawMessage) ([]Message, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var msgs []Message
	if err := json.Unmarshal(raw, &msgs); err != nil {
		return nil, fmt.Errorf("read prompt messages: %w", err)
	}
	return msgs, nil
}

// PromptCheck is what the field rules of a submit say of a conversation and its execution
// options, for a door that queues its jobs itself (EnqueueTx) and must apply the same rules
// as Submit: the message and option problems by field, and the conversation's text (its last
// user message) with the field the text rules report on.
type PromptCheck struct {
	Fields    map[string]string
	Text      string
	TextField string
}

// CheckPrompt applies Submit's rules on messages and options (roles, lengths, the output
// bounds) as at door; the admission's rules on the text and the model are the door's to apply
// with Text.
func CheckPrompt(msgs []Message, o ExecutionOptions, door admit.Door) PromptCheck {
	out := PromptCheck{Fields: map[string]string{}, TextField: "messages"}
	messageProblems(msgs, door, out.Fields)
	outputOptionProblems(o, out.Fields)
	if i := lastUser(msgs); i >= 0 {
		out.Text, out.TextField = msgs[i].Content, fmt.Sprintf("messages[%d].content", i)
	}
	return out
}

// ConversationText is the text of a conversation the provider reads, for the estimate of its
// tokens.
func ConversationText(msgs []Message) string { return conversationText(msgs) }
