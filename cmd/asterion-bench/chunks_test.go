package main

import (
	"testing"
	"time"
)

// TestParseOutputEvent: the fields the chunks phase times come out of a job.output event as
// the server writes it, whatever the text holds, and a document without them is refused.
func TestParseOutputEvent(t *testing.T) {
	t.Parallel()
	data := `{"prompt_id":"0b8f6a52-2d43-4f57-9d0e-2f1f9c1e7a11","job_id":"5d6a1f2e-9c3b-4a7e-8f10-3b2c1d0e9f87","seq":12,` +
		`"text":" say \"seq\":99, \"at\":\"x\"","at":"2026-12-01T15:04:05.123456Z"}`
	job, seq, at, ok := parseOutputEvent(data)
	want := time.Date(2026, 12, 1, 15, 4, 5, 123456000, time.UTC)
	if !ok || job != "5d6a1f2e-9c3b-4a7e-8f10-3b2c1d0e9f87" || seq != 12 || !at.Equal(want) {
		t.Fatalf("parseOutputEvent = %q, %d, %v, %v", job, seq, at, ok)
	}
	for _, bad := range []string{`{}`, `{"job_id":"a","seq":1}`, `{"job_id":"a","seq":x,"at":"2026-12-01T15:04:05Z"}`,
		`{"job_id":"a","seq":1,"at":"yesterday"}`} {
		if _, _, _, ok := parseOutputEvent(bad); ok {
			t.Errorf("parseOutputEvent(%s) accepted", bad)
		}
	}
}
