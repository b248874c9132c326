package handlers

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs"
)

// missionEnv is the real application over its own database, with a jobs service but no
// workers: every job stays queued until the test acts on it.
type missionEnv struct {
	*testEnv
	jobs *jobs.Service
}

func newMissionEnv(t *testing.T) *missionEnv {
	t.Helper()
	e := newTestEnv(t, Deps{Logger: testLogger()})
	return &missionEnv{testEnv: e, jobs: e.srv.deps.Jobs}
}

// member creates a user with a password, signs it in, and returns its browser and viewer.
func (e *missionEnv) member(t *testing.T, org, name string, role identity.Role) (*browser, jobs.Viewer) {
	t.Helper()
	pw := e.user(t, org, name, role)
	b := e.signIn(t, name, pw)
	p, _, err := e.ids.SessionPrincipal(context.Background(), b.cookies[sessionCookie])
	if err != nil {
		t.Fatal(err)
	}
	return b, jobs.Viewer{OrgID: p.OrgID, UserID: p.UserID}
}

// submit creates a prompt (queued) for v straight through the jobs service.
func (e *missionEnv) submit(t *testing.T, v jobs.Viewer, text string) jobs.Submitted {
	t.Helper()
	out, err := e.jobs.Submit(context.Background(), jobs.SubmitRequest{Viewer: v, Prompt: text})
	if err != nil {
		t.Fatalf("submit %q: %v", text, err)
	}
	return out
}

// htmx sends a form as htmx does: HX-Request and the session's CSRF header.
func (b *browser) htmx(t *testing.T, method, path string, form url.Values) (*http.Response, string) {
	t.Helper()
	req := postForm(path, form)
	req.Method = method
	req.Header.Set("HX-Request", "true")
	req.Header.Set(csrfHeader, b.csrf)
	return b.do(t, req)
}

var dropTagRE = regexp.MustCompile(`<article id="drop-([0-9a-f-]{36})"[^>]*>`)

// dropTags returns the opening tag of every drop in body by prompt id.
func dropTags(body string) map[string]string {
	out := map[string]string{}
	for _, m := range dropTagRE.FindAllStringSubmatch(body, -1) {
		out[m[1]] = m[0]
	}
	return out
}

// wantDrop returns the opening tag of the prompt's drop and checks its class list.
func wantDrop(t *testing.T, body, promptID, class string) string {
	t.Helper()
	tag, ok := dropTags(body)[promptID]
	if !ok {
		t.Fatalf("no drop for prompt %s in:\n%.2000s", promptID, body)
	}
	if !strings.Contains(tag, `class="`+class+`"`) {
		t.Fatalf("drop %s: want class %q in %s", promptID, class, tag)
	}
	return tag
}

// TestMissionPages runs the mission page's tests over one server and database; each uses its
// own users, and they run one after another (one of them counts every prompt).
func TestMissionPages(t *testing.T) {
	t.Parallel()
	e := newMissionEnv(t)
	for _, c := range []struct {
		name string
		test func(*testing.T, *missionEnv)
	}{
		{"access", testMissionPageAccess},
		{"threads and classes", testMissionPageThreadsAndClasses},
		{"submit", testMissionSubmit},
		{"cancel and retry", testMissionCancelAndRetry},
		{"actions on another prompt are 404", testMissionActionsOtherPromptIs404},
		{"drops fragment", testMissionDropsFragment},
		{"stream without hub", testMissionStreamWithoutHub},
	} {
		t.Run(c.name, func(t *testing.T) { c.test(t, e) })
	}
}

