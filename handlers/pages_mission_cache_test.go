package handlers

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs"
)

var asOfAttrRE = regexp.MustCompile(`data-as-of="[^"]*"`)

// missionPageOf returns b's mission page with its as_of blanked (it differs on every read).
func missionPageOf(t *testing.T, b *browser) string {
	t.Helper()
	resp, body := b.do(t, get("/mission"))
	wantHTML(t, resp, body, http.StatusOK)
	return asOfAttrRE.ReplaceAllString(body, `data-as-of=""`)
}

// The page serves settled drops from the drop cache: a reload of a settled field reads no
// prompt in full and shows exactly what a server with no cache shows; any change to a drop (a
// retry, a write to its job) shows at once; a drop holding one session's CSRF token is never
// shown to another session; another user never sees a cached drop.
func TestMissionDropCacheOnThePage(t *testing.T) {
	t.Parallel()
	e := newMissionEnv(t)
	ctx := context.Background()
	pw := e.user(t, "acme", "settler", identity.RoleMember)
	b := e.signIn(t, "settler", pw)
	p, _, err := e.ids.SessionPrincipal(ctx, b.cookies[sessionCookie])
	if err != nil {
		t.Fatal(err)
	}
	v := jobs.Viewer{OrgID: p.OrgID, UserID: p.UserID}
	// samePage reads b's page, checks that it is what a new server over the same database, with
	// an empty cache, shows, and returns it.
	samePage := func(t *testing.T, step string, b *browser) string {
		t.Helper()
		got := missionPageOf(t, b)
		if want := missionPageOf(t, b.on(New(Deps{Identity: e.ids, Jobs: e.jobs, Logger: testLogger()}).App())); got != want {
			t.Fatalf("%s: the page differs from an uncached server's:\n got %.3000s\nwant %.3000s", step, got, want)
		}
		return got
	}
	wantSame := func(step string) string {
		t.Helper()
		return samePage(t, step, b)
	}

	queued := e.submit(t, v, "still queued")
	cancelled := e.submit(t, v, "cancelled before it ran")
	failed := e.submit(t, v, "failed on its own")
	child, err := e.jobs.Submit(ctx, jobs.SubmitRequest{Viewer: v, Prompt: "a continuation", ParentID: &cancelled.PromptID})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []jobs.Submitted{cancelled, child} {
		if _, err := e.jobs.Cancel(ctx, v, s.JobID, jobs.Actor{Name: "test"}); err != nil {
			t.Fatal(err)
		}
	}
	e.startRunning(t, failed.JobID)
	e.writeChunks(t, failed.JobID, 1, "half an answer")
	if _, err := e.db.Bun.ExecContext(ctx, `UPDATE sa_job SET state = 'failed', error_kind = 'provider_5xx',
		error_message = 'the provider gave up', finished_at = now() WHERE id = ?`, failed.JobID); err != nil {
		t.Fatal(err)
	}

	wantSame("first read")
	if n, _ := e.srv.dropCache.stats(); n != 3 {
		t.Fatalf("the cache holds %d drops after the first read, want the 3 settled ones", n)
	}
	page := wantSame("second read")
	if !strings.Contains(page, "half an answer") || !strings.Contains(page, "the provider gave up") ||
		!strings.Contains(page, b.csrf) {
		t.Fatalf("the failed drop lost its output, error or retry form:\n%.3000s", page)
	}

	// A settled field is served from the cache: no prompt is read in full.
	if _, err := e.jobs.Cancel(ctx, v, queued.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	settled := wantSame("the last drop settled")
	qc := &promptQueries{}
	e.db.Bun.AddQueryHook(qc)
	qc.take()
	if missionPageOf(t, b) != settled {
		t.Error("a reload of a settled field changed the page")
	}
	if n := qc.take(); n != 0 {
		t.Errorf("a reload of a settled field read prompts in full in %d queries, want 0 (all cached)", n)
	}

	// A retry gives the drop a new job: the page shows it queued with the superseded attempt.
	if _, err := e.jobs.Retry(ctx, v, cancelled.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	qc.take()
	missionPageOf(t, b)
	if n := qc.take(); n != 1 {
		t.Errorf("the reload after a retry read prompts in full in %d queries, want 1 (the changed drop)", n)
	}
	page = wantSame("after a retry")
	wantDrop(t, page, cancelled.PromptID.String(), "drop is-queued")
	if !strings.Contains(page, `data-job-id="`+cancelled.JobID.String()+`"`) {
		t.Error("the retried drop does not list its superseded job")
	}
	// Any write to a settled job changes its version.
	if _, err := e.db.Bun.ExecContext(ctx, `UPDATE sa_job SET error_message = 'a corrected message' WHERE id = ?`,
		failed.JobID); err != nil {
		t.Fatal(err)
	}
	page = wantSame("after a write to a settled job")
	if !strings.Contains(page, "a corrected message") {
		t.Error("the page still shows the failed drop's old message")
	}

	// Another session of the same user gets its own token in the failed drop's retry form.
	b2 := e.signIn(t, "settler", pw)
	if b2.csrf == b.csrf {
		t.Fatal("two sessions share a CSRF token")
	}
	page2 := samePage(t, "another session", b2)
	if strings.Contains(page2, b.csrf) || !strings.Contains(page2, b2.csrf) {
		t.Error("the second session's page holds the first session's CSRF token, or not its own")
	}
	if missionPageOf(t, b) != page {
		t.Error("the first session's page changed after another session's read")
	}

	// Another user of the same org never sees the first user's cached drops.
	other, _ := e.member(t, "acme", "neighbour", identity.RoleMember)
	page3 := missionPageOf(t, other)
	for _, id := range []uuid.UUID{queued.PromptID, cancelled.PromptID, failed.PromptID, child.PromptID} {
		if strings.Contains(page3, id.String()) {
			t.Errorf("another user's page shows prompt %s", id)
		}
	}
}
