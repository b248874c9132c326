package provider

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// The frames below are byte for byte what OpenAI's chat completions API sends for a streamed
// answer with stream_options.include_usage: every chunk carries "usage":null until the last,
// whose choices are empty.
const (
	chunkRole  = `data: {"id":"chatcmpl-S1","object":"chat.completion.chunk","created":1741000000,"model":"gpt-test-2025-01-01","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
	chunkFinal = `data: {"id":"chatcmpl-S1","object":"chat.completion.chunk","created":1741000000,"model":"gpt-test-2025-01-01","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n"
	chunkUsage = `data: {"id":"chatcmpl-S1","object":"chat.completion.chunk","created":1741000000,"model":"gpt-test-2025-01-01","system_fingerprint":"fp_1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}}` + "\n\n"
	frameDone  = "data: [DONE]\n\n"
	keepAlive  = ": keep-alive\n\n"
)

// chunkText is a content chunk carrying text (JSON-escaped by the caller when needed).
func chunkText(text string) string {
	return `data: {"id":"chatcmpl-S1","object":"chat.completion.chunk","created":1741000000,"model":"gpt-test-2025-01-01","system_fingerprint":"fp_1","choices":[{"index":0,"delta":{"content":"` + text + `"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n"
}

// streamFrames answers 200 with an event stream of frames, flushing after each, then calls
// after (which may stall) before closing.
func streamFrames(frames []string, after func(*http.Request), headers ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
		for i := 0; i+1 < len(headers); i += 2 {
			w.Header().Set(headers[i], headers[i+1])
		}
		w.WriteHeader(http.StatusOK)
		for _, f := range frames {
			_, _ = io.WriteString(w, f)
			w.(http.Flusher).Flush()
		}
		if after != nil {
			after(r)
		}
	}
}

// pieces collects what a provider passes to Request.Output.
type pieces struct {
	mu  sync.Mutex
	got []string
}

func (p *pieces) add(s string) {
	p.mu.Lock()
	p.got = append(p.got, s)
	p.mu.Unlock()
}

func (p *pieces) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.got...)
}

func TestOpenAIStream(t *testing.T) {
	t.Parallel()
	full := []string{chunkRole, chunkText("Forty"), keepAlive, chunkText("-two"), chunkText(`.\n\"ok\"`), chunkFinal, chunkUsage, frameDone}
	crlf := make([]string, len(full))
	for i, f := range full {
		crlf[i] = strings.ReplaceAll(f, "\n", "\r\n")
	}
	limits := []string{"x-ratelimit-limit-requests", "500", "x-ratelimit-remaining-requests", "499",
		"x-ratelimit-reset-requests", "120ms", "x-ratelimit-limit-tokens", "30000", "x-ratelimit-remaining-tokens", "29987",
		"x-ratelimit-reset-tokens", "6m0s", "x-request-id", "req-S1"}
	wantLimits := Limits{LimitRequests: 500, HasLimitRequests: true, LimitTokens: 30000, HasLimitTokens: true,
		RemainingRequests: 499, HasRemainingRequests: true, RemainingTokens: 29987, HasRemainingTokens: true,
		ResetRequests: 120 * time.Millisecond, ResetTokens: 6 * time.Minute}
	tests := []struct {
		name       string
		frames     []string
		headers    []string
		want       Response
		wantPieces []string
	}{
		{name: "chunks, keep-alive, usage and done", frames: full, headers: limits,
			want: Response{Text: "Forty-two.\n\"ok\"", RequestID: "chatcmpl-S1", Provider: "openai", Model: "gpt-test-2025-01-01",
				PromptTokens: 9, CompletionTokens: 4, Limits: wantLimits},
			wantPieces: []string{"Forty", "-two", ".\n\"ok\""}},
		{name: "CRLF line ends", frames: crlf,
			want: Response{Text: "Forty-two.\n\"ok\"", RequestID: "chatcmpl-S1", Provider: "openai", Model: "gpt-test-2025-01-01",
				PromptTokens: 9, CompletionTokens: 4},
			wantPieces: []string{"Forty", "-two", ".\n\"ok\""}},
		{name: "no usage chunk: counts estimated", frames: []string{chunkText("Hi"), chunkText(" there"), chunkFinal, frameDone},
			want: Response{Text: "Hi there", RequestID: "chatcmpl-S1", Provider: "openai", Model: "gpt-test-2025-01-01",
				PromptTokens: EstimateTokens("twelve bytes"), CompletionTokens: 2},
			wantPieces: []string{"Hi", " there"}},
		{name: "finished choice, closed without done", frames: []string{chunkText("Bye"), chunkFinal, chunkUsage},
			want: Response{Text: "Bye", RequestID: "chatcmpl-S1", Provider: "openai", Model: "gpt-test-2025-01-01",
				PromptTokens: 9, CompletionTokens: 4},
			wantPieces: []string{"Bye"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newChatServer(t, streamFrames(tt.frames, nil, tt.headers...))
			o := newTestOpenAI(t, srv.URL, 5*time.Second)
			var got pieces
			resp, err := o.Complete(context.Background(), Request{Text: "twelve bytes", Output: got.add})
			if err != nil {
				t.Fatalf("Complete: %v", err)
			}
			if resp != tt.want {
				t.Errorf("Complete =\n %+v, want\n %+v", resp, tt.want)
			}
			if p := got.all(); strings.Join(p, "|") != strings.Join(tt.wantPieces, "|") {
				t.Errorf("pieces %q, want %q", p, tt.wantPieces)
			}
		})
	}
}

func TestOpenAIStreamFailures(t *testing.T) {
	t.Parallel()
	serverError := `data: {"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}` + "\n\n"
	rateError := `data: {"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}` + "\n\n"
	tests := []struct {
		name        string
		frames      []string
		after       func(*http.Request)
		stall       time.Duration
		wantKind    ErrorKind
		wantPartial Partial
		wantInMsg   string
	}{
		{name: "error object mid-stream", frames: []string{chunkRole, chunkText("Half"), serverError},
			wantKind: KindProvider5xx, wantInMsg: "The server had an error",
			wantPartial: Partial{Text: "Half", PromptTokens: EstimateTokens("a prompt"), CompletionTokens: 1}},
		{name: "rate limit error object", frames: []string{rateError}, wantKind: KindRateLimit, wantInMsg: "Rate limit reached",
			wantPartial: Partial{PromptTokens: EstimateTokens("a prompt")}},
		{name: "cut mid-way", frames: []string{chunkText("One"), chunkText(" two")},
			wantKind: KindUnknown, wantInMsg: "ended before the answer",
			wantPartial: Partial{Text: "One two", PromptTokens: EstimateTokens("a prompt"), CompletionTokens: 2}},
		{name: "cut mid-frame", frames: []string{chunkText("One"), `data: {"id":"chatcmpl-S1","choi`},
			wantKind: KindUnknown, wantInMsg: "ended before the answer",
			wantPartial: Partial{Text: "One", PromptTokens: EstimateTokens("a prompt"), CompletionTokens: 1}},
		{name: "malformed chunk", frames: []string{chunkText("One"), "data: {not json}\n\n"},
			wantKind: KindParse, wantInMsg: "not JSON",
			wantPartial: Partial{Text: "One", PromptTokens: EstimateTokens("a prompt"), CompletionTokens: 1}},
		{name: "stall after a chunk", frames: []string{chunkText("Wait")}, after: stall, stall: 300 * time.Millisecond,
			wantKind: KindTimeout, wantInMsg: "stalled",
			wantPartial: Partial{Text: "Wait", PromptTokens: EstimateTokens("a prompt"), CompletionTokens: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := newChatServer(t, streamFrames(tt.frames, tt.after))
			o, err := NewOpenAI(OpenAIConfig{BaseURL: srv.URL + "/v1", APIKey: testAPIKey, Model: "gpt-test",
				Timeout: 10 * time.Second, StallTimeout: tt.stall})
			if err != nil {
				t.Fatal(err)
			}
			var got pieces
			_, err = o.Complete(context.Background(), Request{Text: "a prompt", Output: got.add})
			pe := Classify(err)
			if pe == nil {
				t.Fatal("Complete succeeded")
			}
			if pe.Kind != tt.wantKind || pe.StatusCode != 200 || !strings.Contains(pe.Message, tt.wantInMsg) {
				t.Errorf("kind %q status %d message %q, want %q 200 containing %q", pe.Kind, pe.StatusCode, pe.Message, tt.wantKind, tt.wantInMsg)
			}
			if pe.Partial != tt.wantPartial {
				t.Errorf("Partial = %+v, want %+v", pe.Partial, tt.wantPartial)
			}
			if strings.Join(got.all(), "") != tt.wantPartial.Text {
				t.Errorf("pieces %q, want them to make %q", got.all(), tt.wantPartial.Text)
			}
		})
	}
}

// TestOpenAIStreamCancelClosesRequest cancels a call while its answer streams and checks that
// the provider sees its request end (the cancel, not the stream's end, closes it), and that the
// call reports a cancellation with what had arrived.
func TestOpenAIStreamCancelClosesRequest(t *testing.T) {
	t.Parallel()
	requestEnded := make(chan time.Time, 1)
	srv := newChatServer(t, streamFrames([]string{chunkRole, chunkText("Partial")}, func(r *http.Request) {
		select {
		case <-r.Context().Done():
			requestEnded <- time.Now()
		case <-time.After(time.Minute):
		}
	}))
	o := newTestOpenAI(t, srv.URL, time.Minute)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := o.Complete(ctx, Request{Text: "a prompt", Output: func(string) { cancel() }})
	if !IsCanceled(err) {
		t.Fatalf("Complete = %v, want a cancellation", err)
	}
	if pe := Classify(err); pe.Partial.Text != "Partial" || pe.Partial.CompletionTokens != 1 {
		t.Errorf("Partial = %+v, want the text that arrived", pe.Partial)
	}
	// The handler reports only a request whose client went away (its own wait is a minute and
	// reports nothing), so a report is the cancel reaching the provider.
	select {
	case <-requestEnded:
	case <-time.After(20 * time.Second):
		t.Fatal("the provider never saw its request end")
	}
}

func TestOpenAIJSONAnswerIsOnePiece(t *testing.T) {
	t.Parallel()
	srv := newChatServer(t, reply(200, successBody, "x-ratelimit-remaining-requests", "7"))
	o := newTestOpenAI(t, srv.URL, time.Second)
	var got pieces
	resp, err := o.Complete(context.Background(), Request{Text: "q", Output: got.add})
	if err != nil {
		t.Fatal(err)
	}
	if p := got.all(); len(p) != 1 || p[0] != "Forty-two." || resp.Text != "Forty-two." {
		t.Errorf("pieces %q, text %q", p, resp.Text)
	}
	if !resp.Limits.HasRemainingRequests || resp.Limits.RemainingRequests != 7 {
		t.Errorf("Limits = %+v", resp.Limits)
	}
}

func TestOpenAIStatusErrorCarriesLimits(t *testing.T) {
	t.Parallel()
	srv := newChatServer(t, reply(429, `{"error":{"message":"slow down"}}`, "Retry-After", "3",
		"x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "2.5"))
	o := newTestOpenAI(t, srv.URL, time.Second)
	_, err := o.Complete(context.Background(), Request{Text: "q"})
	var pe *Error
	if !errors.As(err, &pe) || pe.Kind != KindRateLimit {
		t.Fatalf("err = %v", err)
	}
	if !pe.Limits.HasRemainingRequests || pe.Limits.RemainingRequests != 0 || pe.Limits.ResetRequests != 2500*time.Millisecond {
		t.Errorf("Limits = %+v", pe.Limits)
	}
}

func TestParseLimits(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		headers map[string]string
		want    Limits
	}{
		{"none", nil, Limits{}},
		{"requests only", map[string]string{"X-Ratelimit-Remaining-Requests": "12", "X-Ratelimit-Reset-Requests": "1s"},
			Limits{RemainingRequests: 12, HasRemainingRequests: true, ResetRequests: time.Second}},
		{"malformed figures stay unknown", map[string]string{"X-Ratelimit-Remaining-Tokens": "-3",
			"X-Ratelimit-Limit-Requests": "many", "X-Ratelimit-Reset-Tokens": "soon"}, Limits{}},
		{"fractional seconds reset", map[string]string{"X-Ratelimit-Remaining-Tokens": "0", "X-Ratelimit-Reset-Tokens": "0.25"},
			Limits{HasRemainingTokens: true, ResetTokens: 250 * time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			for k, v := range tt.headers {
				h.Set(k, v)
			}
			if got := ParseLimits(h); got != tt.want {
				t.Errorf("ParseLimits = %+v, want %+v", got, tt.want)
			}
			if got, want := ParseLimits(h).Known(), tt.want != (Limits{}); got != want {
				t.Errorf("Known = %v, want %v", got, want)
			}
		})
	}
}
