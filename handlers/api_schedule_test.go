package handlers

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"asterion/identity"
)

// TestSubmitScheduledFor: scheduled_for is taken on submit and shown on the job; a time more
// than 30 days ahead, or that is not a time, answers 422 naming the field.
func TestSubmitScheduledFor(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveServerConfig{HoldWorkers: true})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "in an hour", "scheduled_for": at.Format(time.RFC3339Nano)})
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("scheduled submit: %s", r)
	}
	sub := mustDecode[liveSubmitted](t, r.Body)
	doc := mustDecode[struct {
		State        string  `json:"state"`
		ScheduledFor *string `json:"scheduled_for"`
		ScheduledAt  string  `json:"scheduled_at"`
	}](t, f.do(t, "GET", "/sa-core/v1/jobs/"+sub.JobID, u.Tok, nil).Body)
	if doc.State != "queued" || doc.ScheduledFor == nil {
		t.Fatalf("scheduled job %+v", doc)
	}
	if got, err := time.Parse(time.RFC3339Nano, *doc.ScheduledFor); err != nil || !got.Equal(at) {
		t.Errorf("scheduled_for %q, want %v", *doc.ScheduledFor, at)
	}
	for _, bad := range []any{time.Now().Add(40 * 24 * time.Hour).Format(time.RFC3339), "tomorrow", 42} {
		r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "x", "scheduled_for": bad})
		if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "scheduled_for") {
			t.Errorf("scheduled_for %v: %s", bad, r)
		}
	}
}
