package openai

import (
	"bufio"
	"bytes"
	"testing"
)

// TestFrames: every event is exactly "data: " + one line of JSON + a blank line, a line break
// inside the text is escaped (never a raw one that would end the data line), and the stream
// ends with "data: [DONE]".
func TestFrames(t *testing.T) {
	var b bytes.Buffer
	w := bufio.NewWriter(&b)
	s := ChunkStream{ID: "chatcmpl-1", Created: 7, Model: "m"}
	if err := WriteEvent(w, s.Content("two\nlines\r\n")); err != nil {
		t.Fatal(err)
	}
	if err := WriteDone(w); err != nil {
		t.Fatal(err)
	}
	if err := WriteError(w, Server(500, "it broke", "unknown")); err != nil {
		t.Fatal(err)
	}
	_ = w.Flush()
	want := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m","service_tier":"default",` +
		`"system_fingerprint":null,"choices":[{"index":0,"delta":{"content":"two\nlines\r\n"},"logprobs":null,"finish_reason":null}]}` +
		"\n\n" + "data: [DONE]\n\n" +
		`data: {"error":{"message":"it broke","type":"server_error","param":null,"code":"unknown"}}` + "\n\n"
	if b.String() != want {
		t.Errorf("frames\n%q\nwant\n%q", b.String(), want)
	}
}

// TestChunkShapes: the first chunk opens the assistant's message with an empty content, the
// finish chunk has an empty delta, and the usage chunk has no choices; in a stream that asked
// for usage every chunk before it carries "usage": null, in one that did not none has the field.
func TestChunkShapes(t *testing.T) {
	s := ChunkStream{ID: "c", Created: 1, Model: "m"}
	u := ChunkStream{ID: "c", Created: 1, Model: "m", IncludeUsage: true}
	for _, tc := range []struct {
		name string
		c    Chunk
		want string
	}{
		{"first", s.First(), `"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}`},
		{"finish", s.Finish("length"), `"choices":[{"index":0,"delta":{},"logprobs":null,"finish_reason":"length"}]}`},
		{"first, usage asked", u.First(), `"finish_reason":null}],"usage":null}`},
		{"finish, usage asked", u.Finish("stop"), `"finish_reason":"stop"}],"usage":null}`},
		{"usage", u.Usage(NewUsage(3, 4)), `"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}`},
	} {
		var b bytes.Buffer
		w := bufio.NewWriter(&b)
		_ = WriteEvent(w, tc.c)
		_ = w.Flush()
		if !bytes.HasSuffix(b.Bytes(), []byte(tc.want+"\n\n")) {
			t.Errorf("%s chunk %s, want it to end %s", tc.name, b.String(), tc.want)
		}
	}
}
