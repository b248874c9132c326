package provider

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testAPIKey is the key every OpenAI test uses; no error may contain it.
const testAPIKey = "sk-test-SECRET-4242-do-not-leak"

// capturedRequest is what the fake chat-completions server received.
type capturedRequest struct {
	Method, Path, Auth, ContentType, Accept string
	Body                                    chatRequest
	DecodeErr                               error
}

// chatServer is a fake OpenAI-compatible server: it records each request
// and answers with handler.
type chatServer struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []capturedRequest
}

func newChatServer(t *testing.T, handler http.HandlerFunc) *chatServer {
	t.Helper()
	cs := &chatServer{}
	cs.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := capturedRequest{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), ContentType: r.Header.Get("Content-Type"), Accept: r.Header.Get("Accept")}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		c.DecodeErr = dec.Decode(&c.Body)
		cs.mu.Lock()
		cs.reqs = append(cs.reqs, c)
		cs.mu.Unlock()
		handler(w, r)
	}))
	t.Cleanup(cs.Close)
	return cs
}

func (cs *chatServer) requests() []capturedRequest {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return append([]capturedRequest(nil), cs.reqs...)
}

// newTestOpenAI returns a provider talking to base with the test key.
func newTestOpenAI(t *testing.T, base string, timeout time.Duration) *OpenAI {
	t.Helper()
	return newTestOpenAIWithClient(t, base, timeout, nil)
}

// newTestOpenAIWithClient is newTestOpenAI sending through client (nil: the default).
func newTestOpenAIWithClient(t *testing.T, base string, timeout time.Duration, client *http.Client) *OpenAI {
	t.Helper()
	o, err := NewOpenAI(OpenAIConfig{BaseURL: base + "/v1", APIKey: testAPIKey, Model: "gpt-test", Timeout: timeout,
		HTTPClient: client})
	if err != nil {
		t.Fatalf("NewOpenAI: %v", err)
	}
	return o
}

// afterHeaders is a transport that calls then once a response's headers have arrived.
type afterHeaders struct {
	base http.RoundTripper
	then func()
}

func (a afterHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := a.base.RoundTrip(r)
	if err == nil {
		a.then()
	}
	return resp, err
}

// reply answers with status, headers and body.
func reply(status int, body string, headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}
}

const successBody = `{
  "id": "chatcmpl-abc123",
  "object": "chat.completion",
  "created": 1741000000,
  "model": "gpt-test-2025-01-01",
  "choices": [{"index": 0, "message": {"role": "assistant", "content": "Forty-two."}, "finish_reason": "stop"}],
  "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}
}`

func TestOpenAISuccess(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		options   Options
		wantModel string
	}{
		{"configured model", Options{}, "gpt-test"},
		{"model from options", Options{Model: "gpt-other", PreferProvider: "openai", Depth: 2}, "gpt-other"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newChatServer(t, reply(200, successBody))
			o := newTestOpenAI(t, srv.URL, time.Second)
			if o.Name() != "openai" {
				t.Errorf("Name() = %q", o.Name())
			}
			text := "What is the answer? #sim:hang is just text here"
			resp, err := o.Complete(context.Background(), Request{PromptID: "p", JobID: "j", Attempt: 1, Text: text, Options: tt.options})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			want := Response{Text: "Forty-two.", RequestID: "chatcmpl-abc123", Provider: "openai", Model: "gpt-test-2025-01-01", PromptTokens: 12, CompletionTokens: 3}
			if resp != want {
				t.Errorf("Complete =\n %+v, want\n %+v", resp, want)
			}
			reqs := srv.requests()
			if len(reqs) != 1 {
				t.Fatalf("server saw %d requests, want 1", len(reqs))
			}
			got := reqs[0]
			if got.Method != http.MethodPost || got.Path != "/v1/chat/completions" {
				t.Errorf("request %s %s, want POST /v1/chat/completions", got.Method, got.Path)
			}
			if got.Auth != "Bearer "+testAPIKey || got.ContentType != "application/json" || got.Accept != "text/event-stream, application/json" {
				t.Errorf("headers: Authorization %q, Content-Type %q, Accept %q", got.Auth, got.ContentType, got.Accept)
			}
			if got.DecodeErr != nil {
				t.Fatalf("request body: %v", got.DecodeErr)
			}
			wantBody := chatRequest{Model: tt.wantModel, Messages: []chatMessage{{Role: "user", Content: text}}}
			if got.Body.Model != wantBody.Model || len(got.Body.Messages) != 1 || got.Body.Messages[0] != wantBody.Messages[0] ||
				!got.Body.Stream || got.Body.StreamOptions == nil || !got.Body.StreamOptions.IncludeUsage {
				t.Errorf("request body %+v, want %+v", got.Body, wantBody)
			}
		})
	}
}

