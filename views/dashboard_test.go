package views

import (
	"bytes"
	"context"
	"html"
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"

	"asterion/static"
)

func sampleOpsList() OpsList {
	now := time.Now()
	return OpsList{
		Filter: OpsFilter{Status: "running", Q: "x"},
		Errors: map[string]string{"q": "enter a full id"},
		Counts: []Count{{Key: "all", Label: "all", N: 3, Href: "/admin/deferred-operations", Current: true},
			{Key: "running", Label: "running", N: 1, Href: "/admin/deferred-operations?status=running"}},
		Rows: []OpRow{
			{ID: "11111111-1111-4111-8111-111111111111", Kind: "prompt.execute", Owner: "asterion.jobs", Status: "running",
				Org: "acme", AcceptedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Minute)},
			{ID: "22222222-2222-4222-8222-222222222222", Kind: "prompt.execute", Owner: "asterion.jobs", Status: "failed",
				Terminal: true, ErrorKind: "timeout", Stale: true, AcceptedAt: now, UpdatedAt: now},
		},
		NextCursor: "abc",
		ShowOrg:    true,
		Orgs:       []Option{{"acme", "acme"}},
		Kinds:      []Option{{"prompt.execute", "prompt.execute"}},
		Live:       Live{StreamURL: "/admin/deferred-operations/events?status=running", PollURL: "/admin/deferred-operations/list?status=running"},
		Notice:     &Notice{Tone: "ok", Text: "done"},
	}
}

func sampleJobs() []JobRow {
	now := time.Now()
	started := now.Add(-3 * time.Second)
	return []JobRow{
		{ID: "33333333-3333-4333-8333-333333333333", State: "running", Priority: 50, Attempt: 1, MaxAttempts: 3, Org: "acme",
			Creator: "olga", CreatedAt: now, ScheduledAt: now, StartedAt: &started, UpdatedAt: now,
			OperationID: "11111111-1111-4111-8111-111111111111", Cancelable: true},
		{ID: "44444444-4444-4444-8444-444444444444", State: "failed", Priority: 5, Attempt: 3, MaxAttempts: 3, ErrorKind: "timeout",
			CreatedAt: now, ScheduledAt: now, StartedAt: &started, FinishedAt: &now, Supersedes: "33333333-3333-4333-8333-333333333333",
			Stale: true, Current: true, Retryable: true},
	}
}

func sampleDetail(cancelable bool) OperationDetail {
	now := time.Now()
	d := OperationDetail{ID: "11111111-1111-4111-8111-111111111111", Kind: "prompt.execute", Owner: "asterion.jobs",
		Status: "running", Org: "acme", Creator: "mia", CorrelationID: "55555555-5555-4555-8555-555555555555",
		SubjectPromptID: "55555555-5555-4555-8555-555555555555", SubjectJobID: "33333333-3333-4333-8333-333333333333",
		AcceptedAt: now, UpdatedAt: now, ExpiresAt: now.Add(time.Minute), NextPollAt: &now, RetryAfterSeconds: 2, PollCount: 4,
		DiagnosticsDigest: strings.Repeat("ab", 32), ErrorKind: "rate_limit", ErrorMessage: "slow down",
		History: []HistoryItem{{Seq: 1, Status: "pending", At: now, DocDigest: strings.Repeat("1", 64), PrevDigest: strings.Repeat("0", 64), EntryDigest: strings.Repeat("2", 64)},
			{Seq: 2, Status: "running", At: now, DocDigest: strings.Repeat("3", 64), PrevDigest: strings.Repeat("2", 64), EntryDigest: strings.Repeat("4", 64)}},
		ChainVerified: true, Jobs: sampleJobs(), RetryJobID: "44444444-4444-4444-8444-444444444444",
		Live: Live{StreamURL: "/s", PollURL: "/p"}}
	if !cancelable {
		d.CancelReason = "the provider call cannot be interrupted"
	}
	return d
}

