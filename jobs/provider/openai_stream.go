package provider

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// DefaultOpenAIStallTimeout is how long a streamed answer may go without a byte before the
// call is abandoned as a timeout, well inside the adapter timeout that bounds the whole call.
const DefaultOpenAIStallTimeout = 60 * time.Second

// maxStreamLine bounds one line of the event stream; a chunk is far smaller.
const maxStreamLine = 1 << 20

// errStalled is the cancel cause of a call whose stream went quiet for the stall timeout.
var errStalled = errors.New("stream stalled")

// streamOptions is the stream_options object of a streamed chat-completions request.
type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// streamChunk is one chat.completion.chunk of a streamed answer, or an error object sent in
// the stream in its place.
type streamChunk struct {
	ID      string `json:"id"`
	Model   string `json:"model"`
	Choices []struct {
		Index int `json:"index"`
		Delta struct {
			Content *string `json:"content"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage *chatUsage      `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// chatUsage is the usage object of a chat completion or of a stream's last chunk.
type chatUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}

// streamReader reads a chat-completions event stream: `data: {json}` frames separated by
// blank lines, comment lines (keep-alives) starting with a colon, and `data: [DONE]` at the
// end. It passes each content piece to the request's Output as it arrives.
type streamReader struct {
	o      *OpenAI
	req    Request
	resp   *http.Response
	model  string
	text   strings.Builder
	pieces int
	usage  *chatUsage
	id     string
	// finished is set once a choice reported its finish_reason.
	finished bool
	// read counts the bytes of the stream, bounded by maxResponseBytes.
	read int
}

// readStream reads a streamed 2xx answer to its end. touch is called whenever bytes arrive,
// so that the caller's stall watchdog sees the stream alive.
func (o *OpenAI) readStream(ctx context.Context, req Request, resp *http.Response, model string, touch func()) (Response, *Error) {
	sr := &streamReader{o: o, req: req, resp: resp, model: model}
	lines := &lineReader{br: bufio.NewReaderSize(resp.Body, 16<<10)}
	var data bytes.Buffer
	for {
		line, err := lines.next()
		if len(line) > 0 || err == nil {
			touch()
		}
		sr.read += len(line) + 1
		if sr.read > maxResponseBytes {
			return Response{}, sr.fail(&Error{Kind: KindParse, Message: fmt.Sprintf("streamed answer exceeds %d bytes", maxResponseBytes)})
		}
		if err != nil {
			return sr.ended(ctx, err)
		}
		switch {
		case len(line) == 0: // a blank line dispatches the event gathered so far
			if data.Len() == 0 {
				continue
			}
			done, e := sr.event(data.Bytes())
			data.Reset()
			if e != nil {
				return Response{}, sr.fail(e)
			}
			if done {
				return sr.response(), nil
			}
		case line[0] == ':': // a comment: the provider keeping the connection open
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			if string(field) == "data" {
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.Write(value)
			}
		}
	}
}

// lineReader splits an event stream into lines; a line ends at LF, CRLF or a lone CR, as
// the Server-Sent Events format allows.
type lineReader struct {
	br *bufio.Reader
	// skipLF is set after a CR, whose LF (if it follows) belongs to the same line end.
	skipLF bool
}

// next returns the next line without its end. A last line the stream cut before its end
// comes with io.ErrUnexpectedEOF.
func (lr *lineReader) next() ([]byte, error) {
	var line []byte
	for {
		b, err := lr.br.ReadByte()
		if err != nil {
			if len(line) > 0 && err == io.EOF {
				return line, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if lr.skipLF {
			lr.skipLF = false
			if b == '\n' {
				continue
			}
		}
		switch b {
		case '\n':
			return line, nil
		case '\r':
			lr.skipLF = true
			return line, nil
		}
		if len(line) >= maxStreamLine {
			return nil, fmt.Errorf("event stream line exceeds %d bytes", maxStreamLine)
		}
		line = append(line, b)
	}
}

// event handles one data payload; done is true after [DONE].
func (sr *streamReader) event(data []byte) (done bool, e *Error) {
	if string(bytes.TrimSpace(data)) == "[DONE]" {
		return true, nil
	}
	var ch streamChunk
	if err := json.Unmarshal(data, &ch); err != nil {
		return false, &Error{Kind: KindParse, Message: "stream chunk is not JSON", Err: err}
	}
	if len(ch.Error) > 0 && string(ch.Error) != "null" {
		return false, sr.streamError(data, ch.Error)
	}
	if ch.ID != "" {
		sr.id = ch.ID
	}
	if ch.Model != "" {
		sr.model = ch.Model
	}
	if ch.Usage != nil {
		sr.usage = ch.Usage
	}
	for _, c := range ch.Choices {
		if c.Index != 0 {
			continue
		}
		if c.Delta.Content != nil && *c.Delta.Content != "" {
			sr.text.WriteString(*c.Delta.Content)
			sr.pieces++
			sr.req.emit(*c.Delta.Content)
		}
		if c.FinishReason != nil && *c.FinishReason != "" {
			sr.finished = true
		}
	}
	return false, nil
}

// streamError classifies an error object sent in the stream instead of a chunk: the
// provider's failure after it had answered 200, so mostly its own (provider_5xx), a rate
// limit when it says so, and the caller's mistake when it calls the request invalid.
func (sr *streamReader) streamError(data []byte, raw json.RawMessage) *Error {
	var obj struct {
		Type string          `json:"type"`
		Code json.RawMessage `json:"code"`
	}
	_ = json.Unmarshal(raw, &obj)
	what := strings.ToLower(obj.Type + " " + string(obj.Code))
	kind := KindProvider5xx
	switch {
	case strings.Contains(what, "rate_limit"):
		kind = KindRateLimit
	case strings.Contains(what, "invalid_request"):
		kind = KindProvider4xx
	case strings.Contains(what, "authentication") || strings.Contains(what, "permission"):
		kind = KindAuth
	}
	msg := "error in the answer stream"
	if pm := providerMessage(data); pm != "" {
		msg += ": " + sr.o.clean(pm)
	}
	return &Error{Kind: kind, Message: msg}
}

// ended handles the end of the body before [DONE]: a cut connection, the caller's
// cancellation, a timeout or a stall. A stream whose choice had finished is complete even if
// the server closed it without [DONE], as some compatible servers do.
func (sr *streamReader) ended(ctx context.Context, err error) (Response, *Error) {
	if sr.finished && (errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)) {
		return sr.response(), nil
	}
	if errors.Is(context.Cause(ctx), errStalled) {
		return Response{}, sr.fail(&Error{Kind: KindTimeout,
			Message: fmt.Sprintf("answer stream stalled: no data for %s", sr.o.stall), Err: context.DeadlineExceeded})
	}
	if ctx.Err() != nil {
		return Response{}, sr.fail(contextError(ctx, "reading openai stream", err))
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return Response{}, sr.fail(&Error{Kind: KindUnknown, Message: "answer stream ended before the answer did", Err: io.ErrUnexpectedEOF})
	}
	return Response{}, sr.fail(contextError(ctx, "reading openai stream", err))
}

// fail adds the HTTP status, the rate-limit figures and what was produced so far to e.
func (sr *streamReader) fail(e *Error) *Error {
	e.StatusCode = sr.resp.StatusCode
	e.Limits = ParseLimits(sr.resp.Header)
	e.Partial = Partial{Text: sr.text.String(), PromptTokens: EstimateTokens(sr.req.Text), CompletionTokens: sr.pieces}
	if sr.usage != nil {
		e.Partial.PromptTokens, e.Partial.CompletionTokens = sr.usage.PromptTokens, sr.usage.CompletionTokens
	}
	return e
}

// response is the answer of a complete stream. Without a usage chunk (a server that ignores
// include_usage) the counts are estimated as for a cut stream.
func (sr *streamReader) response() Response {
	r := Response{Text: sr.text.String(), RequestID: sr.id, Provider: OpenAIName, Model: sr.model,
		Limits: ParseLimits(sr.resp.Header)}
	if r.RequestID == "" {
		r.RequestID = sr.resp.Header.Get("X-Request-Id")
	}
	if sr.usage != nil {
		r.PromptTokens, r.CompletionTokens = sr.usage.PromptTokens, sr.usage.CompletionTokens
	} else {
		r.PromptTokens, r.CompletionTokens = EstimateTokens(sr.req.Text), sr.pieces
	}
	return r
}

// EstimateTokens is a provider-neutral estimate of the tokens of text, for the usage of an
// attempt the provider did not count: about four bytes of English text a token, as OpenAI's
// guidance puts it, and at least one for non-empty text.
func EstimateTokens(text string) int {
	if text == "" {
		return 0
	}
	return (len(text) + 3) / 4
}
