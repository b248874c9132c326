package openai

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"asterion/jobs"
	"asterion/jobs/admit"
)

// Metadata bounds, as OpenAI's: at most 16 pairs, keys of at most 64 characters and values of
// at most 512.
const (
	maxMetadataPairs    = 16
	maxMetadataKeyChars = 64
	maxMetadataValChars = 512
)

// ResponsesRequest is what Asterion reads of a POST /v1/responses body. Every other field of
// OpenAI's request is accepted and ignored.
type ResponsesRequest struct {
	// Model is the model asked for ("": the default).
	Model string
	// Instructions, when not nil, is a system message put before the input.
	Instructions *string
	// Input is the conversation: a string input is one user message.
	Input []jobs.Message
	// MaxOutputTokens bounds the answer (nil: no bound).
	MaxOutputTokens *int
	Temperature     *float64
	// Format is text.format as given (nil: plain text); ResponseFormat is the same as a chat
	// response_format, which is what the provider is given.
	Format, ResponseFormat json.RawMessage
	Metadata               map[string]string
	Background, Stream     bool
}

// ResponseEcho is what a response keeps with its job so that any process answers for it as it
// was asked: that the job is a response, whether it runs in the background, whether its first
// message is the request's instructions, its metadata and its text.format.
type ResponseEcho struct {
	Kind         string            `json:"kind"`
	Background   bool              `json:"background,omitempty"`
	Instructions bool              `json:"instructions,omitempty"`
	Metadata     map[string]string `json:"metadata,omitempty"`
	Format       json.RawMessage   `json:"format,omitempty"`
}

// echoKindResponse marks the job of a response.
const echoKindResponse = "response"

// ReadResponseEcho reads the echo kept in a job's execution options; ok is false for a job
// that is not a response's.
func ReadResponseEcho(executionOptions json.RawMessage) (ResponseEcho, bool) {
	var o jobs.ExecutionOptions
	if json.Unmarshal(executionOptions, &o) != nil || len(o.Echo) == 0 {
		return ResponseEcho{}, false
	}
	var e ResponseEcho
	if json.Unmarshal(o.Echo, &e) != nil || e.Kind != echoKindResponse {
		return ResponseEcho{}, false
	}
	return e, true
}

// Submit is the Asterion submit of r by v, through the front door: the instructions first,
// then the input, with the echo kept in the job's options.
func (r ResponsesRequest) Submit(v jobs.Viewer) jobs.SubmitRequest {
	msgs := make([]jobs.Message, 0, len(r.Input)+1)
	if r.Instructions != nil {
		msgs = append(msgs, jobs.Message{Role: jobs.RoleSystem, Content: *r.Instructions})
	}
	msgs = append(msgs, r.Input...)
	echo, _ := json.Marshal(ResponseEcho{Kind: echoKindResponse, Background: r.Background,
		Instructions: r.Instructions != nil, Metadata: r.Metadata, Format: r.Format})
	return jobs.SubmitRequest{Viewer: v, Messages: msgs, Door: admit.DoorFrontDoor,
		Options: jobs.ExecutionOptions{Model: r.Model, MaxTokens: r.MaxOutputTokens, Temperature: r.Temperature,
			ResponseFormat: r.ResponseFormat, Echo: echo}}
}

