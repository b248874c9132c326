package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"asterion/identity"
)

// responseFrame is one event of a streamed response as read off the wire.
type responseFrame struct {
	raw, event string
	data       struct {
		Type           string  `json:"type"`
		SequenceNumber *int    `json:"sequence_number"`
		Delta          *string `json:"delta"`
	}
}

// responseFrames splits a streamed response's body into its events, each exactly an "event: "
// line naming the type the data holds, one "data: " line and a blank line.
func responseFrames(t *testing.T, body string) []responseFrame {
	t.Helper()
	if !strings.HasSuffix(body, "\n\n") {
		t.Fatalf("the stream does not end with a blank line: %q", body)
	}
	var out []responseFrame
	for i, raw := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		lines := strings.Split(raw, "\n")
		if len(lines) != 2 || !strings.HasPrefix(lines[0], "event: ") || !strings.HasPrefix(lines[1], "data: ") {
			t.Fatalf("frame %d is not one event line and one data line: %q", i, raw)
		}
		fr := responseFrame{raw: raw, event: strings.TrimPrefix(lines[0], "event: ")}
		if err := json.Unmarshal([]byte(strings.TrimPrefix(lines[1], "data: ")), &fr.data); err != nil {
			t.Fatalf("frame %d: %q (%v)", i, raw, err)
		}
		if fr.data.Type != fr.event || fr.data.SequenceNumber == nil {
			t.Fatalf("frame %d: event %q, data of type %q with sequence_number %v", i, fr.event, fr.data.Type, fr.data.SequenceNumber)
		}
		out = append(out, fr)
	}
	return out
}

// TestResponsesStreamFrames reads a streamed response byte for byte: text/event-stream with the
// job's id in a header, the events in OpenAI's order numbered 0, 1, 2, ..., one delta a chunk
// of the job's output; and a replay from after any event N of the finished job is, byte for
// byte, the original's events after N.
func TestResponsesStreamFrames(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "rs-a", "rs-bytes", identity.RoleMember)
	r := f.do(t, "POST", "/v1/responses", u.Tok, map[string]any{"stream": true, "input": "#sim:latency=300ms #sim:tokens=5",
		"instructions": "be brief", "metadata": map[string]string{"k": "v"}, "some_future_field": []int{1}})
	jobID := r.Header.Get(jobIDHeader)
	if r.StatusCode != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/event-stream") || jobID == "" {
		t.Fatalf("answer %d, Content-Type %q, %s %q: %s", r.StatusCode, r.Header.Get("Content-Type"), jobIDHeader, jobID, r.Body)
	}
	frames := responseFrames(t, string(r.Body))
	var chunks int
	if err := f.DB.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM sa_job_output o JOIN sa_job j ON j.id = o.job_id AND j.attempt = o.attempt WHERE j.id = ?",
		jobID).Scan(&chunks); err != nil {
		t.Fatal(err)
	}
	var want []string
	want = append(want, "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added")
	for range chunks {
		want = append(want, "response.output_text.delta")
	}
	want = append(want, "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed")
	var types []string
	var text strings.Builder
	for i, fr := range frames {
		types = append(types, fr.event)
		if *fr.data.SequenceNumber != i {
			t.Errorf("frame %d has sequence_number %d", i, *fr.data.SequenceNumber)
		}
		if fr.data.Delta != nil {
			text.WriteString(*fr.data.Delta)
		}
	}
	if strings.Join(types, " ") != strings.Join(want, " ") || chunks == 0 {
		t.Fatalf("events %v, want %v (%d chunks)", types, want, chunks)
	}
	if resp := f.responseText(t, u, jobID); text.String() != resp {
		t.Errorf("deltas %q, want the job's response %q", text.String(), resp)
	}
	last := frames[len(frames)-1].raw
	for _, part := range []string{`"status":"completed"`, `"metadata":{"k":"v"}`, `"instructions":"be brief"`, `"annotations":[]`,
		`"usage":{"input_tokens":`} {
		if !strings.Contains(last, part) {
			t.Errorf("response.completed lacks %s: %s", part, last)
		}
	}

	id := "resp_" + strings.ReplaceAll(jobID, "-", "")
	for _, after := range []int{3, 4, len(frames) - 2} {
		g := f.do(t, "GET", "/v1/responses/"+id+"?stream=true&starting_after="+strconv.Itoa(after), u.Tok, nil)
		if g.StatusCode != 200 {
			t.Fatalf("replay after %d: %s", after, g)
		}
		replayed := responseFrames(t, string(g.Body))
		if len(replayed) != len(frames)-after-1 {
			t.Fatalf("replay after %d: %d events, want %d", after, len(replayed), len(frames)-after-1)
		}
		for i, fr := range replayed {
			if fr.raw != frames[after+1+i].raw {
				t.Errorf("replay after %d, event %d:\n%s\nwant\n%s", after, i, fr.raw, frames[after+1+i].raw)
			}
		}
	}
	if g := f.do(t, "GET", "/v1/responses/"+id+"?stream=true&starting_after=soon", u.Tok, nil); g.StatusCode != http.StatusBadRequest ||
		!strings.Contains(string(g.Body), `"param":"starting_after"`) {
		t.Errorf("a malformed starting_after: %s", g)
	}
	if g := f.do(t, "GET", "/v1/responses/"+id, u.Tok, nil); g.StatusCode != 200 || !strings.Contains(string(g.Body), `"object":"response"`) {
		t.Errorf("GET without stream: %s", g)
	}
	for _, body := range []string{`{"input": [`, `[1]`, ``, `{"input":"x","background":"yes"}`} {
		if g := f.do(t, "POST", "/v1/responses", u.Tok, body); g.StatusCode != 400 || !strings.Contains(string(g.Body), `"type":"invalid_request_error"`) {
			t.Errorf("body %q: %s", body, g)
		}
	}
}

