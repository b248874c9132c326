package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"asterion/identity"
)

// TestMissionRunAt: the compose bar's run-at time is the reader's wall clock with the offset
// app.js puts beside it; the prompt is scheduled for that instant and its drop says so. A value
// that is not a time, an offset that is no zone's, or a time past the scheduling rules answers
// 422 with the compose error and writes nothing. A queued drop says when it should start; the
// field reads the estimates of all its queued drops at once.
func TestMissionRunAt(t *testing.T) {
	t.Parallel()
	e := newMissionEnv(t)
	b, v := e.member(t, "acme", "sam", identity.RoleMember)
	ctx := context.Background()

	// 18:30 on a day ahead in a zone one hour east of UTC (getTimezoneOffset -60) is 17:30 UTC.
	day := time.Now().UTC().Add(48 * time.Hour).Format("2006-01-02")
	resp, body := b.htmx(t, "POST", "/mission/prompts", url.Values{"prompt": {"later"}, "run_at": {day + "T18:30"},
		"run_at_offset": {"-60"}})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("scheduled submit: %d %s", resp.StatusCode, body)
	}
	want, _ := time.Parse(time.RFC3339, day+"T17:30:00Z")
	if !strings.Contains(body, "scheduled for") || !strings.Contains(body, `datetime="`+want.Format(time.RFC3339Nano)+`" data-clock>17:30 UTC</time>`) {
		t.Errorf("the scheduled drop does not show its time:\n%s", body)
	}
	var got time.Time
	if err := e.db.Bun.QueryRowContext(ctx, `SELECT j.scheduled_for FROM sa_job j JOIN sa_entity p ON p.id = j.prompt_id
		WHERE p.body = 'later' AND p.created_by = ?`, v.UserID).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if !got.Equal(want) {
		t.Errorf("scheduled_for %v, want %v", got, want)
	}

	count := func() int {
		var n int
		if err := e.db.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_entity WHERE kind = 'prompt'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	far := time.Now().UTC().Add(40 * 24 * time.Hour).Format("2006-01-02T15:04")
	for _, tc := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"prompt": {"x"}, "run_at": {"tomorrow"}}, "The run-at time must be a date and time"},
		{url.Values{"prompt": {"x"}, "run_at": {day + "T18:30"}, "run_at_offset": {"east"}}, "The run-at time came with a time zone"},
		{url.Values{"prompt": {"x"}, "run_at": {far}}, "The run-at time must be at most 30 days ahead"},
		{url.Values{"prompt": {"x"}, "run_at": {"2020-01-01T10:00"}}, "The run-at time must not be more than a minute in the past"},
	} {
		resp, body := b.htmx(t, "POST", "/mission/prompts", tc.form)
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, `id="compose-error" role="alert"`) ||
			!strings.Contains(body, tc.want) {
			t.Errorf("submit %v: %d %s, want 422 with %q", tc.form, resp.StatusCode, body, tc.want)
		}
	}
	if n := count(); n != before {
		t.Errorf("%d prompts written by rejected submits", n-before)
	}

	// No worker runs: the first queued prompt starts as soon as one does, the next ones later.
	resp, body = b.htmx(t, "POST", "/mission/prompts", url.Values{"prompt": {"now"}})
	if resp.StatusCode != http.StatusAccepted || !strings.Contains(body, `class="drop-eta" data-eta="0">starting now</span>`) {
		t.Errorf("the first queued drop: %d %s", resp.StatusCode, body)
	}
	e.submit(t, v, "second")
	e.submit(t, v, "third")
	resp, page := b.do(t, get("/mission"))
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("mission page: %d", resp.StatusCode)
	}
	if n := strings.Count(page, `class="drop-eta"`); n != 4 || strings.Count(page, "data-scheduled") != 1 ||
		!strings.Contains(page, "starts in about 4 s") {
		t.Errorf("the field shows %d estimates; want the scheduled drop, starting now, about 2 s and about 4 s:\n%s", n, page)
	}
}