func testMissionPageAccess(t *testing.T, e *missionEnv) {
	mem, mv := e.member(t, "acme", "mia", identity.RoleMember)
	op, ov := e.member(t, "acme", "oscar", identity.RoleOperator)
	_, rv := e.member(t, "globex", "rita", identity.RoleMember)
	mine := e.submit(t, mv, "member's own prompt")
	ops := e.submit(t, ov, "operator's own prompt")
	rival := e.submit(t, rv, "another org's prompt")

	// Anonymous: every mission page and fragment redirects to the login form.
	for _, req := range []*http.Request{get("/mission"), get("/mission/drops"), get("/mission/stream"),
		postForm("/mission/prompts", url.Values{"prompt": {"x"}}),
		postForm("/mission/prompts/"+mine.PromptID.String()+"/cancel", url.Values{"job_id": {mine.JobID.String()}})} {
		resp, _ := e.do(t, req)
		if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/login?next=") {
			t.Errorf("anonymous %s %s: %d %q, want 303 to /login", req.Method, req.URL.Path, resp.StatusCode, resp.Header.Get("Location"))
		}
	}

	resp, body := mem.do(t, get("/mission"))
	wantHTML(t, resp, body, http.StatusOK)
	wantDrop(t, body, mine.PromptID.String(), "drop is-queued")
	for _, other := range []jobs.Submitted{ops, rival} {
		if strings.Contains(body, other.PromptID.String()) {
			t.Errorf("the member's field shows prompt %s of someone else", other.PromptID)
		}
	}
	for _, want := range []string{`id="mission"`, `sse-connect="/mission/stream"`, `sse-swap="drop"`, `hx-swap="none"`,
		`hx-post="/mission/prompts"`, `name="prompt"`, `name="priority"`, `value="5"`, `value="30"`, `value="50" selected`,
		`value="80"`, `name="parent_id"`, `<option value="` + mine.PromptID.String() + `">member&#39;s own prompt</option>`,
		`name="csrf_token" value="` + mem.csrf + `"`, `/static/js/mission.js`, `aria-current="page"`} {
		if !strings.Contains(body, want) {
			t.Errorf("the mission page lacks %s", want)
		}
	}

	// An operator's field is its own prompts too (the org's work is on the dashboard).
	resp, body = op.do(t, get("/mission"))
	wantHTML(t, resp, body, http.StatusOK)
	wantDrop(t, body, ops.PromptID.String(), "drop is-queued")
	if strings.Contains(body, mine.PromptID.String()) || strings.Contains(body, rival.PromptID.String()) {
		t.Error("the operator's field shows prompts of other users")
	}
}

func testMissionPageThreadsAndClasses(t *testing.T, e *missionEnv) {
	b, v := e.member(t, "acme", "tess", identity.RoleMember)
	ctx := context.Background()
	root := e.submit(t, v, "root")
	child, err := e.jobs.Submit(ctx, jobs.SubmitRequest{Viewer: v, Prompt: "child", ParentID: &root.PromptID})
	if err != nil {
		t.Fatal(err)
	}
	other := e.submit(t, v, "another thread")
	cancelled := e.submit(t, v, "cancel me")
	if _, err := e.jobs.Cancel(ctx, v, cancelled.JobID, jobs.Actor{Name: "test"}); err != nil {
		t.Fatal(err)
	}
	_, body := b.do(t, get("/mission"))
	wantDrop(t, body, root.PromptID.String(), "drop is-queued")
	tag := wantDrop(t, body, child.PromptID.String(), "drop is-queued")
	if !strings.Contains(tag, `data-depth="1"`) || !strings.Contains(tag, `data-parent="`+root.PromptID.String()+`"`) {
		t.Errorf("the continuation is not one level deeper under its parent: %s", tag)
	}
	wantDrop(t, body, cancelled.PromptID.String(), "drop is-cancelled")
	// Threads in root created_at order; the child inside its root's thread.
	iRoot := strings.Index(body, `id="thread-`+root.PromptID.String()+`"`)
	iChild := strings.Index(body, `id="drop-`+child.PromptID.String()+`"`)
	iOther := strings.Index(body, `id="thread-`+other.PromptID.String()+`"`)
	if iRoot < 0 || iChild < iRoot || iOther < iChild {
		t.Errorf("thread order: root thread %d, child %d, other thread %d", iRoot, iChild, iOther)
	}
	// A cancelled drop has neither a retry chip nor a cancel button; a queued one can cancel.
	seg := body[strings.Index(body, `id="drop-`+cancelled.PromptID.String()+`"`):]
	seg = seg[:strings.Index(seg, "</article>")]
	if strings.Contains(seg, "retry-chip") || strings.Contains(seg, "drop-cancel") {
		t.Errorf("cancelled drop offers an action:\n%s", seg)
	}
	if !strings.Contains(body, `hx-post="/mission/prompts/`+root.PromptID.String()+`/cancel"`) {
		t.Error("a queued drop has no cancel")
	}
}