// DecodeResponses reads a POST /v1/responses body. A body that is not a JSON object, or a
// field of the wrong type, is a 400 naming the field; the rules on values are the jobs
// package's (see ResponsesFieldsError).
func DecodeResponses(body []byte) (ResponsesRequest, *APIError) {
	var r ResponsesRequest
	var top map[string]json.RawMessage
	if t := bytes.TrimSpace(body); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &top) != nil {
		return r, InvalidRequest("We could not parse the JSON body of your request. The body must be one JSON object "+
			"(see https://platform.openai.com/docs/api-reference/responses/create).", "", "")
	}
	if raw, ok := present(top, "model"); ok && json.Unmarshal(raw, &r.Model) != nil {
		return r, typeError("model", "a string")
	}
	if raw, ok := present(top, "instructions"); ok {
		var s string
		if json.Unmarshal(raw, &s) != nil {
			return r, typeError("instructions", "a string")
		}
		r.Instructions = &s
	}
	raw, ok := present(top, "input")
	if !ok {
		return r, InvalidRequest("Missing required parameter: 'input'.", "input", "missing_required_parameter")
	}
	in, aerr := decodeInput(raw)
	if aerr != nil {
		return r, aerr
	}
	r.Input = in
	if raw, ok := present(top, "max_output_tokens"); ok {
		var n int
		if json.Unmarshal(raw, &n) != nil {
			return r, typeError("max_output_tokens", "an integer")
		}
		r.MaxOutputTokens = &n
	}
	if raw, ok := present(top, "temperature"); ok {
		var t float64
		if json.Unmarshal(raw, &t) != nil {
			return r, typeError("temperature", "a number")
		}
		r.Temperature = &t
	}
	if raw, ok := present(top, "text"); ok {
		if aerr := r.decodeText(raw); aerr != nil {
			return r, aerr
		}
	}
	if raw, ok := present(top, "metadata"); ok {
		if aerr := r.decodeMetadata(raw); aerr != nil {
			return r, aerr
		}
	}
	for name, dst := range map[string]*bool{"background": &r.Background, "stream": &r.Stream} {
		if raw, ok := present(top, name); ok && json.Unmarshal(raw, dst) != nil {
			return r, typeError(name, "a boolean")
		}
	}
	return r, nil
}

// decodeText reads text.format and makes the chat response_format it stands for: text and
// json_object are the same object, a json_schema format's name, schema, description and
// strict move under json_schema.
func (r *ResponsesRequest) decodeText(raw json.RawMessage) *APIError {
	var text map[string]json.RawMessage
	if json.Unmarshal(raw, &text) != nil {
		return typeError("text", "an object")
	}
	f, ok := present(text, "format")
	if !ok {
		return nil
	}
	var format map[string]json.RawMessage
	var typ string
	if json.Unmarshal(f, &format) != nil {
		return typeError("text.format", "an object")
	}
	if t, ok := format["type"]; !ok || json.Unmarshal(t, &typ) != nil {
		return InvalidRequest("Missing required parameter: 'text.format.type'.", "text.format.type", "missing_required_parameter")
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, f)
	r.Format = compact.Bytes()
	switch typ {
	case "text", "json_object":
		r.ResponseFormat, _ = json.Marshal(map[string]string{"type": typ})
	case "json_schema":
		schema := map[string]json.RawMessage{}
		for _, k := range []string{"name", "schema", "description", "strict"} {
			if v, ok := format[k]; ok {
				schema[k] = v
			}
		}
		r.ResponseFormat, _ = json.Marshal(map[string]any{"type": typ, "json_schema": schema})
	default:
		return InvalidRequest(fmt.Sprintf("Invalid value: '%s'. Supported values are: 'text', 'json_object' and 'json_schema'.", typ),
			"text.format.type", "invalid_value")
	}
	return nil
}

func (r *ResponsesRequest) decodeMetadata(raw json.RawMessage) *APIError {
	if json.Unmarshal(raw, &r.Metadata) != nil {
		return typeError("metadata", "an object of strings")
	}
	if len(r.Metadata) > maxMetadataPairs {
		return InvalidRequest(fmt.Sprintf("Invalid 'metadata': too many properties. Expected an object with at most %d properties, but got %d instead.",
			maxMetadataPairs, len(r.Metadata)), "metadata", "object_above_max_properties")
	}
	for k, v := range r.Metadata {
		if utf8.RuneCountInString(k) > maxMetadataKeyChars || utf8.RuneCountInString(v) > maxMetadataValChars {
			return InvalidRequest(fmt.Sprintf("Invalid 'metadata': keys may have at most %d characters and values at most %d.",
				maxMetadataKeyChars, maxMetadataValChars), "metadata", "invalid_value")
		}
		if ControlCharIn(k) || ControlCharIn(v) {
			return InvalidRequest("Invalid 'metadata': keys and values may not hold control characters.", "metadata", "invalid_value")
		}
	}
	return nil
}

// ControlCharIn reports whether s holds a character Asterion refuses in stored text.
func ControlCharIn(s string) bool { return admit.ControlCharProblem(s) != "" }

