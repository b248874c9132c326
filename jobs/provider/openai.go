package provider

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"
)

// OpenAIName is the Name of the OpenAI-compatible provider.
const OpenAIName = "openai"

// DefaultOpenAITimeout is the longest one OpenAI-compatible call may take by default.
const DefaultOpenAITimeout = 180 * time.Second

// maxResponseBytes bounds how much of a response body is read.
const maxResponseBytes = 4 << 20

// maxErrorMessageBytes bounds the provider's error message kept in
// Error.Message.
const maxErrorMessageBytes = 500

// OpenAIConfig configures the OpenAI-compatible chat-completions provider.
type OpenAIConfig struct {
	// BaseURL is the API root, an absolute http or https URL such as
	// "https://api.openai.com/v1"; requests go to BaseURL + "/chat/completions".
	BaseURL string
	// APIKey is sent as "Authorization: Bearer <key>" when not empty.
	APIKey string
	// Model is the default model; Request.Options.Model overrides it.
	Model string
	// Timeout bounds each call, from sending the request to reading the
	// whole response. Zero means DefaultOpenAITimeout.
	Timeout time.Duration
	// StallTimeout is how long a streamed answer may send nothing before the
	// call is abandoned as a timeout. Zero means DefaultOpenAIStallTimeout.
	StallTimeout time.Duration
	// HTTPClient sends the requests. Optional; nil means a client with no
	// timeout of its own over http.DefaultTransport.
	HTTPClient *http.Client
}

// OpenAI is a provider speaking the OpenAI chat-completions protocol. It is
// safe for concurrent use.
type OpenAI struct {
	endpoint string
	apiKey   string
	model    string
	timeout  time.Duration
	stall    time.Duration
	client   *http.Client
	now      func() time.Time
}

// NewOpenAI returns an OpenAI-compatible provider, or an error when BaseURL
// is not an absolute http or https URL, Model is empty, Timeout is
// negative, or APIKey holds characters a header cannot carry. No error
// contains the API key.
func NewOpenAI(cfg OpenAIConfig) (*OpenAI, error) {
	endpoint, err := chatCompletionsURL(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("openai provider: %w", err)
	}
	if strings.TrimSpace(cfg.Model) == "" {
		return nil, errors.New("openai provider: model is required")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("openai provider: timeout %s is negative", cfg.Timeout)
	}
	if cfg.StallTimeout < 0 {
		return nil, fmt.Errorf("openai provider: stall timeout %s is negative", cfg.StallTimeout)
	}
	for i := 0; i < len(cfg.APIKey); i++ {
		if c := cfg.APIKey[i]; c < 0x20 || c == 0x7f {
			return nil, errors.New("openai provider: API key contains control characters")
		}
	}
	o := &OpenAI{
		endpoint: endpoint,
		apiKey:   cfg.APIKey,
		model:    strings.TrimSpace(cfg.Model),
		timeout:  cfg.Timeout,
		stall:    cfg.StallTimeout,
		client:   cfg.HTTPClient,
		now:      time.Now,
	}
	if o.timeout == 0 {
		o.timeout = DefaultOpenAITimeout
	}
	if o.stall == 0 {
		o.stall = DefaultOpenAIStallTimeout
	}
	if o.client == nil {
		o.client = &http.Client{}
	}
	return o, nil
}

// chatCompletionsURL checks base and returns its chat-completions endpoint.
func chatCompletionsURL(base string) (string, error) {
	base = strings.TrimSpace(base)
	if base == "" {
		return "", errors.New("base URL is required")
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", errors.New("base URL is not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("base URL %q must use http or https", u.Redacted())
	}
	if u.Host == "" {
		return "", fmt.Errorf("base URL %q has no host", u.Redacted())
	}
	u.Fragment, u.RawFragment = "", ""
	return u.JoinPath("chat", "completions").String(), nil
}

// Name returns "openai".
func (o *OpenAI) Name() string { return OpenAIName }

// DefaultModel is the configured model, asked for when a prompt names none.
func (o *OpenAI) DefaultModel() string { return o.model }

// chatMessage is one message of a chat-completions request or response.
type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// chatRequest is the body of a chat-completions request.
type chatRequest struct {
	Model          string          `json:"model"`
	Messages       []chatMessage   `json:"messages"`
	MaxTokens      int             `json:"max_tokens,omitempty"`
	Temperature    *float64        `json:"temperature,omitempty"`
	ResponseFormat json.RawMessage `json:"response_format,omitempty"`
	Stream         bool            `json:"stream,omitempty"`
	StreamOptions  *streamOptions  `json:"stream_options,omitempty"`
}