func testMissionSubmit(t *testing.T, e *missionEnv) {
	b, v := e.member(t, "acme", "sam", identity.RoleMember)
	_, rv := e.member(t, "globex", "rob", identity.RoleMember)
	parent := e.submit(t, v, "parent")
	rival := e.submit(t, rv, "rival")
	ctx := context.Background()

	resp, body := b.htmx(t, "POST", "/mission/prompts", url.Values{
		"prompt": {"  hello there  "}, "priority": {"5"}, "parent_id": {parent.PromptID.String()}})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d %s", resp.StatusCode, body)
	}
	tags := dropTags(body)
	if len(tags) != 1 {
		t.Fatalf("want one drop in the answer, got %d:\n%s", len(tags), body)
	}
	var id string
	for k := range tags {
		id = k
	}
	tag := wantDrop(t, body, id, "drop is-queued")
	for _, want := range []string{`hx-swap-oob="true"`, `data-parent="` + parent.PromptID.String() + `"`} {
		if !strings.Contains(tag, want) {
			t.Errorf("new drop lacks %s: %s", want, tag)
		}
	}
	if !strings.Contains(body, `<p id="compose-error"`) || !strings.Contains(body, ">hello there</p>") {
		t.Errorf("answer lacks the cleared compose error or the trimmed text:\n%s", body)
	}
	var (
		gotParent string
		gotPrio   int
		gotState  string
	)
	if err := e.db.Bun.QueryRowContext(ctx, `SELECT p.parent_id::text, j.priority, j.state FROM sa_entity p JOIN sa_job j ON j.prompt_id = p.id
		WHERE p.id = ? AND p.created_by = ?`, id, v.UserID).Scan(&gotParent, &gotPrio, &gotState); err != nil {
		t.Fatal(err)
	}
	if gotParent != parent.PromptID.String() || gotPrio != 5 || gotState != "queued" {
		t.Errorf("stored parent %s priority %d state %s", gotParent, gotPrio, gotState)
	}

	count := func() int {
		var n int
		if err := e.db.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_entity WHERE kind = 'prompt'").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	before := count()
	// Without the CSRF header: 403, nothing written.
	req := postForm("/mission/prompts", url.Values{"prompt": {"no token"}})
	req.Header.Set("HX-Request", "true")
	if resp, _ := b.do(t, req); resp.StatusCode != http.StatusForbidden {
		t.Errorf("submit without CSRF: %d, want 403", resp.StatusCode)
	}
	// Bad fields: 422 with the compose error, nothing written.
	for _, tc := range []struct {
		form url.Values
		want string
	}{
		{url.Values{"prompt": {"   "}}, "The prompt is required"},
		{url.Values{"prompt": {"x"}, "priority": {"soon"}}, "The priority must be a whole number"},
		{url.Values{"prompt": {"x"}, "priority": {"101"}}, "The priority must be between 0 and 100"},
		{url.Values{"prompt": {"x"}, "parent_id": {"nope"}}, "The drop to continue from"},
		{url.Values{"prompt": {"x"}, "parent_id": {rival.PromptID.String()}}, "The drop to continue from"},
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
	// A plain form post (no htmx) redirects back to the page.
	resp, _ = b.do(t, postForm("/mission/prompts", url.Values{"prompt": {"plain"}, "csrf_token": {b.csrf}}))
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/mission" {
		t.Errorf("plain submit: %d %q, want 303 to /mission", resp.StatusCode, resp.Header.Get("Location"))
	}
}

func testMissionCancelAndRetry(t *testing.T, e *missionEnv) {
	b, v := e.member(t, "acme", "cal", identity.RoleMember)
	p := e.submit(t, v, "change my mind")
	pid := p.PromptID.String()
	path := "/mission/prompts/" + pid

	resp, body := b.htmx(t, "POST", path+"/cancel", url.Values{"job_id": {p.JobID.String()}})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("cancel: %d %s", resp.StatusCode, body)
	}
	tag := wantDrop(t, body, pid, "drop is-cancelled")
	if !strings.Contains(tag, `hx-swap-oob="true"`) || strings.Contains(body, "retry-chip") {
		t.Errorf("cancelled drop fragment: %s", body)
	}
	// Again: the job is terminal; 409 with the drop as it is.
	resp, body = b.htmx(t, "POST", path+"/cancel", url.Values{"job_id": {p.JobID.String()}})
	if resp.StatusCode != http.StatusConflict {
		t.Fatalf("second cancel: %d, want 409", resp.StatusCode)
	}
	wantDrop(t, body, pid, "drop is-cancelled")

	resp, body = b.htmx(t, "POST", path+"/retry", url.Values{"job_id": {p.JobID.String()}})
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("retry: %d %s", resp.StatusCode, body)
	}
	tag = wantDrop(t, body, pid, "drop is-queued")
	if strings.Contains(tag, `data-job-id="`+p.JobID.String()+`"`) {
		t.Errorf("the drop does not follow the new job: %s", tag)
	}
	if !strings.Contains(body, `class="drop-attempt is-superseded" data-job-id="`+p.JobID.String()+`"`) {
		t.Errorf("the superseded job is not listed:\n%s", body)
	}
	d, err := e.srv.deps.Reads.GetJob(context.Background(), v, p.JobID)
	if err != nil {
		t.Fatal(err)
	}
	if d.Job.State != "superseded" || len(d.History) != 2 || d.History[1].State != "queued" {
		t.Errorf("after retry: old %s, history %d", d.Job.State, len(d.History))
	}
	// A stale page names the old job: the action applies to the current one (queued: no retry).
	resp, body = b.htmx(t, "POST", path+"/retry", url.Values{"job_id": {p.JobID.String()}})
	if resp.StatusCode != http.StatusConflict {
		t.Errorf("retry of a queued job: %d, want 409", resp.StatusCode)
	}
	wantDrop(t, body, pid, "drop is-queued")
	// Cancel from the stale page cancels the current job.
	resp, body = b.htmx(t, "POST", path+"/cancel", url.Values{"job_id": {p.JobID.String()}})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("cancel via the stale job id: %d", resp.StatusCode)
	}
	wantDrop(t, body, pid, "drop is-cancelled")
	// Without htmx: a redirect back to the page.
	resp, _ = b.do(t, postForm(path+"/retry", url.Values{"job_id": {p.JobID.String()}, "csrf_token": {b.csrf}}))
	if resp.StatusCode != http.StatusSeeOther {
		t.Errorf("plain retry: %d, want 303", resp.StatusCode)
	}
}

