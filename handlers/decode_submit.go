package handlers

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"asterion/jobs"
)

// decodeError is a client mistake in a request body: status 400 (malformed, unknown field) or
// 422 (a field of the wrong type), with the fields named.
type decodeError struct {
	status int
	detail string
	fields map[string]string
}

func (e *decodeError) Error() string { return e.detail }

var submitFields = map[string]bool{"prompt": true, "messages": true, "parent_id": true, "priority": true, "max_attempts": true, "options": true,
	"scheduled_for": true}
var optionFields = map[string]bool{"model": true, "prefer_provider": true, "depth": true, "router_model": true,
	"max_tokens": true, "temperature": true, "response_format": true}
var messageFields = map[string]bool{"role": true, "content": true}

// decodeSubmit reads a POST /prompt body strictly: malformed JSON or an unknown key (also
// inside options) is a 400; a value of the wrong type is a 422 naming the field. The rules on
// values (lengths, ranges) are the jobs package's.
func decodeSubmit(body []byte) (jobs.SubmitRequest, *decodeError) {
	var req jobs.SubmitRequest
	var top map[string]json.RawMessage
	if err := strictObject(body, &top); err != nil {
		return req, &decodeError{status: 400, detail: "the body must be one JSON object: " + err.Error()}
	}
	if unknown := unknownKeys(top, submitFields); len(unknown) > 0 {
		return req, &decodeError{status: 400, detail: "unknown field(s): " + strings.Join(unknown, ", ")}
	}
	fields := map[string]string{}
	if raw, ok := top["prompt"]; ok {
		if err := json.Unmarshal(raw, &req.Prompt); err != nil {
			fields["prompt"] = "must be a string"
		}
	} else if _, ok := top["messages"]; !ok {
		fields["prompt"] = "is required (or messages)"
	}
	if raw, ok := top["messages"]; ok {
		msgs, derr := decodeMessages(raw, fields)
		if derr != nil {
			return req, derr
		}
		req.Messages = msgs
	}
	if raw, ok := top["parent_id"]; ok && !isNull(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			fields["parent_id"] = "must be a UUID string"
		} else if id, err := uuid.Parse(s); err != nil || len(s) != 36 {
			fields["parent_id"] = "must be a UUID string"
		} else {
			req.ParentID = &id
		}
	}
	if raw, ok := top["scheduled_for"]; ok && !isNull(raw) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			fields["scheduled_for"] = "must be an RFC 3339 time"
		} else if at, err := time.Parse(time.RFC3339Nano, s); err != nil {
			fields["scheduled_for"] = "must be an RFC 3339 time"
		} else {
			req.ScheduledFor = &at
		}
	}
	req.Priority = intField(top, "priority", fields)
	req.MaxAttempts = intField(top, "max_attempts", fields)
	if raw, ok := top["options"]; ok && !isNull(raw) {
		var opts map[string]json.RawMessage
		if err := json.Unmarshal(raw, &opts); err != nil || opts == nil {
			fields["options"] = "must be an object"
		} else {
			if unknown := unknownKeys(opts, optionFields); len(unknown) > 0 {
				return req, &decodeError{status: 400, detail: "unknown option(s): " + strings.Join(unknown, ", ")}
			}
			for _, k := range []string{"model", "prefer_provider", "router_model"} {
				if raw, ok := opts[k]; ok && !isNull(raw) {
					var s string
					if err := json.Unmarshal(raw, &s); err != nil {
						fields["options."+k] = "must be a string"
						continue
					}
					switch k {
					case "model":
						req.Options.Model = s
					case "prefer_provider":
						req.Options.PreferProvider = s
					case "router_model":
						req.Options.RouterModel = s
					}
				}
			}
			req.Options.Depth = intField(opts, "depth", fields)
			req.Options.MaxTokens = intField(opts, "max_tokens", fields)
			for _, k := range []string{"depth", "max_tokens"} {
				if msg, bad := fields[k]; bad {
					fields["options."+k] = msg
					delete(fields, k)
				}
			}
			if raw, ok := opts["temperature"]; ok && !isNull(raw) {
				var t float64
				if err := json.Unmarshal(raw, &t); err != nil {
					fields["options.temperature"] = "must be a number"
				} else {
					req.Options.Temperature = &t
				}
			}
			if raw, ok := opts["response_format"]; ok && !isNull(raw) {
				var compact bytes.Buffer
				if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' || json.Compact(&compact, t) != nil {
					fields["options.response_format"] = "must be an object"
				} else {
					req.Options.ResponseFormat = compact.Bytes()
				}
			}
		}
	}
	if len(fields) > 0 {
		return req, &decodeError{status: 422, detail: "the request breaks one or more field rules", fields: fields}
	}
	return req, nil
}

