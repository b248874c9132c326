package openai

import (
	"encoding/json"
	"strings"

	"asterion/jobs"
	"asterion/jobs/batch"
)

// The endpoints a batch line may name.
const (
	BatchChatPath      = "/v1/chat/completions"
	BatchResponsesPath = "/v1/responses"
)

// BatchEndpoints are the endpoints of the front door a batch may run its lines on.
func BatchEndpoints() map[string]batch.Endpoint {
	return map[string]batch.Endpoint{BatchChatPath: batchChatEndpoint{}, BatchResponsesPath: batchResponsesEndpoint{}}
}

// batchLineError is the error-file entry of a line's body that OpenAI would have answered with
// err.
func batchLineError(err *APIError) *batch.LineError {
	code := "invalid_request"
	if err.Err.Code != nil {
		code = *err.Err.Code
	}
	return &batch.LineError{Code: code, Message: err.Err.Message}
}

// batchChatEndpoint runs a line as /v1/chat/completions would.
type batchChatEndpoint struct{}

func (batchChatEndpoint) Decode(body []byte) (batch.Prompt, *batch.LineError) {
	cr, aerr := DecodeChat(body)
	if aerr != nil {
		return batch.Prompt{}, batchLineError(aerr)
	}
	return batch.Prompt{Messages: cr.Messages, Metadata: cr.Metadata, Options: jobs.ExecutionOptions{Model: cr.Model,
		MaxTokens: cr.MaxTokens, Temperature: cr.Temperature, ResponseFormat: cr.ResponseFormat}}, nil
}

// Answer is the chat.completion the endpoint would have answered.
func (batchChatEndpoint) Answer(a batch.Answered) ([]byte, error) {
	return json.Marshal(NewCompletion(CompletionID(a.JobID.String()), a.FinishedAt.Unix(), a.Model, a.Text,
		FinishReason(a.AnsweredOutputTokens, a.MaxTokens), NewUsage(a.InputTokens, a.OutputTokens)))
}

// batchResponsesEndpoint runs a line as /v1/responses would, for what a batch reads of it: model,
// input (a string or a list of messages of text), instructions, max_output_tokens,
// temperature and metadata.
type batchResponsesEndpoint struct{}

func (batchResponsesEndpoint) Decode(body []byte) (batch.Prompt, *batch.LineError) {
	var top map[string]json.RawMessage
	if t := strings.TrimSpace(string(body)); t == "" || t[0] != '{' || json.Unmarshal(body, &top) != nil {
		return batch.Prompt{}, batchLineError(InvalidRequest("The body of the request is not a JSON object.", "body", "invalid_json"))
	}
	var p batch.Prompt
	if raw, ok := present(top, "model"); ok && json.Unmarshal(raw, &p.Options.Model) != nil {
		return p, batchLineError(typeError("model", "a string"))
	}
	if raw, ok := present(top, "instructions"); ok {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return p, batchLineError(typeError("instructions", "a string"))
		}
		p.Messages = append(p.Messages, jobs.Message{Role: jobs.RoleSystem, Content: s})
	}
	raw, ok := present(top, "input")
	if !ok {
		return p, batchLineError(InvalidRequest("Missing required parameter: 'input'.", "input", "missing_required_parameter"))
	}
	msgs, aerr := batchDecodeInput(raw)
	if aerr != nil {
		return p, batchLineError(aerr)
	}
	p.Messages = append(p.Messages, msgs...)
	if raw, ok := present(top, "max_output_tokens"); ok {
		var n int
		if json.Unmarshal(raw, &n) != nil {
			return p, batchLineError(typeError("max_output_tokens", "an integer"))
		}
		p.Options.MaxTokens = &n
	}
	if raw, ok := present(top, "temperature"); ok {
		var t float64
		if json.Unmarshal(raw, &t) != nil {
			return p, batchLineError(typeError("temperature", "a number"))
		}
		p.Options.Temperature = &t
	}
	if raw, ok := present(top, "metadata"); ok && json.Unmarshal(raw, &p.Metadata) != nil {
		return p, batchLineError(typeError("metadata", "an object of strings"))
	}
	return p, nil
}

// batchDecodeInput reads a response's input: a string (one user message) or a list of messages
// whose content is a string or a list of input_text (or output_text) parts.
func batchDecodeInput(raw json.RawMessage) ([]jobs.Message, *APIError) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return []jobs.Message{{Role: jobs.RoleUser, Content: s}}, nil
	}
	var items []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &items) != nil {
		return nil, typeError("input", "a string or an array of messages")
	}
	out := make([]jobs.Message, 0, len(items))
	for _, it := range items {
		role, ok := roles[it.Role]
		if !ok {
			return nil, InvalidRequest("Invalid value for 'input[].role': '"+it.Role+"'.", "input", "invalid_value")
		}
		var text string
		if json.Unmarshal(it.Content, &text) != nil {
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			if json.Unmarshal(it.Content, &parts) != nil {
				return nil, typeError("input[].content", "a string or an array of text parts")
			}
			texts := make([]string, 0, len(parts))
			for _, p := range parts {
				if p.Type != "input_text" && p.Type != "output_text" && p.Type != "text" {
					return nil, InvalidRequest("The front door takes text input only.", "input", "invalid_value")
				}
				texts = append(texts, p.Text)
			}
			text = strings.Join(texts, "\n")
		}
		out = append(out, jobs.Message{Role: role, Content: text})
	}
	return out, nil
}

// batchResponse is the response object a batch writes for a /v1/responses line: the fields
// of OpenAI's that a completed answer has.
type batchResponse struct {
	ID        string              `json:"id"`
	Object    string              `json:"object"`
	CreatedAt int64               `json:"created_at"`
	Status    string              `json:"status"`
	Model     string              `json:"model"`
	Output    []batchOutputItem   `json:"output"`
	Usage     batchResponsesUsage `json:"usage"`
	Error     *struct{}           `json:"error"`
	Metadata  map[string]string   `json:"metadata"`
}

type batchOutputItem struct {
	Type    string            `json:"type"`
	ID      string            `json:"id"`
	Status  string            `json:"status"`
	Role    string            `json:"role"`
	Content []batchOutputText `json:"content"`
}

type batchOutputText struct {
	Type        string   `json:"type"`
	Text        string   `json:"text"`
	Annotations []string `json:"annotations"`
}

type batchResponsesUsage struct {
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	TotalTokens  int64 `json:"total_tokens"`
}

// Answer is the response object the endpoint would have answered.
func (batchResponsesEndpoint) Answer(a batch.Answered) ([]byte, error) {
	id := strings.ReplaceAll(a.JobID.String(), "-", "")
	return json.Marshal(batchResponse{ID: "resp_" + id, Object: "response", CreatedAt: a.FinishedAt.Unix(), Status: "completed",
		Model: a.Model, Metadata: map[string]string{},
		Output: []batchOutputItem{{Type: "message", ID: "msg_" + id, Status: "completed", Role: "assistant",
			Content: []batchOutputText{{Type: "output_text", Text: a.Text, Annotations: []string{}}}}},
		Usage: batchResponsesUsage{InputTokens: a.InputTokens, OutputTokens: a.OutputTokens, TotalTokens: a.InputTokens + a.OutputTokens}})
}