func TestOpenAISuccessFallbacks(t *testing.T) {
	t.Parallel()
	srv := newChatServer(t, reply(200, `{"choices":[{"message":{"content":""}}]}`, "X-Request-Id", "req-77"))
	o, err := NewOpenAI(OpenAIConfig{BaseURL: srv.URL, Model: "m"}) // no key, no path
	if err != nil {
		t.Fatal(err)
	}
	resp, err := o.Complete(context.Background(), Request{Text: "hi"})
	if err != nil {
		t.Fatalf("Complete: %v", err)
	}
	if resp != (Response{RequestID: "req-77", Provider: "openai", Model: "m"}) {
		t.Errorf("Complete = %+v", resp)
	}
	r := srv.requests()[0]
	if r.Auth != "" || r.Path != "/chat/completions" {
		t.Errorf("Authorization %q path %q, want none and /chat/completions", r.Auth, r.Path)
	}
}

func TestOpenAIErrorClassification(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	oaiErr := func(msg string) string {
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil}})
		return string(b)
	}
	tests := []struct {
		name          string
		handler       http.HandlerFunc
		wantKind      ErrorKind
		wantStatus    int
		wantRetry     time.Duration
		wantHasRetry  bool
		wantInMessage string
	}{
		{name: "429 retry-after seconds", handler: reply(429, oaiErr("Rate limit reached for requests"), "Retry-After", "7"),
			wantKind: KindRateLimit, wantStatus: 429, wantRetry: 7 * time.Second, wantHasRetry: true, wantInMessage: "Rate limit reached"},
		{name: "429 retry-after http-date", handler: reply(429, oaiErr("slow down"), "Retry-After", now.Add(2*time.Minute).Format(http.TimeFormat)),
			wantKind: KindRateLimit, wantStatus: 429, wantRetry: 2 * time.Minute, wantHasRetry: true, wantInMessage: "slow down"},
		{name: "429 without retry-after", handler: reply(429, oaiErr("slow down")),
			wantKind: KindRateLimit, wantStatus: 429, wantInMessage: "slow down"},
		{name: "429 invalid retry-after", handler: reply(429, "", "Retry-After", "soon"),
			wantKind: KindRateLimit, wantStatus: 429, wantInMessage: "Too Many Requests"},
		{name: "500", handler: reply(500, oaiErr("The server had an error while processing your request.")),
			wantKind: KindProvider5xx, wantStatus: 500, wantInMessage: "server had an error"},
		{name: "502 html", handler: reply(502, "<html><body>Bad gateway</body></html>", "Content-Type", "text/html"),
			wantKind: KindProvider5xx, wantStatus: 502, wantInMessage: "Bad Gateway"},
		{name: "503", handler: reply(503, `{"error":"overloaded"}`, "Retry-After", "3"),
			wantKind: KindProvider5xx, wantStatus: 503, wantInMessage: "overloaded"},
		{name: "401", handler: reply(401, oaiErr("Incorrect API key provided: "+testAPIKey+". You can find your API key at https://platform.openai.com/account/api-keys.")),
			wantKind: KindAuth, wantStatus: 401, wantInMessage: "Incorrect API key provided: [redacted]."},
		{name: "403", handler: reply(403, oaiErr("Project does not have access to model")),
			wantKind: KindAuth, wantStatus: 403, wantInMessage: "does not have access"},
		{name: "400 with error body", handler: reply(400, oaiErr("'messages' must contain at least one message")),
			wantKind: KindProvider4xx, wantStatus: 400, wantInMessage: "'messages' must contain"},
		{name: "404 plain text echoing the key", handler: reply(404, "no route for key "+testAPIKey, "Content-Type", "text/plain"),
			wantKind: KindProvider4xx, wantStatus: 404, wantInMessage: "no route for key [redacted]"},
		{name: "422 top-level message", handler: reply(422, `{"message":"bad field"}`),
			wantKind: KindProvider4xx, wantStatus: 422, wantInMessage: "bad field"},
		{name: "malformed body", handler: reply(200, `{"id": "x", "choices": [`),
			wantKind: KindParse, wantStatus: 200, wantInMessage: "not a chat completion"},
		{name: "not json", handler: reply(200, "hello", "Content-Type", "text/plain"),
			wantKind: KindParse, wantStatus: 200, wantInMessage: "not a chat completion"},
		{name: "wrong shape", handler: reply(200, `{"choices": {"message": "x"}}`),
			wantKind: KindParse, wantStatus: 200, wantInMessage: "not a chat completion"},
		{name: "empty choices", handler: reply(200, `{"id":"x","choices":[]}`),
			wantKind: KindParse, wantStatus: 200, wantInMessage: "no choices"},
		{name: "error inside 200", handler: reply(200, oaiErr("upstream exploded")),
			wantKind: KindParse, wantStatus: 200, wantInMessage: "no choices: upstream exploded"},
		{name: "null content", handler: reply(200, `{"choices":[{"message":{"role":"assistant","content":null}}]}`),
			wantKind: KindParse, wantStatus: 200, wantInMessage: "no message content"},
		{name: "body too large", handler: reply(200, `{"choices":[{"message":{"content":"`+strings.Repeat("a", maxResponseBytes)+`"}}]}`),
			wantKind: KindParse, wantStatus: 200, wantInMessage: "exceeds"},
		{name: "unexpected 1xx-3xx status", handler: reply(304, ""),
			wantKind: KindUnknown, wantStatus: 304, wantInMessage: "unexpected status"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newChatServer(t, tt.handler)
			o := newTestOpenAI(t, srv.URL, 5*time.Second)
			o.now = func() time.Time { return now }
			resp, err := o.Complete(context.Background(), Request{JobID: "j", Attempt: 1, Text: "hi"})
			if err == nil {
				t.Fatalf("Complete succeeded with %+v", resp)
			}
			var pe *Error
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not an *Error", err)
			}
			if pe.Kind != tt.wantKind || pe.StatusCode != tt.wantStatus {
				t.Errorf("kind %q status %d, want %q %d (err %v)", pe.Kind, pe.StatusCode, tt.wantKind, tt.wantStatus, err)
			}
			if pe.RetryAfter != tt.wantRetry || pe.HasRetryAfter != tt.wantHasRetry {
				t.Errorf("RetryAfter %v/%v, want %v/%v", pe.RetryAfter, pe.HasRetryAfter, tt.wantRetry, tt.wantHasRetry)
			}
			if !strings.Contains(pe.Message, tt.wantInMessage) {
				t.Errorf("Message %q does not contain %q", pe.Message, tt.wantInMessage)
			}
			if len(pe.Message) > maxErrorMessageBytes+len("unexpected status: ") {
				t.Errorf("Message is %d bytes", len(pe.Message))
			}
			if strings.Contains(err.Error(), testAPIKey) || strings.Contains(pe.Message, testAPIKey) {
				t.Errorf("error leaks the API key: %v", err)
			}
			if IsCanceled(err) {
				t.Errorf("IsCanceled is true for %v", err)
			}
		})
	}
}

