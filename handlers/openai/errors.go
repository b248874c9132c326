package openai

import (
	"encoding/json"
	"fmt"
	"net/http"
)

// The error types OpenAI's API answers with, which the SDKs read.
const (
	TypeInvalidRequest    = "invalid_request_error"
	TypeAuthentication    = "authentication_error"
	TypePermission        = "permission_error"
	TypeRequests          = "requests"
	TypeInsufficientQuota = "insufficient_quota"
	TypeServer            = "server_error"
)

// Error is OpenAI's error object, the value of the "error" key of an error answer. Param and
// Code are null when they say nothing.
type Error struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// APIError is an Error with the HTTP status it is answered with and, for a refusal, the
// seconds a client should wait before asking again.
type APIError struct {
	Status     int
	Err        Error
	RetryAfter int
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, e.Err.Type, e.Err.Message)
}

// Body is the JSON of the error answer: {"error":{"message","type","param","code"}}.
func (e *APIError) Body() []byte {
	b, _ := json.Marshal(struct {
		Error Error `json:"error"`
	}{e.Err})
	return b
}

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// InvalidRequest is a 400: the request is malformed or breaks a rule; param names the field.
func InvalidRequest(message, param, code string) *APIError {
	return &APIError{Status: http.StatusBadRequest, Err: Error{Message: message, Type: TypeInvalidRequest, Param: strp(param),
		Code: strp(code)}}
}

// InvalidAPIKey is a 401: no key, or one that is not an Asterion API token that admits anyone.
func InvalidAPIKey(message string) *APIError {
	return &APIError{Status: http.StatusUnauthorized, Err: Error{Message: message, Type: TypeInvalidRequest,
		Code: strp("invalid_api_key")}}
}

// PermissionDenied is a 403.
func PermissionDenied(message string) *APIError {
	return &APIError{Status: http.StatusForbidden, Err: Error{Message: message, Type: TypePermission}}
}

// NotFound is a 404 for an address or an object that does not exist (or is not the caller's).
func NotFound(message, param, code string) *APIError {
	return &APIError{Status: http.StatusNotFound, Err: Error{Message: message, Type: TypeInvalidRequest, Param: strp(param),
		Code: strp(code)}}
}

// InvalidURL is the 404 of an address under /v1 that names no endpoint, worded as OpenAI's.
func InvalidURL(method, path string) *APIError {
	return NotFound(fmt.Sprintf("Invalid URL (%s %s)", method, path), "", "")
}

// ModelNotFound is the 404 of a model that is not one the caller may ask for.
func ModelNotFound(model string) *APIError {
	return NotFound(fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model), "model",
		"model_not_found")
}

// RateLimited is a 429 for an admission refusal: a rate or quota (type "requests", code
// "rate_limit_exceeded") or a spent budget (type and code "insufficient_quota"), with the
// seconds to wait.
func RateLimited(message string, budget bool, retryAfter int) *APIError {
	typ, code := TypeRequests, "rate_limit_exceeded"
	if budget {
		typ, code = TypeInsufficientQuota, "insufficient_quota"
	}
	return &APIError{Status: http.StatusTooManyRequests, Err: Error{Message: message, Type: typ, Code: strp(code)},
		RetryAfter: max(retryAfter, 1)}
}

// Server is a 500 or 503 (status) of the server's own making, or the answer of a job that
// failed; code, when not empty, is the job's error kind.
func Server(status int, message, code string) *APIError {
	return &APIError{Status: status, Err: Error{Message: message, Type: TypeServer, Code: strp(code)}}
}

// Status maps any other HTTP status the server answers under /v1 (a body too large, a
// request the transport refused) onto the error object of its class.
func Status(status int, message string) *APIError {
	switch {
	case status == http.StatusUnauthorized:
		return InvalidAPIKey(message)
	case status == http.StatusForbidden:
		return PermissionDenied(message)
	case status == http.StatusNotFound:
		return NotFound(message, "", "")
	case status == http.StatusTooManyRequests:
		return RateLimited(message, false, 1)
	case status >= 500:
		return Server(status, message, "")
	}
	return &APIError{Status: status, Err: Error{Message: message, Type: TypeInvalidRequest}}
}
