package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"asterion/identity"
)

// mission/recent carries at most the first 1,000 characters of each text, a cut one marked
// text_truncated, and the job document carries the whole prompt as prompt_text; a short text
// comes whole and unmarked.
func TestMissionRecentCutsLongTexts(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "acme", "verbose", identity.RoleMember)
	// 32,000 characters, many of them three bytes long: the cap counts characters.
	long := strings.Repeat("ab€ ", 7990) + "end #sim:tokens=600"
	s := f.submit(t, u, long)
	short := f.submit(t, u, "short")
	f.waitJob(t, u, s.JobID, "succeeded")
	f.waitJob(t, u, short.JobID, "succeeded")

	type item struct {
		PromptID      string `json:"prompt_id"`
		Text          string `json:"text"`
		TextTruncated *bool  `json:"text_truncated"`
		Response      *struct {
			Text          string `json:"text"`
			TextTruncated *bool  `json:"text_truncated"`
		} `json:"response"`
	}
	r := f.do(t, "GET", "/sa-core/v1/mission/recent", u.Tok, nil)
	if r.StatusCode != http.StatusOK {
		t.Fatalf("mission/recent: %s", r)
	}
	items := map[string]item{}
	for _, it := range mustDecode[struct {
		Items []item `json:"items"`
	}](t, r.Body).Items {
		items[it.PromptID] = it
	}
	got, ok := items[s.PromptID]
	if !ok || got.Response == nil {
		t.Fatalf("the long prompt (or its response) is missing: %s", r)
	}
	if n := utf8.RuneCountInString(got.Text); n != 1000 || !strings.HasPrefix(long, got.Text) {
		t.Errorf("the long prompt's text has %d characters (a prefix: %v), want its first 1000", n, strings.HasPrefix(long, got.Text))
	}
	if got.TextTruncated == nil || !*got.TextTruncated {
		t.Errorf("the cut prompt text is not marked text_truncated")
	}
	if n := utf8.RuneCountInString(got.Response.Text); n != 1000 || got.Response.TextTruncated == nil || !*got.Response.TextTruncated {
		t.Errorf("the long response's text has %d characters, text_truncated %v; want 1000, true", n, got.Response.TextTruncated)
	}
	if it := items[short.PromptID]; it.Text != "short" || it.TextTruncated != nil && *it.TextTruncated {
		t.Errorf("the short prompt: text %q, text_truncated %v", it.Text, it.TextTruncated)
	}

	doc := f.do(t, "GET", "/sa-core/v1/jobs/"+s.JobID, u.Tok, nil)
	if doc.StatusCode != http.StatusOK {
		t.Fatalf("the job document: %s", doc)
	}
	if text := mustDecode[struct {
		PromptText *string `json:"prompt_text"`
	}](t, doc.Body).PromptText; text == nil || *text != long {
		t.Errorf("the job document's prompt_text is not the whole prompt (%d bytes of %d)", len(strOr(text)), len(long))
	}
}

// Without since, mission/recent covers the last 24 hours, for a member and for an admin alike
// (an admin's view spans every org); an older since still reaches further back.
func TestMissionRecentWithoutSinceCoversADay(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "acme", "historian", identity.RoleMember)
	admin := f.user(t, "root-org", "root", identity.RoleAdmin)
	old := f.submit(t, u, "from the day before yesterday")
	fresh := f.submit(t, u, "from today")
	f.waitJob(t, u, old.JobID, "succeeded")
	f.waitJob(t, u, fresh.JobID, "succeeded")
	ctx := context.Background()
	tx, err := f.DB.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	// The tables' triggers would set updated_at to now: this moves time back as it passes.
	if _, err := tx.ExecContext(ctx, "SET LOCAL session_replication_role = replica"); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`UPDATE sa_job SET created_at = created_at - interval '30 hours', updated_at = updated_at - interval '30 hours',
			scheduled_at = scheduled_at - interval '30 hours' WHERE prompt_id = ?`,
		`UPDATE sa_entity SET created_at = created_at - interval '30 hours', updated_at = updated_at - interval '30 hours'
			WHERE id = ?0 OR id IN (SELECT response_id FROM sa_job WHERE prompt_id = ?0)`,
	} {
		if _, err := tx.ExecContext(ctx, q, old.PromptID); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	for _, who := range []liveUser{u, admin} {
		m := promptSet(f.mission(t, who, "").Items)
		if m[old.PromptID] || !m[fresh.PromptID] {
			t.Errorf("as %s without since: the 30-hour-old prompt listed %v, today's %v; want false, true",
				who.Name, m[old.PromptID], m[fresh.PromptID])
		}
		since := url.QueryEscape(time.Now().Add(-48 * time.Hour).UTC().Format(time.RFC3339Nano))
		m = promptSet(f.mission(t, who, "?since="+since).Items)
		if !m[old.PromptID] || !m[fresh.PromptID] {
			t.Errorf("as %s since two days ago: the old prompt listed %v, today's %v; want both", who.Name, m[old.PromptID], m[fresh.PromptID])
		}
	}
}

func strOr(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