func TestOpenAILongErrorMessageIsTruncated(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 2000) // 4000 bytes
	srv := newChatServer(t, reply(400, `{"error":{"message":"`+long+`"}}`))
	_, err := newTestOpenAI(t, srv.URL, 5*time.Second).Complete(context.Background(), Request{Text: "x"})
	pe := Classify(err)
	if pe.Kind != KindProvider4xx {
		t.Fatalf("kind %q", pe.Kind)
	}
	if len(pe.Message) > maxErrorMessageBytes || !strings.HasSuffix(pe.Message, "…") || !strings.HasPrefix(pe.Message, "éé") {
		t.Errorf("Message (%d bytes) not truncated to %d: %q…", len(pe.Message), maxErrorMessageBytes, pe.Message[:20])
	}
}

// stallsOutwaited counts the stalled handlers whose client never went away: each gave up
// after a minute instead. A client that honours its deadline or its caller's cancel leaves
// long before, so the count stays at zero; a test reads it instead of timing the call.
var stallsOutwaited atomic.Int64

// stall blocks a handler until the client goes away, or a minute has passed.
func stall(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-time.After(time.Minute):
		stallsOutwaited.Add(1)
	}
}

func TestOpenAITimeoutsAndCancellation(t *testing.T) {
	t.Parallel()
	slowBody := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","choices":[`)
		w.(http.Flusher).Flush()
		stall(r)
	}
	slowHeaders := func(_ http.ResponseWriter, r *http.Request) { stall(r) }
	tests := []struct {
		name         string
		handler      http.HandlerFunc
		timeout      time.Duration
		ctx          func() (context.Context, context.CancelFunc)
		wantKind     ErrorKind
		wantCanceled bool
		wantStatus   int
		// cancelOnHeaders cancels the call as soon as the response headers are in, so the
		// cancellation always lands while the body is being read, however slow the machine.
		cancelOnHeaders bool
	}{
		// A second leaves the headers (sent at once) time to arrive on a loaded machine.
		{name: "slow body past the timeout", handler: slowBody, timeout: time.Second,
			ctx: background, wantKind: KindTimeout, wantStatus: 200},
		{name: "slow headers past the timeout", handler: slowHeaders, timeout: 200 * time.Millisecond,
			ctx: background, wantKind: KindTimeout},
		{name: "caller deadline before the timeout", handler: slowHeaders, timeout: time.Minute,
			ctx: func() (context.Context, context.CancelFunc) {
				return context.WithTimeout(context.Background(), 150*time.Millisecond)
			}, wantKind: KindTimeout},
		{name: "caller cancels while waiting for headers", handler: slowHeaders, timeout: time.Minute,
			ctx: cancelAfter(100 * time.Millisecond), wantKind: KindUnknown, wantCanceled: true},
		{name: "caller cancels while reading the body", handler: slowBody, timeout: time.Minute,
			cancelOnHeaders: true, wantKind: KindUnknown, wantCanceled: true, wantStatus: 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newChatServer(t, tt.handler)
			o := newTestOpenAI(t, srv.URL, tt.timeout)
			var ctx context.Context
			var cancel context.CancelFunc
			if tt.cancelOnHeaders {
				ctx, cancel = context.WithCancel(context.Background())
				o = newTestOpenAIWithClient(t, srv.URL, tt.timeout,
					&http.Client{Transport: afterHeaders{base: http.DefaultTransport, then: cancel}})
			} else {
				ctx, cancel = tt.ctx()
			}
			defer cancel()
			_, err := o.Complete(ctx, Request{Text: "hi"})
			if n := stallsOutwaited.Load(); n != 0 {
				t.Errorf("%d stalled answers outwaited their client: Complete did not give up", n)
			}
			pe := Classify(err)
			if pe == nil {
				t.Fatal("Complete succeeded")
			}
			t.Logf("error: %v", err)
			if pe.Kind != tt.wantKind || IsCanceled(err) != tt.wantCanceled || pe.StatusCode != tt.wantStatus {
				t.Errorf("kind %q canceled %v status %d, want %q %v %d (err %v)",
					pe.Kind, IsCanceled(err), pe.StatusCode, tt.wantKind, tt.wantCanceled, tt.wantStatus, err)
			}
			if strings.Contains(err.Error(), testAPIKey) {
				t.Errorf("error leaks the API key: %v", err)
			}
		})
	}
}