// TestMissionActionsOtherPromptIs404: another org's, or another user's, prompt answers 404 on
// the mission action routes, like a prompt that does not exist, and nothing changes.
func testMissionActionsOtherPromptIs404(t *testing.T, e *missionEnv) {
	b, v := e.member(t, "acme", "ivy", identity.RoleMember)
	op, _ := e.member(t, "acme", "otto", identity.RoleOperator)
	_, rv := e.member(t, "globex", "rex", identity.RoleMember)
	mine := e.submit(t, v, "mine")
	rival := e.submit(t, rv, "other org")

	cases := []struct {
		who              *browser
		prompt, job, why string
	}{
		{b, rival.PromptID.String(), rival.JobID.String(), "another org's prompt"},
		{b, rival.PromptID.String(), mine.JobID.String(), "another org's prompt with my job"},
		{b, mine.PromptID.String(), rival.JobID.String(), "my prompt with another org's job"},
		{op, mine.PromptID.String(), mine.JobID.String(), "a member's prompt, asked by an operator of the org"},
		{b, uuid.NewString(), mine.JobID.String(), "a prompt that does not exist"},
		{b, "not-a-uuid", mine.JobID.String(), "a malformed id"},
		{b, mine.PromptID.String(), "", "no job"},
	}
	for _, tc := range cases {
		for _, action := range []string{"cancel", "retry"} {
			resp, body := tc.who.htmx(t, "POST", "/mission/prompts/"+tc.prompt+"/"+action, url.Values{"job_id": {tc.job}})
			if resp.StatusCode != http.StatusNotFound {
				t.Errorf("%s on %s: %d, want 404", action, tc.why, resp.StatusCode)
			}
			if strings.Contains(body, "other org") || strings.Contains(body, `id="drop-`) {
				t.Errorf("%s on %s leaks the prompt: %.300s", action, tc.why, body)
			}
		}
	}
	for _, s := range []jobs.Submitted{mine, rival} {
		var st string
		if err := e.db.Bun.QueryRowContext(context.Background(), "SELECT state FROM sa_job WHERE id = ?", s.JobID).Scan(&st); err != nil {
			t.Fatal(err)
		}
		if st != "queued" {
			t.Errorf("job %s is %s after refused actions, want queued", s.JobID, st)
		}
	}
}