// TestResponsesStreamEnds: a stream ends with the event of its response's final status, after
// the same numbered events as any other: a failed job's with response.failed, a cancelled
// background response's (read back by GET) with response.cancelled.
func TestResponsesStreamEnds(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, frontDoorConfig(t))
	u := f.user(t, "rs-a", "rs-ends", identity.RoleMember)
	want := func(end string) string {
		return "response.created response.in_progress response.output_item.added response.content_part.added " +
			"response.output_text.done response.content_part.done response.output_item.done " + end
	}
	check := func(what string, r liveResp, end string) {
		t.Helper()
		if r.StatusCode != 200 {
			t.Fatalf("%s: %s", what, r)
		}
		var types []string
		for i, fr := range responseFrames(t, string(r.Body)) {
			types = append(types, fr.event)
			if *fr.data.SequenceNumber != i {
				t.Errorf("%s: frame %d numbered %d", what, i, *fr.data.SequenceNumber)
			}
		}
		if strings.Join(types, " ") != want(end) {
			t.Errorf("%s: events %v, want %s", what, types, want(end))
		}
	}
	failed := f.do(t, "POST", "/v1/responses", u.Tok, map[string]any{"stream": true, "input": "#sim:fail=provider_4xx"})
	check("a failed job", failed, "response.failed")
	if !strings.Contains(string(failed.Body), `"error":{"code":"provider_4xx"`) {
		t.Errorf("response.failed without the job's error: %s", failed.Body)
	}

	bg := mustDecode[struct {
		ID string `json:"id"`
	}](t, f.do(t, "POST", "/v1/responses", u.Tok, map[string]any{"background": true, "input": "#sim:hang"}).Body)
	if r := f.do(t, "POST", "/v1/responses/"+bg.ID+"/cancel", u.Tok, nil); r.StatusCode != 200 ||
		!strings.Contains(string(r.Body), `"status":"cancelled"`) {
		t.Fatalf("cancel: %s", r)
	}
	check("a cancelled response", f.do(t, "GET", "/v1/responses/"+bg.ID+"?stream=true", u.Tok, nil), "response.cancelled")
}