func background() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

func cancelAfter(d time.Duration) func() (context.Context, context.CancelFunc) {
	return func() (context.Context, context.CancelFunc) {
		ctx, cancel := context.WithCancel(context.Background())
		time.AfterFunc(d, cancel)
		return ctx, cancel
	}
}

func TestOpenAIConnectionFailures(t *testing.T) {
	t.Parallel()
	t.Run("connection reset", func(t *testing.T) {
		t.Parallel()
		srv := newChatServer(t, func(w http.ResponseWriter, _ *http.Request) {
			conn, _, err := w.(http.Hijacker).Hijack()
			if err != nil {
				return
			}
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with RST
			}
			_ = conn.Close()
		})
		_, err := newTestOpenAI(t, srv.URL, 5*time.Second).Complete(context.Background(), Request{Text: "hi"})
		assertConnectionFailure(t, err)
	})
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := ln.Addr().String()
		_ = ln.Close()
		_, err = newTestOpenAI(t, "http://"+addr, 5*time.Second).Complete(context.Background(), Request{Text: "hi"})
		assertConnectionFailure(t, err)
	})
}

func assertConnectionFailure(t *testing.T, err error) {
	t.Helper()
	pe := Classify(err)
	if pe == nil {
		t.Fatal("Complete succeeded")
	}
	t.Logf("error: %v", err)
	if pe.Kind != KindUnknown || !pe.Retryable() || IsCanceled(err) || pe.StatusCode != 0 {
		t.Errorf("kind %q retryable %v canceled %v status %d, want a retryable unknown (err %v)", pe.Kind, pe.Retryable(), IsCanceled(err), pe.StatusCode, err)
	}
	if strings.Contains(err.Error(), testAPIKey) {
		t.Errorf("error leaks the API key: %v", err)
	}
}

