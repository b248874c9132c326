package views

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func missionDrop(id, parent string, at time.Time, state string) MissionDrop {
	return MissionDrop{PromptID: id, ParentID: parent, Text: "prompt " + id, CreatedAt: at, JobID: "job-" + id,
		State: state, Priority: PriorityDefault, Attempt: 1, MaxAttempts: 3, UpdatedAt: at, Depth: -1}
}

func TestMissionFieldThreadsByContinuation(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	resp := missionDrop("b", "", at(2), "succeeded")
	resp.Response = &MissionResponse{ID: "resp-b", Text: "answer"}
	drops := []MissionDrop{
		// Given in completion order, not creation order.
		missionDrop("e", "resp-b", at(5), "queued"), // continues b's response
		missionDrop("c", "a", at(3), "running"),
		missionDrop("a", "", at(1), "succeeded"),
		missionDrop("d", "c", at(4), "failed"),
		resp,
		missionDrop("f", "gone", at(6), "queued"), // its parent is not in the field
	}
	f := BuildMissionField(drops, t0)
	var got []string
	for _, th := range f.Threads {
		var ids []string
		for _, d := range th.Drops {
			ids = append(ids, d.PromptID+":"+depthAttr(d.Depth))
		}
		got = append(got, th.RootID+"["+strings.Join(ids, " ")+"]")
	}
	want := "a[a:0 c:1 d:2] b[b:0 e:1] f[f:0]"
	if strings.Join(got, " ") != want {
		t.Fatalf("threads %v, want %s", got, want)
	}
	var newest []string
	for _, d := range f.Drops() {
		newest = append(newest, d.PromptID)
	}
	if strings.Join(newest, "") != "fedcba" {
		t.Errorf("Drops() = %v, want newest first", newest)
	}
}

func TestMissionDropClasses(t *testing.T) {
	for state, want := range map[string]string{
		"queued": "drop is-queued", "running": "drop is-pending", "succeeded": "drop", "failed": "drop is-orphan",
		"cancelled": "drop is-cancelled", "superseded": "drop is-superseded",
	} {
		d := missionDrop("p1", "", time.Now(), state)
		_, doc := render(t, MissionDropView(d, "tok", false))
		art := findAll(doc, "article", "id", "drop-p1")
		if len(art) != 1 {
			t.Fatalf("%s: no drop article", state)
		}
		if c, _ := attr(art[0], "class"); c != want {
			t.Errorf("%s: class %q, want %q", state, c, want)
		}
		chips := findAll(doc, "button", "class", "retry-chip")
		if (state == "failed") != (len(chips) == 1) {
			t.Errorf("%s: %d retry chips", state, len(chips))
		}
		cancels := findAll(doc, "button", "class", "drop-cancel")
		if (state == "queued" || state == "running") != (len(cancels) == 1) {
			t.Errorf("%s: %d cancel buttons", state, len(cancels))
		}
		if _, oob := attr(art[0], "hx-swap-oob"); oob {
			t.Errorf("%s: a drop inside the page is marked out of band", state)
		}
	}
}

func TestMissionDropFragment(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	d := missionDrop("p2", "parent", at, "succeeded")
	d.Text = `<script>alert("x")</script>`
	d.Response = &MissionResponse{ID: "r2", Text: "an <b>answer</b>"}
	d.UpdatedAt = at.Add(time.Second)
	d.Superseded = []MissionAttempt{{JobID: "old-job", Attempt: 3, ErrorKind: "provider_4xx", UpdatedAt: at}}
	out, doc := render(t, MissionDrops([]MissionDrop{d}, nastyToken))
	if strings.Contains(out, "<script>alert") || strings.Contains(out, "<b>answer") {
		t.Fatalf("text is not escaped:\n%s", out)
	}
	art := findAll(doc, "article", "id", "drop-p2", "hx-swap-oob", "true", "data-parent", "parent", "data-response-id", "r2")
	if len(art) != 1 {
		t.Fatalf("no out-of-band drop with its parent and response in:\n%s", out)
	}
	if v, _ := attr(art[0], "data-version"); v != micros(at.Add(time.Second)) {
		t.Errorf("data-version %s, want the job's last change", v)
	}
	if _, has := attr(art[0], "data-depth"); has {
		t.Error("a live fragment claims a depth it does not know")
	}
	if n := len(findAll(doc, "details", "data-response", "*")); n != 1 {
		t.Errorf("%d collapsible responses, want 1", n)
	}
	if n := len(findAll(doc, "li", "class", "drop-attempt is-superseded", "data-job-id", "old-job")); n != 1 {
		t.Errorf("%d superseded attempts, want 1", n)
	}
	for _, in := range findAll(doc, "input", "name", "csrf_token") {
		if v, _ := attr(in, "value"); v != nastyToken {
			t.Errorf("csrf field %q", v)
		}
	}
}