// decodeMessages reads the messages array strictly: each entry an object of role and content
// (both strings), no other key (a 400). The rules on the conversation are the jobs package's.
func decodeMessages(raw json.RawMessage, fields map[string]string) ([]jobs.Message, *decodeError) {
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil || items == nil {
		fields["messages"] = "must be an array of {role, content} objects"
		return nil, nil
	}
	msgs := make([]jobs.Message, len(items))
	for i, item := range items {
		var m map[string]json.RawMessage
		if err := strictObject(item, &m); err != nil {
			fields[fmt.Sprintf("messages[%d]", i)] = "must be an object with role and content"
			continue
		}
		if unknown := unknownKeys(m, messageFields); len(unknown) > 0 {
			return nil, &decodeError{status: 400, detail: fmt.Sprintf("unknown field(s) in messages[%d]: %s", i, strings.Join(unknown, ", "))}
		}
		for _, k := range []string{"role", "content"} {
			name := fmt.Sprintf("messages[%d].%s", i, k)
			v, ok := m[k]
			if !ok {
				fields[name] = "is required"
				continue
			}
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				fields[name] = "must be a string"
				continue
			}
			if k == "role" {
				msgs[i].Role = s
			} else {
				msgs[i].Content = s
			}
		}
	}
	return msgs, nil
}

// strictObject decodes exactly one JSON object with no trailing data and no duplicate keys.
func strictObject(body []byte, out *map[string]json.RawMessage) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("malformed JSON")
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return fmt.Errorf("not an object")
	}
	m := map[string]json.RawMessage{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return fmt.Errorf("malformed JSON")
		}
		k, _ := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return fmt.Errorf("malformed JSON")
		}
		if _, dup := m[k]; dup {
			return fmt.Errorf("duplicate key %q", k)
		}
		m[k] = v
	}
	if _, err := dec.Token(); err != nil {
		return fmt.Errorf("malformed JSON")
	}
	// Only the end of the input may follow; anything else (even invalid JSON) is trailing data.
	if _, err := dec.Token(); err != io.EOF {
		return fmt.Errorf("trailing data after the object")
	}
	*out = m
	return nil
}

func unknownKeys(m map[string]json.RawMessage, allowed map[string]bool) []string {
	var out []string
	for k := range m {
		if !allowed[k] {
			out = append(out, fmt.Sprintf("%q", k))
		}
	}
	sort.Strings(out)
	return out
}

func isNull(raw json.RawMessage) bool { return bytes.Equal(bytes.TrimSpace(raw), []byte("null")) }

// intField reads an optional integer; a non-integer is recorded as a field error.
func intField(m map[string]json.RawMessage, name string, fields map[string]string) *int {
	raw, ok := m[name]
	if !ok || isNull(raw) {
		return nil
	}
	var n json.Number
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] == '"' {
		fields[name] = "must be an integer"
		return nil
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		fields[name] = "must be an integer"
		return nil
	}
	i, err := n.Int64()
	if err != nil || i < -1<<31 || i > 1<<31-1 {
		fields[name] = "must be an integer"
		return nil
	}
	v := int(i)
	return &v
}