// chatRequestOf is the chat-completions request of req for model: its conversation (or its text
// as one user message) with its output options.
func chatRequestOf(req Request, model string) chatRequest {
	msgs := []chatMessage{{Role: "user", Content: req.Text}}
	if len(req.Messages) > 0 {
		msgs = make([]chatMessage, len(req.Messages))
		for i, m := range req.Messages {
			msgs[i] = chatMessage(m)
		}
	}
	return chatRequest{Model: model, Messages: msgs, MaxTokens: req.Options.MaxTokens, Temperature: req.Options.Temperature,
		ResponseFormat: req.Options.ResponseFormat, Stream: true, StreamOptions: &streamOptions{IncludeUsage: true}}
}

// chatResponse is the part of a chat-completions response the provider reads.
type chatResponse struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage chatUsage `json:"usage"`
}

// Complete sends req.Messages (or req.Text as a single user message) with the prompt's
// max_tokens, temperature and response_format, asks for the answer as a
// stream and passes its pieces to req.Output as they arrive; it returns the
// first choice with the usage of the stream's last chunk. A server that
// answers with a plain JSON completion instead is read as one. The call,
// including reading the whole stream, is bounded by the configured Timeout,
// and a stream that sends nothing for the StallTimeout is abandoned.
// Failures are classified by kind: 429 is rate_limit
// (with Retry-After when the provider sent a valid one), 401 and 403 auth,
// other 4xx provider_4xx, 5xx provider_5xx, an unreadable 2xx body or chunk
// parse, a deadline or a stall timeout, an error object in the stream as it
// says (provider_5xx unless it names a rate limit, an invalid request or a
// credential), and a connection failure or a stream cut before its end
// unknown. A failure after output began carries it in Error.Partial.
func (o *OpenAI) Complete(ctx context.Context, req Request) (Response, error) {
	resp, e := o.complete(ctx, req)
	if e != nil {
		return Response{}, o.redact(e)
	}
	return resp, nil
}

// complete does the work of Complete; its errors still need redact.
func (o *OpenAI) complete(ctx context.Context, req Request) (Response, *Error) {
	model := req.Options.Model
	if model == "" {
		model = o.model
	}
	body, err := json.Marshal(chatRequestOf(req, model))
	if err != nil {
		return Response{}, &Error{Kind: KindUnknown, Message: "encoding request", Err: err}
	}
	timeoutCtx, cancelTimeout := context.WithTimeout(ctx, o.timeout)
	defer cancelTimeout()
	callCtx, cancel := context.WithCancelCause(timeoutCtx)
	defer cancel(nil)
	httpReq, err := http.NewRequestWithContext(callCtx, http.MethodPost, o.endpoint, bytes.NewReader(body))
	if err != nil {
		return Response{}, &Error{Kind: KindUnknown, Message: "building request", Err: err}
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "text/event-stream, application/json")
	// The provider's spans join the call's trace when it has one (see Traced).
	traceFormat.Inject(callCtx, propagation.HeaderCarrier(httpReq.Header))
	if o.apiKey != "" {
		httpReq.Header.Set("Authorization", "Bearer "+o.apiKey)
	}

	resp, err := o.client.Do(httpReq)
	if err != nil {
		return Response{}, contextError(callCtx, "openai request", err)
	}
	defer resp.Body.Close()

	code := resp.StatusCode
	if code >= 200 && code <= 299 && isEventStream(resp.Header.Get("Content-Type")) {
		watchdog := time.AfterFunc(o.stall, func() { cancel(errStalled) })
		defer watchdog.Stop()
		return o.readStream(callCtx, req, resp, model, func() { watchdog.Reset(o.stall) })
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		e := contextError(callCtx, "reading openai response", err)
		e.StatusCode = code
		e.Limits = ParseLimits(resp.Header)
		return Response{}, e
	}
	if code >= 200 && code <= 299 {
		r, e := o.parseSuccess(resp, data, model)
		if e == nil {
			req.emit(r.Text)
		}
		return r, e
	}
	e := o.statusError(resp, data)
	e.Limits = ParseLimits(resp.Header)
	return Response{}, e
}

// isEventStream reports whether a Content-Type is text/event-stream.
func isEventStream(contentType string) bool {
	mt, _, _ := strings.Cut(contentType, ";")
	return strings.EqualFold(strings.TrimSpace(mt), "text/event-stream")
}