func TestMissionSnapshotAndPage(t *testing.T) {
	at := time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)
	f := BuildMissionField([]MissionDrop{missionDrop("a", "", at, "queued")}, at)
	out, doc := render(t, MissionSnapshot(f, "tok"))
	if !strings.HasPrefix(out, `<div id="field" hx-swap-oob="innerHTML">`) {
		t.Errorf("snapshot does not start with the field: %.100s", out)
	}
	if len(findAll(doc, "div", "id", "mission-sync", "hx-swap-oob", "true", "data-as-of", rfc3339(at))) != 1 {
		t.Error("snapshot lacks the as_of")
	}
	if len(findAll(doc, "article", "id", "drop-a", "data-depth", "0")) != 1 {
		t.Error("snapshot lacks the drop with its depth")
	}

	_, doc = render(t, MissionPage(Page{User: &User{Name: "Ada", Role: RoleMember, OrgName: "acme"}, CSRFToken: "tok"},
		BuildMissionField(nil, at)))
	if len(findAll(doc, "div", "id", "field-empty")) != 1 {
		t.Error("empty field has no empty state")
	}
	live := findAll(doc, "div", "hx-ext", "sse", "sse-connect", "/mission/stream", "sse-swap", "drop", "hx-swap", "none")
	if len(live) != 1 {
		t.Fatal("no single SSE listener")
	}
	if len(findAll(doc, "", "sse-connect", "*")) != 1 {
		t.Error("more than one EventSource on the page")
	}
	for _, p := range findAll(doc, "select", "name", "priority") {
		var vals []string
		for _, o := range findAll(p, "option") {
			v, _ := attr(o, "value")
			vals = append(vals, v)
		}
		if strings.Join(vals, ",") != "5,30,50,80" {
			t.Errorf("priorities %v", vals)
		}
	}
	// The polling fallback is declared like the dashboard's: an hx-trigger on the poll event
	// app.js sends every 2 s while the page script says so, and the drops fetched when the poll
	// saw changes.
	poll := findOne(t, doc, "div", "id", "mission-poll", "hx-get", "/sa-core/v1/mission/recent", "hx-swap", "none")
	if v, _ := attr(poll, "hx-trigger"); v != pollEvent {
		t.Errorf("mission-poll hx-trigger = %q", v)
	}
	if v, _ := attr(poll, "data-poll-while"); v != "asterionMission" {
		t.Errorf("mission-poll data-poll-while = %q", v)
	}
	findOne(t, doc, "div", "id", "mission-drops", "hx-get", "/mission/drops", "hx-trigger", "mission:changed", "hx-swap", "none")
	// The compose bar is outside everything a live update swaps.
	for _, id := range []string{"field", "mission-live", "mission-sync"} {
		for _, n := range findAll(doc, "", "id", id) {
			if len(findAll(n, "textarea")) > 0 {
				t.Errorf("the compose text sits inside #%s", id)
			}
		}
	}
}

func TestMissionExcerpt(t *testing.T) {
	if got := excerpt("  a\n b  ", 10); got != "a b" {
		t.Errorf("excerpt %q", got)
	}
	if got := excerpt(strings.Repeat("é", 20), 10); got != strings.Repeat("é", 9)+"…" {
		t.Errorf("excerpt %q", got)
	}
	for p, want := range map[int]string{0: "urgent", 5: "urgent", 30: "normal", 50: "default", 80: "bulk"} {
		if got := priorityLabel(p); got != want {
			t.Errorf("priorityLabel(%d) = %s", p, got)
		}
	}
}

// excerptReference is excerpt's definition: the whitespace-collapsed text, cut to n runes.
func excerptReference(text string, n int) string {
	s := strings.Join(strings.Fields(text), " ")
	if r := []rune(s); len(r) > n {
		return strings.TrimSpace(string(r[:n-1])) + "…"
	}
	return s
}

func FuzzExcerptMatchesItsDefinition(f *testing.F) {
	for _, s := range []string{"", " ", "a b", "  a\n b  ", strings.Repeat("é ", 40), "abcdefghij k", "abcdefghi  j"} {
		f.Add(s, 10)
	}
	f.Fuzz(func(t *testing.T, text string, n int) {
		// Texts are valid UTF-8 (submit refuses anything else).
		if n < 1 || n > 200 || !utf8.ValidString(text) {
			return
		}
		if got, want := excerpt(text, n), excerptReference(text, n); got != want {
			t.Errorf("excerpt(%q, %d) = %q, want %q", text, n, got, want)
		}
	})
}
