package handlers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// cutOnceProvider is an OpenAI-compatible chat completions server speaking the streaming
// protocol byte for byte: the first request of a conversation streams cutWords words and then
// an error object (a server_error, which is retried); every later one streams answerWords words
// and ends.
func cutOnceProvider(t *testing.T, cutWords, answerWords int) *httptest.Server {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Messages []struct{ Content string } `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || len(req.Messages) == 0 {
			http.Error(w, `{"error":{"message":"bad request","type":"invalid_request_error","param":null,"code":null}}`, http.StatusBadRequest)
			return
		}
		key := req.Messages[len(req.Messages)-1].Content
		mu.Lock()
		first := !seen[key]
		seen[key] = true
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		frame := func(data string) {
			fmt.Fprintf(w, "data: %s\n\n", data)
			w.(http.Flusher).Flush()
		}
		const head = `{"id":"chatcmpl-C1","object":"chat.completion.chunk","created":1741000000,"model":"m","system_fingerprint":"fp_1","choices":`
		frame(head + `[{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}`)
		words := answerWords
		if first {
			words = cutWords
		}
		for range words {
			frame(head + `[{"index":0,"delta":{"content":"word "},"logprobs":null,"finish_reason":null}],"usage":null}`)
		}
		if first {
			frame(`{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}`)
			return
		}
		frame(head + `[{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}`)
		frame(head + fmt.Sprintf(`[],"usage":{"prompt_tokens":4,"completion_tokens":%d,"total_tokens":%d}}`, answerWords, 4+answerWords))
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestFrontDoorFinishReasonIsTheAnswers: whether an answer reached its max_tokens is read from
// the attempt that answered, not from the sum of the job's attempts. The first attempt of each
// call is cut after more words than the bound, the retry answers in fewer: a waiting chat
// completion, a response and a batch's line each say the answer ended by itself, while the
// usage still counts both attempts. (A streamed call has shown the cut attempt's words already
// and ends with an error event, so it has no finish of its own to judge.)
func TestFrontDoorFinishReasonIsTheAnswers(t *testing.T) {
	const cutWords, answerWords, bound = 20, 3, 16
	up := cutOnceProvider(t, cutWords, answerWords)
	p, err := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: up.URL + "/v1", Model: "m", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	cfg := frontDoorConfig(t)
	cfg.Provider = p
	frontDoor := cfg.Jobs
	cfg.Jobs = func(jc *jobs.Config) {
		frontDoor(jc)
		jc.Wait = jobstest.FastWait
	}
	f := startLiveServerWith(t, cfg)
	u := f.user(t, "fr-a", "fr-member", identity.RoleMember)
	client := f.sdkClient(u.Tok)
	ctx := context.Background()
	attempts := func(jobID string) int {
		t.Helper()
		var n int
		if err := f.DB.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_attempt WHERE job_id = ?", jobID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}

	var httpResp *http.Response
	chat, err := client.Chat.Completions.New(ctx, sdk.ChatCompletionNewParams{
		Messages: []sdk.ChatCompletionMessageParamUnion{sdk.UserMessage("a plain chat")}, MaxTokens: sdk.Int(bound),
	}, option.WithResponseInto(&httpResp))
	if err != nil {
		t.Fatal(err)
	}
	if n := attempts(httpResp.Header.Get(jobIDHeader)); n != 2 {
		t.Fatalf("%d attempts, want the cut one and the answer", n)
	}
	if got := chat.Choices[0].FinishReason; got != "stop" || strings.Count(chat.Choices[0].Message.Content, "word") != answerWords {
		t.Errorf("chat: finish %q, answer %q; want stop and the retry's %d words", got, chat.Choices[0].Message.Content, answerWords)
	}
	if chat.Usage.CompletionTokens != cutWords+answerWords {
		t.Errorf("chat usage %+v, want both attempts' %d output tokens", chat.Usage, cutWords+answerWords)
	}

	resp, err := client.Responses.New(ctx, responses.ResponseNewParams{Input: textInput("a response"), MaxOutputTokens: sdk.Int(bound)})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Status != responses.ResponseStatusCompleted || resp.Usage.OutputTokens != cutWords+answerWords {
		t.Errorf("response: status %q, output tokens %d; want completed and %d", resp.Status, resp.Usage.OutputTokens, cutWords+answerWords)
	}

	line, _ := json.Marshal(map[string]any{"custom_id": "b", "method": "POST", "url": "/v1/chat/completions",
		"body": map[string]any{"messages": []map[string]string{{"role": "user", "content": "a batch line"}}, "max_tokens": bound}})
	in := uploadBatchFile(t, client, string(line)+"\n")
	b, err := client.Batches.New(ctx, sdk.BatchNewParams{InputFileID: in.ID, Endpoint: sdk.BatchNewParamsEndpointV1ChatCompletions,
		CompletionWindow: sdk.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatal(err)
	}
	done := awaitBatch(t, client, b.ID, sdk.BatchStatusCompleted)
	outs := fileLines(t, client, done.OutputFileID)
	if len(outs) != 1 {
		t.Fatalf("%d output lines, want 1", len(outs))
	}
	r, _ := outs[0]["response"].(map[string]any)
	var body sdk.ChatCompletion
	raw, _ := json.Marshal(r["body"])
	if err := json.Unmarshal(raw, &body); err != nil || len(body.Choices) != 1 {
		t.Fatalf("output line %v (%v)", outs[0], err)
	}
	if body.Choices[0].FinishReason != "stop" || body.Usage.CompletionTokens != cutWords+answerWords {
		t.Errorf("batch line: finish %q, output tokens %d; want stop and %d", body.Choices[0].FinishReason,
			body.Usage.CompletionTokens, cutWords+answerWords)
	}
}