func sampleHealth() Health {
	now := time.Now().Truncate(time.Minute)
	var pts []SeriesPoint
	for i := 0; i < 60; i++ {
		p := SeriesPoint{At: now.Add(time.Duration(i-59) * time.Minute)}
		if i%7 == 0 {
			p.Finished, p.Failed, p.WaitP50, p.WaitP95, p.RunP50, p.RunP95 = int64(i), int64(i/10), 0.2, 1.5, 0.8, 2.4
		}
		pts = append(pts, p)
	}
	seen := now.Add(-3 * time.Minute)
	return Health{Window: "1h", Counts: []Count{{Key: "queued", Label: "queued", N: 4, Href: "/admin/jobs?state=queued"}},
		Series: pts, ErrorKinds: []KindCount{{"timeout", 3}}, Finished: 30, Failed: 3,
		Orgs:   []OrgHealth{{Org: "acme", Finished: 30, Failed: 3, WaitP50: 0.2, WaitP95: 1.5, RunP50: 0.8, RunP95: 2.4}},
		Queued: 4, Due: 4, PastDue: 2, OldestDue: &seen, PastDueGrace: time.Minute, WorkerSeen: &seen,
		WorkerSource: "river leader lease", Now: now}
}

func renderString(t *testing.T, c templ.Component) string {
	t.Helper()
	var b bytes.Buffer
	if err := c.Render(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestOperationsPageStructure(t *testing.T) {
	raw, doc := render(t, OperationsPage(page(RoleAdmin), sampleOpsList()))
	// One EventSource per page, swapping out of band only.
	streams := findAll(doc, "", "sse-connect", "*")
	if len(streams) != 1 {
		t.Fatalf("%d sse-connect elements, want 1", len(streams))
	}
	if v, _ := attr(streams[0], "hx-swap"); v != "none" {
		t.Errorf("stream listener hx-swap = %q, want none", v)
	}
	if v, _ := attr(streams[0], "sse-swap"); v != "snapshot,row,meta" {
		t.Errorf("sse-swap = %q", v)
	}
	// Polling fallback on the table.
	list := findOne(t, doc, "div", "id", "ops-list")
	if v, _ := attr(list, "hx-trigger"); v != "asterion:poll" {
		t.Errorf("ops-list hx-trigger = %q", v)
	}
	// Live regions, the pause toggle, the fallback notice.
	findOne(t, doc, "", "id", "live-status", "aria-live", "polite")
	findOne(t, doc, "tbody", "id", "ops-rows", "aria-live", "polite")
	findOne(t, doc, "", "id", "ops-counts", "aria-live", "polite")
	findOne(t, doc, "button", "data-live-toggle", "*", "aria-pressed", "false")
	findOne(t, doc, "p", "id", "live-fallback", "hidden", "*")
	// Every field is labelled; the bad one is flagged and described.
	for _, in := range append(findAll(doc, "input"), findAll(doc, "select")...) {
		if ty, _ := attr(in, "type"); ty == "hidden" {
			continue
		}
		id, _ := attr(in, "id")
		if id == "" || len(findAll(doc, "label", "for", id)) != 1 {
			t.Errorf("field %q has no label", id)
		}
	}
	q := findOne(t, doc, "input", "name", "q")
	if v, _ := attr(q, "aria-invalid"); v != "true" {
		t.Error("bad search not flagged")
	}
	findOne(t, doc, "p", "id", "f-q-error")
	// Shortened ids with copy buttons; times with the exact time on hover; stale rows marked.
	findOne(t, doc, "button", "data-copy", "11111111-1111-4111-8111-111111111111")
	if !strings.Contains(raw, ">11111111</a>") {
		t.Error("id not shortened")
	}
	if len(findAll(doc, "time", "data-relative", "*", "title", "*")) == 0 {
		t.Error("no relative times")
	}
	findOne(t, doc, "tr", "data-stale", "*")
	findOne(t, doc, "a", "rel", "next")
	findOne(t, doc, "script", "src", "/static/js/dashboard.js")
	// Dashboard tabs: the admin sees River's UI.
	findOne(t, doc, "a", "href", "/admin/river/")
	_, doc = render(t, OperationsPage(page(RoleOperator), sampleOpsList()))
	if len(findAll(doc, "a", "href", "/admin/river/")) != 0 {
		t.Error("operator sees the River UI tab")
	}
}

func TestOperationRowFragments(t *testing.T) {
	r := sampleOpsList().Rows[0]
	out := renderString(t, OpRowTR(r, false, true))
	if !strings.HasPrefix(out, `<tr id="op-`+r.ID+`" data-status="running"`) || !strings.Contains(out, `hx-swap-oob="true"`) {
		t.Errorf("oob row: %s", out)
	}
	out = renderString(t, OpRowPrepend(r, false))
	if !strings.HasPrefix(out, `<tbody hx-swap-oob="afterbegin:#ops-rows">`) {
		t.Errorf("prepend: %s", out)
	}
	if out := renderString(t, RowDelete("ops-empty")); out != `<tr id="ops-empty" hx-swap-oob="delete"></tr>` {
		t.Errorf("delete: %s", out)
	}
	out = renderString(t, OpsListFragment(sampleOpsList(), true))
	if !strings.HasPrefix(out, `<div id="ops-list"`) || !strings.Contains(out[:400], `hx-swap-oob="true"`) {
		t.Errorf("snapshot fragment: %.400s", out)
	}
	if !strings.Contains(renderString(t, OpsCounts(sampleOpsList().Counts)), `id="ops-counts" aria-live="polite" hx-swap-oob="true"`) {
		t.Error("counts are not out of band")
	}
	out = renderString(t, JobRowPrepend(sampleJobs()[0], true))
	if !strings.HasPrefix(out, `<tbody hx-swap-oob="afterbegin:#jobs-rows">`) || !strings.Contains(out, "data-elapsed-since") {
		t.Errorf("job prepend: %s", out)
	}
}

func TestOperationDetailPage(t *testing.T) {
	tok := nastyToken
	p := page(RoleOperator)
	raw, doc := render(t, OperationDetailPage(p, sampleDetail(true)))
	if strings.Contains(raw, `tok"en`) {
		t.Fatal("unescaped token")
	}
	// Poll, cancel (through a dialog whose form carries the CSRF token), retry.
	for _, action := range []string{"/admin/deferred-operations/11111111-1111-4111-8111-111111111111/poll",
		"/admin/deferred-operations/11111111-1111-4111-8111-111111111111/cancel",
		"/admin/jobs/44444444-4444-4444-8444-444444444444/retry"} {
		form := findOne(t, doc, "form", "action", action)
		if m, _ := attr(form, "method"); m != "post" {
			t.Errorf("%s method %q", action, m)
		}
		if v, _ := attr(findOne(t, form, "input", "name", "csrf_token"), "value"); v != tok {
			t.Errorf("%s csrf = %q", action, v)
		}
	}
	dlg := findOne(t, doc, "dialog", "id", "cancel-dialog")
	if _, ok := attr(dlg, "aria-labelledby"); !ok {
		t.Error("dialog without a label")
	}
	findOne(t, doc, "button", "data-dialog-open", "cancel-dialog", "commandfor", "cancel-dialog")
	findOne(t, doc, "", "data-chain", "verified")
	if n := len(findAll(doc, "li", "data-history-status", "*")); n != 2 {
		t.Errorf("%d history entries", n)
	}
	findOne(t, doc, "", "sse-connect", "/s")
	panel := findOne(t, doc, "div", "id", "op-panel")
	if v, _ := attr(panel, "hx-trigger"); v != "sse:changed, asterion:poll" {
		t.Errorf("panel trigger %q", v)
	}
	for _, want := range []string{"slow down", "rate_limit", "mia", "acme", "Diagnostics digest", "abababab…abababab"} {
		if !strings.Contains(text(doc), want) {
			t.Errorf("detail lacks %q", want)
		}
	}
	// Not cancelable: disabled, with the reason.
	_, doc = render(t, OperationDetailPage(p, sampleDetail(false)))
	btn := findOne(t, doc, "button", "aria-describedby", "cancel-unavailable")
	if _, ok := attr(btn, "disabled"); !ok {
		t.Error("cancel not disabled")
	}
	if got := text(findOne(t, doc, "", "data-cancel-reason", "*")); got != "the provider call cannot be interrupted" {
		t.Errorf("reason %q", got)
	}
	if len(findAll(doc, "button", "data-dialog-open", "*")) != 0 {
		t.Error("a dialog opener for a non-cancelable operation")
	}
	d := sampleDetail(true)
	d.ChainVerified, d.ChainError = false, "entry 2 digest mismatch"
	d.History[1].Broken = true
	_, doc = render(t, OperationDetailPage(p, d))
	findOne(t, doc, "", "data-chain", "broken")
	findOne(t, doc, "li", "data-broken", "*")
}

func TestJobsPagesStructure(t *testing.T) {
	rows := sampleJobs()
	_, doc := render(t, JobsPage(page(RoleAdmin), JobsList{Rows: rows, ShowOrg: true, BulkCap: 1000,
		Filter: JobsFilter{State: "running"}, Live: Live{StreamURL: "/admin/jobs/events", PollURL: "/admin/jobs/list"}}))
	if len(findAll(doc, "", "sse-connect", "*")) != 1 {
		t.Error("jobs page needs exactly one stream")
	}
	findOne(t, doc, "a", "data-bulk", "cancel", "href", "/admin/jobs/bulk?action=cancel&state=running")
	findOne(t, doc, "a", "data-bulk", "retry")
	_, doc = render(t, JobDetailPage(page(RoleOperator), JobDetail{Job: rows[0], Chain: rows, Live: Live{StreamURL: "/s", PollURL: "/p"}}))
	findOne(t, doc, "dialog", "id", "cancel-dialog")
	findOne(t, doc, "tr", "aria-current", "true")
	_, doc = render(t, JobDetailPage(page(RoleOperator), JobDetail{Job: rows[1], Chain: rows}))
	findOne(t, doc, "form", "action", "/admin/jobs/44444444-4444-4444-8444-444444444444/retry")
	if len(findAll(doc, "button", "data-dialog-open", "*")) != 0 {
		t.Error("cancel offered for a failed job")
	}
	_, doc = render(t, JobsBulkConfirmPage(page(RoleOperator), BulkConfirm{Action: "cancel", Count: 1000, More: true, Cap: 1000,
		Filter: JobsFilter{State: "queued"}}))
	if got := text(findOne(t, doc, "h1")); got != "Cancel 1000 jobs?" {
		t.Errorf("bulk heading %q", got)
	}
	form := findOne(t, doc, "form", "action", "/admin/jobs/bulk")
	findOne(t, form, "input", "name", "csrf_token")
	findOne(t, form, "input", "name", "state", "value", "queued")
	if !strings.Contains(text(doc), "More than 1000 jobs match") {
		t.Error("cap not stated")
	}
}

func TestHealthPanel(t *testing.T) {
	h := sampleHealth()
	_, doc := render(t, HealthPage(page(RoleOperator), h, nil))
	findOne(t, doc, "", "data-banner", "no-worker")
	findOne(t, doc, "", "data-banner", "past-due")
	findOne(t, doc, "p", "id", "health-announce", "aria-live", "polite")
	findOne(t, doc, "div", "id", "health-panel", "hx-trigger", "every 5s")
	for _, id := range []string{"chart-throughput", "chart-wait", "chart-run"} {
		fig := findOne(t, doc, "figure", "id", id)
		svg := findOne(t, fig, "svg", "role", "img")
		if v, _ := attr(svg, "aria-labelledby"); v != id+"-title "+id+"-desc" {
			t.Errorf("%s aria-labelledby %q", id, v)
		}
	}
	if n := len(findAll(findOne(t, doc, "figure", "id", "chart-throughput"), "rect")); n == 0 {
		t.Error("no bars")
	}
	if n := len(findAll(findOne(t, doc, "figure", "id", "chart-wait"), "path")); n != 2 {
		t.Errorf("%d latency lines, want 2", n)
	}
	findOne(t, doc, "tr", "data-error-kind", "timeout")
	h.Due, h.PastDue, h.WorkerAlive = 0, 0, true
	_, doc = render(t, HealthPanel(h, "csrf-token"))
	if len(findAll(doc, "", "data-banner", "*")) != 0 {
		t.Error("banners shown with live workers and nothing past due")
	}
}

func TestChartsStayInsideThePlot(t *testing.T) {
	h := sampleHealth()
	c := throughputChart(h.Series)
	if c.Empty || len(c.Bars) == 0 {
		t.Fatal("no bars for a series with data")
	}
	for _, b := range c.Bars {
		if b.X < chartLeft || b.X+b.W > chartRight || b.Y < chartTop-0.01 || b.Y+b.H > chartBottom+0.01 || b.H <= 0 {
			t.Errorf("bar %+v outside the plot", b)
		}
	}
	l := latencyChart(h.Series, true)
	if len(l.Lines) != 2 || l.Lines[0].Points == "" || !strings.HasPrefix(l.Lines[0].Points, "M") {
		t.Errorf("lines %+v", l.Lines)
	}
	if e := throughputChart(make([]SeriesPoint, 60)); !e.Empty || len(e.Bars) != 0 {
		t.Error("empty series drew bars")
	}
	if niceMax(3, 4) != 5 || niceMax(0, 1) != 1 || niceMax(12, 1) != 20 {
		t.Error("niceMax")
	}
}

func TestFormatDurationAndTiming(t *testing.T) {
	for d, want := range map[time.Duration]string{850 * time.Millisecond: "850 ms", 12 * time.Second: "12 s",
		3*time.Minute + 4*time.Second: "3 min 4 s", 3 * time.Minute: "3 min", 2*time.Hour + 5*time.Minute: "2 h 5 min",
		50 * time.Hour: "2 d 2 h", -time.Second: "0 ms"} {
		if got := FormatDuration(d); got != want {
			t.Errorf("FormatDuration(%v) = %q, want %q", d, got, want)
		}
	}
	now := time.Now()
	rows := sampleJobs()
	if label, since, _ := JobTiming(rows[0], now); label != "running" || since.IsZero() {
		t.Errorf("running timing %q %v", label, since)
	}
	if label, since, txt := JobTiming(rows[1], now); label != "ran" || !since.IsZero() || txt != "3 s" {
		t.Errorf("finished timing %q %v %q", label, since, txt)
	}
	q := JobRow{State: "queued", ScheduledAt: now.Add(time.Minute)}
	if label, _, _ := JobTiming(q, now); label != "due in" {
		t.Errorf("future timing %q", label)
	}
	q.ScheduledAt = now.Add(-time.Minute)
	if label, since, _ := JobTiming(q, now); label != "waiting" || !since.Equal(q.ScheduledAt) {
		t.Errorf("waiting timing %q", label)
	}
	if ShortID("abc") != "abc" || ShortDigest(strings.Repeat("a", 64)) != "aaaaaaaa…aaaaaaaa" {
		t.Error("short forms")
	}
}

// TestDashboardCSSCoversClasses fails when a dashboard class is missing from the built CSS
// (make generate not run after a .templ change).
func TestDashboardCSSCoversClasses(t *testing.T) {
	b, err := fs.ReadFile(static.FS, "css/app.css")
	if err != nil {
		t.Fatal(err)
	}
	css := string(b)
	h := sampleHealth()
	comps := []templ.Component{
		OperationsPage(page(RoleAdmin), sampleOpsList()), OperationDetailPage(page(RoleAdmin), sampleDetail(true)),
		OperationDetailPage(page(RoleAdmin), sampleDetail(false)),
		JobsPage(page(RoleAdmin), JobsList{Rows: sampleJobs(), ShowOrg: true, Notice: &Notice{Tone: "error", Text: "x"}}),
		JobDetailPage(page(RoleAdmin), JobDetail{Job: sampleJobs()[0], Chain: sampleJobs()}),
		JobsBulkConfirmPage(page(RoleAdmin), BulkConfirm{Action: "retry", Count: 2, Cap: 1000}),
		HealthPage(page(RoleAdmin), h, nil),
	}
	h.WorkerAlive = true
	comps = append(comps, HealthPanel(h, "csrf-token"))
	classRE := regexp.MustCompile(`class="([^"]*)"`)
	notSelector := regexp.MustCompile(`[^a-zA-Z0-9_-]`)
	seen := map[string]bool{}
	for _, c := range comps {
		for _, m := range classRE.FindAllStringSubmatch(renderString(t, c), -1) {
			for _, cl := range strings.Fields(html.UnescapeString(m[1])) {
				if seen[cl] {
					continue
				}
				seen[cl] = true
				sel := "." + notSelector.ReplaceAllStringFunc(cl, func(s string) string { return `\` + s })
				if !strings.Contains(css, sel) {
					t.Errorf("class %q (selector %s) is not in static/css/app.css: run make generate", cl, sel)
				}
			}
		}
	}
	js, err := fs.ReadFile(static.FS, "js/dashboard.js")
	if err != nil || !bytes.Contains(js, []byte("asterionLive")) {
		t.Errorf("static/js/dashboard.js missing or wrong: %v", err)
	}
}