func TestOpenAIRedactsKeyInCause(t *testing.T) {
	t.Parallel()
	o := &OpenAI{apiKey: testAPIKey}
	cause := errors.New("dial " + testAPIKey + ".example: no such host")
	e := o.redact(&Error{Kind: KindUnknown, Message: "saw " + testAPIKey, Err: cause})
	if strings.Contains(e.Error(), testAPIKey) {
		t.Errorf("redacted error still holds the key: %v", e)
	}
	if !errors.Is(e, cause) {
		t.Error("redaction hid the cause from errors.Is")
	}
}

func TestNewOpenAI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		cfg          OpenAIConfig
		wantErr      string
		wantEndpoint string
		wantTimeout  time.Duration
	}{
		{name: "valid", cfg: OpenAIConfig{BaseURL: "https://api.openai.com/v1", Model: "gpt-4o", APIKey: testAPIKey},
			wantEndpoint: "https://api.openai.com/v1/chat/completions", wantTimeout: 180 * time.Second},
		{name: "trailing slash and timeout", cfg: OpenAIConfig{BaseURL: "http://localhost:11434/v1/", Model: "llama", Timeout: 5 * time.Second},
			wantEndpoint: "http://localhost:11434/v1/chat/completions", wantTimeout: 5 * time.Second},
		{name: "query kept, fragment dropped", cfg: OpenAIConfig{BaseURL: "https://x.example/openai?api-version=2024-06-01#frag", Model: "m"},
			wantEndpoint: "https://x.example/openai/chat/completions?api-version=2024-06-01", wantTimeout: 180 * time.Second},
		{name: "empty base", cfg: OpenAIConfig{Model: "m"}, wantErr: "base URL is required"},
		{name: "relative base", cfg: OpenAIConfig{BaseURL: "/v1", Model: "m"}, wantErr: "http or https"},
		{name: "host without scheme", cfg: OpenAIConfig{BaseURL: "localhost:8080", Model: "m"}, wantErr: "http or https"},
		{name: "ftp base", cfg: OpenAIConfig{BaseURL: "ftp://x.example", Model: "m"}, wantErr: "http or https"},
		{name: "no host", cfg: OpenAIConfig{BaseURL: "http:///v1", Model: "m"}, wantErr: "no host"},
		{name: "unparsable base", cfg: OpenAIConfig{BaseURL: "http://[::1", Model: "m"}, wantErr: "not a valid URL"},
		{name: "password redacted", cfg: OpenAIConfig{BaseURL: "ftp://user:hunter2@x.example", Model: "m"}, wantErr: "user:xxxxx@"},
		{name: "no model", cfg: OpenAIConfig{BaseURL: "https://x.example", Model: " "}, wantErr: "model is required"},
		{name: "negative timeout", cfg: OpenAIConfig{BaseURL: "https://x.example", Model: "m", Timeout: -time.Second}, wantErr: "negative"},
		{name: "key with newline", cfg: OpenAIConfig{BaseURL: "https://x.example", Model: "m", APIKey: testAPIKey + "\n"}, wantErr: "control characters"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := NewOpenAI(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("NewOpenAI error %v, want one containing %q", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), testAPIKey) || strings.Contains(err.Error(), "hunter2") {
					t.Errorf("error leaks a secret: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("NewOpenAI: %v", err)
			}
			if o.endpoint != tt.wantEndpoint || o.timeout != tt.wantTimeout || o.client == nil {
				t.Errorf("endpoint %q timeout %v client %v, want %q %v", o.endpoint, o.timeout, o.client, tt.wantEndpoint, tt.wantTimeout)
			}
		})
	}
}

func TestOpenAIUsesGivenHTTPClient(t *testing.T) {
	t.Parallel()
	srv := newChatServer(t, reply(200, successBody))
	var used sync.WaitGroup
	used.Add(1)
	var once sync.Once
	client := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		once.Do(used.Done)
		return http.DefaultTransport.RoundTrip(r)
	})}
	o, err := NewOpenAI(OpenAIConfig{BaseURL: srv.URL, Model: "m", HTTPClient: client})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := o.Complete(context.Background(), Request{Text: "hi"}); err != nil {
		t.Fatalf("Complete: %v", err)
	}
	used.Wait()
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
