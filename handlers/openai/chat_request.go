package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"asterion/jobs"
	"asterion/jobs/admit"
)

// ChatRequest is what Asterion reads of a chat-completions request. Every other field of
// OpenAI's request is accepted and ignored.
type ChatRequest struct {
	// Model is the model asked for ("": the default).
	Model string
	// Messages is the conversation, developer messages read as system messages and text parts
	// joined.
	Messages []jobs.Message
	// MaxTokens is max_completion_tokens, or else max_tokens (nil: neither).
	MaxTokens      *int
	Temperature    *float64
	ResponseFormat json.RawMessage
	// Stream asks for chat.completion.chunk events; IncludeUsage for a last chunk with the usage.
	Stream, IncludeUsage bool
	// Metadata are the caller's key-value pairs.
	Metadata map[string]string
}

// Submit is the Asterion submit of r by v, through the front door.
func (r ChatRequest) Submit(v jobs.Viewer) jobs.SubmitRequest {
	return jobs.SubmitRequest{Viewer: v, Messages: r.Messages, Door: admit.DoorFrontDoor,
		Options: jobs.ExecutionOptions{Model: r.Model, MaxTokens: r.MaxTokens, Temperature: r.Temperature,
			ResponseFormat: r.ResponseFormat}}
}

// errUnparsable is OpenAI's answer to a body that is not one JSON object.
func errUnparsable() *APIError {
	return InvalidRequest("We could not parse the JSON body of your request. The body must be one JSON object "+
		"(see https://platform.openai.com/docs/api-reference/chat/create).", "", "")
}

// DecodeChat reads a chat-completions body. A body that is not a JSON object, or a field of
// the wrong type, is a 400 naming the field; the rules on values (lengths, ranges, roles) are
// the jobs package's, which answer through the same error class.
func DecodeChat(body []byte) (ChatRequest, *APIError) {
	var r ChatRequest
	var top map[string]json.RawMessage
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &top) != nil {
		return r, errUnparsable()
	}
	if raw, ok := present(top, "model"); ok {
		if json.Unmarshal(raw, &r.Model) != nil {
			return r, typeError("model", "a string")
		}
	}
	raw, ok := present(top, "messages")
	if !ok {
		return r, InvalidRequest("Missing required parameter: 'messages'.", "messages", "missing_required_parameter")
	}
	msgs, aerr := decodeMessages(raw)
	if aerr != nil {
		return r, aerr
	}
	r.Messages = msgs
	for _, name := range []string{"max_tokens", "max_completion_tokens"} {
		if raw, ok := present(top, name); ok {
			var n int
			if json.Unmarshal(raw, &n) != nil {
				return r, typeError(name, "an integer")
			}
			r.MaxTokens = &n
		}
	}
	if raw, ok := present(top, "temperature"); ok {
		var t float64
		if json.Unmarshal(raw, &t) != nil {
			return r, typeError("temperature", "a number")
		}
		r.Temperature = &t
	}
	if raw, ok := present(top, "response_format"); ok {
		var obj map[string]json.RawMessage
		if json.Unmarshal(raw, &obj) != nil {
			return r, typeError("response_format", "an object")
		}
		r.ResponseFormat = append(json.RawMessage(nil), bytes.TrimSpace(raw)...)
	}
	if raw, ok := present(top, "stream"); ok {
		if json.Unmarshal(raw, &r.Stream) != nil {
			return r, typeError("stream", "a boolean")
		}
	}
	if raw, ok := present(top, "stream_options"); ok {
		var so struct {
			IncludeUsage *bool `json:"include_usage"`
		}
		if json.Unmarshal(raw, &so) != nil {
			return r, typeError("stream_options", "an object")
		}
		r.IncludeUsage = so.IncludeUsage != nil && *so.IncludeUsage
	}
	if raw, ok := present(top, "metadata"); ok {
		if json.Unmarshal(raw, &r.Metadata) != nil {
			return r, typeError("metadata", "an object of strings")
		}
	}
	return r, nil
}

// present is the value of key unless it is absent or null.
func present(m map[string]json.RawMessage, key string) (json.RawMessage, bool) {
	raw, ok := m[key]
	if !ok || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil, false
	}
	return raw, true
}

func typeError(param, want string) *APIError {
	return InvalidRequest(fmt.Sprintf("Invalid type for '%s': expected %s.", param, want), param, "invalid_type")
}

// roles maps OpenAI's message roles onto Asterion's; a role missing here (tool, function) is
// not supported by the front door.
var roles = map[string]string{"system": jobs.RoleSystem, "developer": jobs.RoleSystem, "user": jobs.RoleUser,
	"assistant": jobs.RoleAssistant}

// decodeMessages reads OpenAI's messages: a role and a content that is a string, a list of text
// parts, or null (an assistant's turn that only called tools).
func decodeMessages(raw json.RawMessage) ([]jobs.Message, *APIError) {
	var items []struct {
		Role    *string         `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return nil, typeError("messages", "an array of message objects")
	}
	if len(items) == 0 {
		return nil, InvalidRequest("Invalid 'messages': empty array. Expected an array with minimum length 1.", "messages",
			"empty_array")
	}
	out := make([]jobs.Message, len(items))
	for i, it := range items {
		if it.Role == nil {
			return nil, InvalidRequest(fmt.Sprintf("Missing required parameter: 'messages[%d].role'.", i),
				fmt.Sprintf("messages[%d].role", i), "missing_required_parameter")
		}
		role, ok := roles[*it.Role]
		if !ok {
			return nil, InvalidRequest(fmt.Sprintf("Invalid value: '%s'. Supported roles are 'system', 'developer', 'user' and 'assistant'.",
				*it.Role), fmt.Sprintf("messages[%d].role", i), "invalid_value")
		}
		content, aerr := decodeContent(it.Content, i)
		if aerr != nil {
			return nil, aerr
		}
		out[i] = jobs.Message{Role: role, Content: content}
	}
	return out, nil
}

// decodeContent reads one message's content; text parts are joined with a newline.
func decodeContent(raw json.RawMessage, i int) (string, *APIError) {
	param := fmt.Sprintf("messages[%d].content", i)
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "", nil
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) != nil {
			return "", typeError(param, "a string or an array of text parts")
		}
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(t, &parts) != nil {
		return "", typeError(param, "a string or an array of text parts")
	}
	texts := make([]string, 0, len(parts))
	for j, p := range parts {
		if p.Type != "text" || p.Text == nil {
			return "", InvalidRequest(fmt.Sprintf("Invalid content part type '%s': the front door takes text parts only.", p.Type),
				fmt.Sprintf("%s[%d].type", param, j), "invalid_value")
		}
		texts = append(texts, *p.Text)
	}
	return strings.Join(texts, "\n"), nil
}