func testMissionDropsFragment(t *testing.T, e *missionEnv) {
	b, v := e.member(t, "acme", "pia", identity.RoleMember)
	_, rv := e.member(t, "globex", "ron", identity.RoleMember)
	old := e.submit(t, v, "older")
	// since falls between the two prompts on the database's own clock.
	var oldAt time.Time
	if err := e.db.Bun.QueryRowContext(context.Background(), "SELECT updated_at FROM sa_job WHERE id = ?", old.JobID).Scan(&oldAt); err != nil {
		t.Fatal(err)
	}
	since := oldAt.Add(time.Microsecond).UTC()
	fresh := e.submit(t, v, "newer")
	rival := e.submit(t, rv, "rival")

	resp, body := b.do(t, get("/mission/drops?since="+url.QueryEscape(since.Format(time.RFC3339Nano))))
	wantHTML(t, resp, body, http.StatusOK)
	tags := dropTags(body)
	if _, ok := tags[fresh.PromptID.String()]; !ok || len(tags) != 1 {
		t.Fatalf("drops since %s: %v, want only the newer prompt", since, tags)
	}
	if !strings.Contains(tags[fresh.PromptID.String()], `hx-swap-oob="true"`) {
		t.Error("a polled drop is not swapped out of band")
	}
	_, body = b.do(t, get("/mission/drops"))
	tags = dropTags(body)
	if _, ok := tags[old.PromptID.String()]; !ok || len(tags) != 2 {
		t.Errorf("all drops: %v", tags)
	}
	if strings.Contains(body, rival.PromptID.String()) {
		t.Error("another org's prompt in the fragment")
	}
	if resp, _ := b.do(t, get("/mission/drops?since=yesterday")); resp.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("bad since: %d, want 422", resp.StatusCode)
	}
}

func testMissionStreamWithoutHub(t *testing.T, e *missionEnv) {
	b, _ := e.member(t, "acme", "hal", identity.RoleMember)
	resp, body := b.do(t, get("/mission/stream"))
	wantHTML(t, resp, body, http.StatusServiceUnavailable)
}

// missionSSE is one event of the mission stream.
type missionSSE struct {
	name, data string
}

// nextMissionSSE waits for the first event for which match holds.
func nextMissionSSE(t *testing.T, s *sseStream, what string, match func(missionSSE) bool) missionSSE {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		ev, ok := s.nextEvent(deadline)
		if !ok {
			t.Fatalf("no %s within 15 s (or the stream ended)", what)
		}
		if m := (missionSSE{name: ev.Name, data: ev.Data}); match(m) {
			return m
		}
	}
}

// TestMissionStream: the page stream sends a snapshot of the field first, then the user's
// changed drops as OOB fragments, in place, as the job moves; nothing of other users.
func TestMissionStream(t *testing.T) {
	t.Parallel()
	app := startAppServer(t, appServerConfig{HoldWorkers: true})
	u := app.user(t, "acme", "sky", identity.RoleMember)
	other := app.user(t, "acme", "opal", identity.RoleOperator)
	tok, err := app.IDs.CreateToken(context.Background(), u.Name)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	before, err := app.Jobs.Submit(ctx, jobs.SubmitRequest{Viewer: u.Viewer, Prompt: "before the stream"})
	if err != nil {
		t.Fatal(err)
	}
	events := app.openEvents(t, "/mission/stream", tok)
	if ct := events.Resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("stream: %d %s", events.Resp.StatusCode, ct)
	}
	snap := nextMissionSSE(t, events, "the snapshot", func(missionSSE) bool { return true })
	if snap.name != "drop" || !strings.HasPrefix(snap.data, `<div id="field" hx-swap-oob="innerHTML">`) ||
		!strings.Contains(snap.data, `id="mission-sync"`) {
		t.Fatalf("first event is not a field snapshot: %s %.300s", snap.name, snap.data)
	}
	wantDrop(t, snap.data, before.PromptID.String(), "drop is-queued")

	// Someone else's work never shows; the user's new prompt does, then moves in place.
	if _, err := app.Jobs.Submit(ctx, jobs.SubmitRequest{Viewer: other.Viewer, Prompt: "not for sky"}); err != nil {
		t.Fatal(err)
	}
	p, err := app.Jobs.Submit(ctx, jobs.SubmitRequest{Viewer: u.Viewer, Prompt: "live one\nwith two lines"})
	if err != nil {
		t.Fatal(err)
	}
	pid := p.PromptID.String()
	has := func(class string) func(missionSSE) bool {
		return func(ev missionSSE) bool {
			if strings.Contains(ev.data, "not for sky") {
				t.Fatalf("the stream sent another user's prompt: %s", ev.data)
			}
			tag, ok := dropTags(ev.data)[pid]
			return ok && strings.Contains(tag, `class="`+class+`"`)
		}
	}
	ev := nextMissionSSE(t, events, "the queued drop", has("drop is-queued"))
	if !strings.Contains(ev.data, `hx-swap-oob="true"`) || !strings.Contains(ev.data, "live one\nwith two lines") {
		t.Errorf("live drop fragment: %s", ev.data)
	}
	app.StartWorkers(t)
	nextMissionSSE(t, events, "the settled drop", has("drop"))
}