// decodeInput reads input: a string (one user message) or a list of input messages, each a
// role and a content that is a string or a list of text parts (input_text, or output_text for
// an assistant's earlier answer).
func decodeInput(raw json.RawMessage) ([]jobs.Message, *APIError) {
	t := bytes.TrimSpace(raw)
	if len(t) > 0 && t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) != nil {
			return nil, typeError("input", "a string or an array of input items")
		}
		return []jobs.Message{{Role: jobs.RoleUser, Content: s}}, nil
	}
	var items []map[string]json.RawMessage
	if json.Unmarshal(t, &items) != nil {
		return nil, typeError("input", "a string or an array of input items")
	}
	if len(items) == 0 {
		return nil, InvalidRequest("Invalid 'input': empty array. Expected an array with minimum length 1.", "input", "empty_array")
	}
	out := make([]jobs.Message, len(items))
	for i, it := range items {
		param := "input[" + strconv.Itoa(i) + "]"
		var typ, role string
		if raw, ok := present(it, "type"); ok && (json.Unmarshal(raw, &typ) != nil || typ != "message") {
			return nil, InvalidRequest(fmt.Sprintf("Invalid input item type '%s': the front door takes messages only.", strings.Trim(string(raw), `"`)),
				param+".type", "invalid_value")
		}
		rr, ok := present(it, "role")
		if !ok {
			return nil, InvalidRequest(fmt.Sprintf("Missing required parameter: '%s.role'.", param), param+".role", "missing_required_parameter")
		}
		if json.Unmarshal(rr, &role) != nil {
			return nil, typeError(param+".role", "a string")
		}
		mapped, known := roles[role]
		if !known {
			return nil, InvalidRequest(fmt.Sprintf("Invalid value: '%s'. Supported roles are 'system', 'developer', 'user' and 'assistant'.", role),
				param+".role", "invalid_value")
		}
		content, aerr := decodeInputContent(it["content"], param+".content")
		if aerr != nil {
			return nil, aerr
		}
		out[i] = jobs.Message{Role: mapped, Content: content}
	}
	return out, nil
}

// decodeInputContent reads one input message's content; text parts are joined with a newline.
func decodeInputContent(raw json.RawMessage, param string) (string, *APIError) {
	t := bytes.TrimSpace(raw)
	if len(t) == 0 || bytes.Equal(t, []byte("null")) {
		return "", InvalidRequest(fmt.Sprintf("Missing required parameter: '%s'.", param), param, "missing_required_parameter")
	}
	if t[0] == '"' {
		var s string
		if json.Unmarshal(t, &s) != nil {
			return "", typeError(param, "a string or an array of input_text parts")
		}
		return s, nil
	}
	var parts []struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(t, &parts) != nil {
		return "", typeError(param, "a string or an array of input_text parts")
	}
	texts := make([]string, 0, len(parts))
	for j, p := range parts {
		if (p.Type != "input_text" && p.Type != "output_text") || p.Text == nil {
			return "", InvalidRequest(fmt.Sprintf("Invalid content part type '%s': the front door takes input_text parts only.", p.Type),
				fmt.Sprintf("%s[%d].type", param, j), "invalid_value")
		}
		texts = append(texts, *p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// ResponsesFieldsError is FieldsError for a response: Asterion's field names become the
// parameters of the responses request (the messages are the instructions, when given, and the
// input).
func ResponsesFieldsError(fields map[string]string, r ResponsesRequest) *APIError {
	renamed := make(map[string]string, len(fields))
	for k, v := range fields {
		renamed[responsesParam(k, r.Instructions != nil)] = v
	}
	return FieldsError(renamed, r.Model)
}

// responsesParam is the responses parameter an Asterion field stands for.
func responsesParam(field string, instructions bool) string {
	switch field {
	case "prompt", "messages":
		return "input"
	case "options.max_tokens":
		return "max_output_tokens"
	case "options.response_format":
		return "text.format"
	}
	if rest, ok := strings.CutPrefix(field, "messages["); ok {
		end := strings.IndexByte(rest, ']')
		if i, err := strconv.Atoi(rest[:max(end, 0)]); end > 0 && err == nil {
			if instructions {
				i--
			}
			if i < 0 {
				return "instructions"
			}
			return "input[" + strconv.Itoa(i) + "]" + rest[end+1:]
		}
	}
	return field
}
