package handlers

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
)

func TestOutputFramesEncodeOnceAndMatchTheEvent(t *testing.T) {
	t.Parallel()
	f := newOutputFrames(2)
	at := time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC)
	c := db.OutputChunk{JobID: uuid.New(), PromptID: uuid.New(), Attempt: 1, Seq: 3, Text: "a \"quoted\"\nline\r\nand more", At: at}
	first, err := f.frame(c)
	if err != nil {
		t.Fatal(err)
	}
	body, ok := strings.CutPrefix(string(first), "event: job.output\ndata: ")
	if !ok || !strings.HasSuffix(body, "\n\n") || strings.Count(body, "\n") != 2 {
		t.Fatalf("frame %q is not one job.output event with one data line", first)
	}
	var got struct {
		PromptID uuid.UUID `json:"prompt_id"`
		JobID    uuid.UUID `json:"job_id"`
		Seq      int       `json:"seq"`
		Text     string    `json:"text"`
		At       time.Time `json:"at"`
	}
	if err := json.Unmarshal([]byte(strings.TrimSuffix(body, "\n\n")), &got); err != nil {
		t.Fatalf("data of %q: %v", first, err)
	}
	if got.PromptID != c.PromptID || got.JobID != c.JobID || got.Seq != c.Seq || got.Text != c.Text || !got.At.Equal(at) {
		t.Fatalf("decoded %+v, want the chunk %+v", got, c)
	}
	again, err := f.frame(c)
	if err != nil {
		t.Fatal(err)
	}
	if &again[0] != &first[0] {
		t.Fatal("the second stream's frame was encoded again, not shared")
	}
	// Another attempt's chunk of the same seq is another event.
	other := c
	other.Attempt, other.Text = 2, "retry"
	o, err := f.frame(other)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(o), `"text":"retry"`) {
		t.Fatalf("attempt 2's frame %q does not carry its own text", o)
	}
	// A third chunk evicts the oldest; its frame is encoded again, equal to the first.
	third := c
	third.Seq = 4
	if _, err := f.frame(third); err != nil {
		t.Fatal(err)
	}
	if len(f.frames) != 2 {
		t.Fatalf("cache holds %d frames, want at most 2", len(f.frames))
	}
	re, err := f.frame(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(re) != string(first) || &re[0] == &first[0] {
		t.Fatalf("evicted frame: same bytes %v, re-encoded %v", string(re) == string(first), &re[0] != &first[0])
	}
}