// statusError classifies a non-2xx answer.
func (o *OpenAI) statusError(resp *http.Response, data []byte) *Error {
	code := resp.StatusCode
	switch {
	case code == http.StatusTooManyRequests:
		e := &Error{Kind: KindRateLimit, StatusCode: code, Message: o.errorMessage(code, data)}
		e.RetryAfter, e.HasRetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), o.now())
		return e
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return &Error{Kind: KindAuth, StatusCode: code, Message: o.errorMessage(code, data)}
	case code >= 400 && code <= 499:
		return &Error{Kind: KindProvider4xx, StatusCode: code, Message: o.errorMessage(code, data)}
	case code >= 500 && code <= 599:
		return &Error{Kind: KindProvider5xx, StatusCode: code, Message: o.errorMessage(code, data)}
	default:
		return &Error{Kind: KindUnknown, StatusCode: code, Message: "unexpected status: " + o.errorMessage(code, data)}
	}
}

// parseSuccess reads a 2xx chat-completions body.
func (o *OpenAI) parseSuccess(resp *http.Response, data []byte, model string) (Response, *Error) {
	code := resp.StatusCode
	if len(data) > maxResponseBytes {
		return Response{}, &Error{Kind: KindParse, StatusCode: code, Message: fmt.Sprintf("response body exceeds %d bytes", maxResponseBytes)}
	}
	var cr chatResponse
	if err := json.Unmarshal(data, &cr); err != nil {
		return Response{}, &Error{Kind: KindParse, StatusCode: code, Message: "response body is not a chat completion", Err: err}
	}
	if len(cr.Choices) == 0 {
		msg := "response has no choices"
		if pm := providerMessage(data); pm != "" {
			msg += ": " + o.clean(pm)
		}
		return Response{}, &Error{Kind: KindParse, StatusCode: code, Message: msg}
	}
	content := cr.Choices[0].Message.Content
	if content == nil {
		return Response{}, &Error{Kind: KindParse, StatusCode: code, Message: "first choice has no message content"}
	}
	id := cr.ID
	if id == "" {
		id = resp.Header.Get("X-Request-Id")
	}
	if cr.Model != "" {
		model = cr.Model
	}
	return Response{
		Text:             *content,
		RequestID:        id,
		Provider:         OpenAIName,
		Model:            model,
		PromptTokens:     cr.Usage.PromptTokens,
		CompletionTokens: cr.Usage.CompletionTokens,
		Limits:           ParseLimits(resp.Header),
	}, nil
}

// errorMessage is the message of a failed call: the provider's own message
// when the body has one, otherwise a short plain-text body, otherwise the
// status text. It never holds the API key and is at most 500 bytes.
func (o *OpenAI) errorMessage(code int, data []byte) string {
	if msg := providerMessage(data); msg != "" {
		return o.clean(msg)
	}
	text := strings.TrimSpace(string(data))
	if text != "" && !json.Valid(data) && !strings.HasPrefix(text, "<") {
		return o.clean(text)
	}
	if st := http.StatusText(code); st != "" {
		return st
	}
	return fmt.Sprintf("HTTP status %d", code)
}

// providerMessage extracts the message of an OpenAI-style error body,
// {"error":{"message":"…"}}, also accepting {"error":"…"} and
// {"message":"…"}. It returns "" when there is none.
func providerMessage(data []byte) string {
	var body struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
	}
	if json.Unmarshal(data, &body) != nil {
		return ""
	}
	if len(body.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(body.Error, &obj) == nil && obj.Message != "" {
			return obj.Message
		}
		var s string
		if json.Unmarshal(body.Error, &s) == nil && s != "" {
			return s
		}
	}
	return body.Message
}

// clean makes provider text fit for an error message: the API key
// replaced, white space collapsed, and at most 500 bytes.
func (o *OpenAI) clean(s string) string {
	s = o.redactString(s)
	s = strings.Join(strings.Fields(s), " ")
	return truncateUTF8(s, maxErrorMessageBytes)
}

// redactedKey replaces the API key wherever it would appear in an error.
const redactedKey = "[redacted]"

// redactString replaces every occurrence of the API key in s.
func (o *OpenAI) redactString(s string) string {
	if o.apiKey == "" {
		return s
	}
	return strings.ReplaceAll(s, o.apiKey, redactedKey)
}

// redact makes sure neither e.Message nor the text of e.Err holds the API
// key; the cause stays reachable through errors.Is and errors.As.
func (o *OpenAI) redact(e *Error) *Error {
	e.Message = o.redactString(e.Message)
	if e.Err != nil {
		if text := e.Err.Error(); o.apiKey != "" && strings.Contains(text, o.apiKey) {
			e.Err = &redactedError{err: e.Err, text: o.redactString(text)}
		}
	}
	return e
}

// redactedError hides the text of an error that held a secret while
// keeping the error itself in the chain.
type redactedError struct {
	err  error
	text string
}

// Error returns the redacted text.
func (r *redactedError) Error() string { return r.text }

// Unwrap returns the original error.
func (r *redactedError) Unwrap() error { return r.err }
