package handlers

// Browser tests of the mission field: Debian's Chromium, headless, driven by chromedp
// against the real server on a loopback port. They wait on DOM conditions and on the page's own
// signals (the polling fallback's trigger), never a fixed time. They run in parallel with the package's other
// tests but one browser at a time (holdBrowserSlot), which keeps them quick and steady on a
// small machine.

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/provider"
)

// watchDrops records, in the page, every class list each drop of the field has had (a
// MutationObserver; htmx's transient htmx-* classes left out), and marks the document so that
// a reload would show.
const watchDrops = `(() => {
	window.__noReload = true;
	window.__classes = {};
	window.__sseMessages = 0;
	document.addEventListener("htmx:sseMessage", () => { window.__sseMessages++; });
	const record = () => {
		document.querySelectorAll("#field .drop[data-drop]").forEach((d) => {
			const list = window.__classes[d.id] = window.__classes[d.id] || [];
			const c = Array.from(d.classList).filter((x) => !x.startsWith("htmx-")).join(" ");
			if (list[list.length - 1] !== c) list.push(c);
		});
	};
	new MutationObserver(record).observe(document.getElementById("field"),
		{ subtree: true, childList: true, attributes: true, attributeFilter: ["class"] });
	record();
	return true;
})()`

// classHistory returns the class lists a drop has had, oldest first.
func classHistory(t *testing.T, ctx context.Context, promptID string) []string {
	t.Helper()
	return chromeEval[[]string](t, ctx, `window.__classes[`+jsString("drop-"+promptID)+`] || []`)
}

// wantClassOrder checks that the drop's class history holds want in this order (a class list
// per step, compared whole).
func wantClassOrder(t *testing.T, history []string, want ...string) {
	t.Helper()
	i := 0
	for _, h := range history {
		if i < len(want) && h == want[i] {
			i++
		}
	}
	if i < len(want) {
		t.Fatalf("class history %q does not go through %q in order", history, want)
	}
}

// submitFromPage types text into the compose bar, sends it, and returns the new drop's prompt
// id once the drop is on the page.
func submitFromPage(t *testing.T, ctx context.Context, text string) string {
	t.Helper()
	chromeDo(t, ctx, "type and send "+text,
		chromedp.SendKeys(chromedp.ID("compose-text"), text),
		chromedp.Click(chromedp.CSS(`#compose button[type=submit]`)),
	)
	return waitDropWithText(t, ctx, text)
}

// waitDropWithText waits for the drop whose prompt text is text and returns its prompt id.
func waitDropWithText(t *testing.T, ctx context.Context, text string) string {
	t.Helper()
	id := chromeWait[string](t, ctx, "the drop of "+text, `(() => {
		for (const d of document.querySelectorAll("#field .drop[data-drop]")) {
			const p = d.querySelector(".drop-prompt");
			if (p && p.textContent === `+jsString(text)+`) return d.id.slice(5);
		}
		return "";
	})()`, 20*time.Second)
	if _, err := uuid.Parse(id); err != nil {
		t.Fatalf("drop id %q: %v", id, err)
	}
	return id
}

// waitStream waits until the page's stream is in state (open, down).
func waitStream(t *testing.T, ctx context.Context, state string) {
	t.Helper()
	chromeWait[bool](t, ctx, "stream "+state,
		`document.getElementById("mission").dataset.stream === `+jsString(state), 20*time.Second)
}

// openMission opens /mission in ctx, waits for the stream, and installs watchDrops.
func openMission(t *testing.T, ctx context.Context, base string) {
	t.Helper()
	chromeDo(t, ctx, "open /mission", chromedp.Navigate(base+"/mission"), chromedp.WaitVisible(chromedp.ID("compose-text")))
	waitStream(t, ctx, "open")
	chromeEval[bool](t, ctx, watchDrops)
}

func settledExpr(promptID string) string {
	return `(() => { const d = document.getElementById(` + jsString("drop-"+promptID) + `);
		return !!d && d.dataset.state === "succeeded" && d.className.trim() === "drop" && !!d.querySelector(".drop-response-text"); })()`
}

// TestMissionBrowserSubmit: a submitted prompt shows at once as a queued drop, then goes
// running and settles in place, without a reload, with the state classes of its drop; reduced motion stops
// the animation.
func TestMissionBrowserSubmit(t *testing.T) {
	holdBrowserSlot(t)
	start := time.Now()
	app := startAppServer(t, appServerConfig{HoldWorkers: true})
	u := app.user(t, "acme", "ada", identity.RoleMember)
	br := newChrome(t)
	ctx := br.browser
	chromeLogin(t, ctx, app.Base, u)
	openMission(t, ctx, app.Base)

	id := submitFromPage(t, ctx, "#sim:latency=1s What is a drop?")
	// The workers are held: the drop is queued, and the compose bar was cleared.
	chromeWait[bool](t, ctx, "queued drop", `document.querySelector(`+jsString(dropSelector(id))+`).classList.contains("is-queued")`, 10*time.Second)
	if v := chromeEval[string](t, ctx, `document.getElementById("compose-text").value`); v != "" {
		t.Errorf("compose text after a successful send = %q, want it cleared", v)
	}
	if st := app.jobState(t, id); st != "queued" {
		t.Fatalf("job state %s, want queued", st)
	}

	// The queued halo breathes, unless the user prefers reduced motion.
	anim := `getComputedStyle(document.querySelector(` + jsString(dropSelector(id)+" .drop-orb") + `), "::after").animationName`
	if got := chromeEval[string](t, ctx, anim); got != "drop-breath" {
		t.Errorf("queued halo animation = %q, want drop-breath", got)
	}
	reduced := func(on bool) chromedp.Action[chromedp.Void] {
		return chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
			p := emulation.SetEmulatedMediaParams{Features: []*emulation.MediaFeature{{Name: "prefers-reduced-motion", Value: ""}}}
			if on {
				p.Features[0].Value = "reduce"
			}
			_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, p)
			return err
		})
	}
	chromeDo(t, ctx, "prefer reduced motion", reduced(true))
	if got := chromeEval[string](t, ctx, anim); got != "none" {
		t.Errorf("queued halo animation with prefers-reduced-motion = %q, want none", got)
	}
	chromeDo(t, ctx, "stop preferring reduced motion", reduced(false))

	app.StartWorkers(t)
	chromeWait[bool](t, ctx, "settled drop", settledExpr(id), 20*time.Second)
	wantClassOrder(t, classHistory(t, ctx, id), "drop is-queued", "drop is-pending", "drop")
	if !chromeEval[bool](t, ctx, `window.__noReload === true`) {
		t.Fatal("the page was reloaded")
	}
	if st := app.jobState(t, id); st != "succeeded" {
		t.Fatalf("job state %s, want succeeded", st)
	}
	// The response is collapsed, and expands.
	if chromeEval[bool](t, ctx, `document.querySelector(`+jsString(dropSelector(id)+" details.drop-response")+`).open`) {
		t.Error("the response starts expanded, want collapsed")
	}
	chromeDo(t, ctx, "expand the response", chromedp.Click(chromedp.CSS(dropSelector(id)+" details.drop-response summary")))
	chromeWait[bool](t, ctx, "expanded response", `(() => { const el = document.querySelector(`+jsString(dropSelector(id)+" .drop-response-text")+`);
		return el.offsetParent !== null && el.textContent.startsWith("Simulated answer to:"); })()`, 10*time.Second)
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}

// TestMissionBrowserClosedTab: closing the tab never cancels the work; opening /mission again
// after the job finished shows the response.
func TestMissionBrowserClosedTab(t *testing.T) {
	holdBrowserSlot(t)
	start := time.Now()
	app := startAppServer(t, appServerConfig{})
	u := app.user(t, "acme", "bea", identity.RoleMember)
	br := newChrome(t)
	chromeLogin(t, br.browser, app.Base, u)

	tab, closeTab := br.tab("first")
	openMission(t, tab, app.Base)
	id := submitFromPage(t, tab, "#sim:latency=3s outlive the tab")
	closeTab()
	app.waitJobState(t, id, "succeeded", 25*time.Second)
	var n int
	if err := app.DB.Bun.QueryRowContext(context.Background(),
		"SELECT count(*) FROM sa_job WHERE prompt_id = ? AND state <> 'succeeded'", id).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d jobs of the prompt are not succeeded: closing the tab touched the work", n)
	}

	again, _ := br.tab("again")
	openMission(t, again, app.Base)
	chromeWait[bool](t, again, "the settled drop", settledExpr(id), 10*time.Second)
	text := chromeEval[string](t, again, `document.querySelector(`+jsString(dropSelector(id)+" .drop-response-text")+`).textContent`)
	if !strings.HasPrefix(text, "Simulated answer to: outlive the tab") {
		t.Fatalf("response text %q", text)
	}
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}

// TestMissionBrowserTwoTabsDifferentParents: two tabs continue two different drops and send at
// the same moment; each prompt attaches to the parent its own tab continued, in the database and in the
// threads of both pages.
func TestMissionBrowserTwoTabsDifferentParents(t *testing.T) {
	holdBrowserSlot(t)
	start := time.Now()
	app := startAppServer(t, appServerConfig{})
	u := app.user(t, "acme", "cyd", identity.RoleMember)
	ctx := context.Background()
	var parents [2]string
	for i, text := range []string{"parent one", "parent two"} {
		out, err := app.Jobs.Submit(ctx, jobs.SubmitRequest{Viewer: u.Viewer, Prompt: text})
		if err != nil {
			t.Fatal(err)
		}
		parents[i] = out.PromptID.String()
	}
	br := newChrome(t)
	chromeLogin(t, br.browser, app.Base, u)
	tabs := [2]context.Context{}
	for i, name := range []string{"one", "two"} {
		tabs[i], _ = br.tab(name)
		openMission(t, tabs[i], app.Base)
		chromeDo(t, tabs[i], "continue from "+parents[i],
			chromedp.Click(chromedp.CSS(dropSelector(parents[i])+" .drop-continue")),
			chromedp.SendKeys(chromedp.ID("compose-text"), "child of "+parents[i]),
		)
		if v := chromeEval[string](t, tabs[i], `document.getElementById("compose-parent").value`); v != parents[i] {
			t.Fatalf("tab %s: continue from = %q, want %s", name, v, parents[i])
		}
	}
	// Send both at once.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := range tabs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sctx, cancel := context.WithTimeout(tabs[i], 20*time.Second)
			defer cancel()
			errs <- chromedp.Do(sctx, chromedp.Evaluate[chromedp.Void](`document.getElementById("compose").requestSubmit()`))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("send: %v", err)
		}
	}
	children := [2]string{}
	for i := range tabs {
		children[i] = waitDropWithText(t, tabs[i], "child of "+parents[i])
		var parent string
		if err := app.DB.Bun.QueryRowContext(ctx, "SELECT parent_id::text FROM sa_entity WHERE id = ?", children[i]).Scan(&parent); err != nil {
			t.Fatal(err)
		}
		if parent != parents[i] {
			t.Fatalf("prompt %q has parent %s, want %s", "child of "+parents[i], parent, parents[i])
		}
	}
	// Both pages show both children, each in its parent's thread, one level deeper.
	for _, tab := range tabs {
		for i, child := range children {
			chromeWait[bool](t, tab, "child in its parent's thread", `(() => {
				const d = document.querySelector(`+jsString("#thread-"+parents[i]+" "+dropSelector(child))+`);
				return !!d && d.dataset.depth === "1";
			})()`, 20*time.Second)
		}
	}
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}

// healingProvider fails like its inner provider on the first job of a prompt, and runs later
// jobs of the same prompt without their #sim:fail directive: an outage that is over by the
// time the user retries.
type healingProvider struct {
	inner provider.Provider
	mu    sync.Mutex
	first map[string]string
}

var simFailRE = regexp.MustCompile(`#sim:fail=\S*`)

func (p *healingProvider) Name() string { return p.inner.Name() }

func (p *healingProvider) Complete(ctx context.Context, req provider.Request) (provider.Response, error) {
	p.mu.Lock()
	if p.first == nil {
		p.first = map[string]string{}
	}
	first, seen := p.first[req.PromptID]
	if !seen {
		p.first[req.PromptID], first = req.JobID, req.JobID
	}
	p.mu.Unlock()
	if req.JobID != first {
		req.Text = simFailRE.ReplaceAllString(req.Text, "")
	}
	return p.inner.Complete(ctx, req)
}

// TestMissionBrowserOrphanRetry: a prompt failing with provider_4xx becomes an orphan with a
// retry chip; the chip supersedes the job and the drop follows the new one until it settles.
func TestMissionBrowserOrphanRetry(t *testing.T) {
	holdBrowserSlot(t)
	start := time.Now()
	sim := provider.NewSim(provider.SimConfig{MinLatency: 300 * time.Millisecond, MaxLatency: 600 * time.Millisecond})
	app := startAppServer(t, appServerConfig{Provider: &healingProvider{inner: sim}})
	u := app.user(t, "acme", "dee", identity.RoleMember)
	br := newChrome(t)
	ctx := br.browser
	chromeLogin(t, ctx, app.Base, u)
	openMission(t, ctx, app.Base)

	id := submitFromPage(t, ctx, "#sim:fail=provider_4xx doomed")
	sel := dropSelector(id)
	chromeWait[bool](t, ctx, "an orphan with a retry chip", `(() => { const d = document.querySelector(`+jsString(sel)+`);
		return d.classList.contains("is-orphan") && !!d.querySelector(".retry-chip") && !d.querySelector(".drop-cancel"); })()`, 20*time.Second)
	if got := chromeEval[string](t, ctx, `document.querySelector(`+jsString(sel+" .drop-error")+`).textContent`); !strings.Contains(got, "provider_4xx") {
		t.Errorf("orphan error text %q, want provider_4xx", got)
	}
	oldJob := chromeEval[string](t, ctx, `document.querySelector(`+jsString(sel)+`).dataset.jobId`)

	chromeDo(t, ctx, "click retry", chromedp.Click(chromedp.CSS(sel+" .retry-chip")))
	chromeWait[bool](t, ctx, "the retried drop settled", settledExpr(id), 20*time.Second)
	// After the chip the drop is in flight again (queued, or already running when the stream
	// was quicker than the answer to the click), then settled.
	history := classHistory(t, ctx, id)
	wantClassOrder(t, history, "drop is-orphan", "drop")
	orphanAt, inFlightAfter := -1, false
	for i, h := range history {
		switch {
		case h == "drop is-orphan":
			orphanAt = i
		case orphanAt >= 0 && (h == "drop is-queued" || h == "drop is-pending"):
			inFlightAfter = true
		}
	}
	if !inFlightAfter {
		t.Fatalf("class history %q: the drop never went back in flight after the retry", history)
	}
	newJob := chromeEval[string](t, ctx, `document.querySelector(`+jsString(sel)+`).dataset.jobId`)
	if newJob == oldJob {
		t.Fatalf("the drop still shows job %s after the retry", oldJob)
	}
	var supersedes, oldState string
	if err := app.DB.Bun.QueryRowContext(context.Background(), "SELECT supersedes::text FROM sa_job WHERE id = ?", newJob).Scan(&supersedes); err != nil {
		t.Fatal(err)
	}
	if err := app.DB.Bun.QueryRowContext(context.Background(), "SELECT state FROM sa_job WHERE id = ?", oldJob).Scan(&oldState); err != nil {
		t.Fatal(err)
	}
	if supersedes != oldJob || oldState != "superseded" {
		t.Fatalf("new job supersedes %s (want %s); old job is %s (want superseded)", supersedes, oldJob, oldState)
	}
	// The superseded attempt is hidden, and shown faded with the debug toggle.
	attempt := `document.querySelector(` + jsString(sel+` .is-superseded[data-job-id="`+oldJob+`"]`) + `)`
	if chromeEval[bool](t, ctx, attempt+`.offsetParent !== null`) {
		t.Error("the superseded attempt is visible without the debug toggle")
	}
	chromeDo(t, ctx, "debug toggle", chromedp.Click(chromedp.ID("show-superseded")))
	chromeWait[bool](t, ctx, "the faded superseded attempt", attempt+`.offsetParent !== null && getComputedStyle(`+attempt+`).opacity === "0.5"`, 10*time.Second)
	t.Logf("took %v", time.Since(start).Round(time.Millisecond))
}

// TestMissionBrowserPollingFallback: with the stream blocked, the page polls mission/recent
// while a job is in flight, settles the drop from it, and stops polling once nothing is in
// flight (and never polls while idle).
func TestMissionBrowserPollingFallback(t *testing.T) {
	holdBrowserSlot(t)
	start := time.Now()
	app := startAppServer(t, appServerConfig{})
	u := app.user(t, "acme", "eve", identity.RoleMember)
	br := newChrome(t)
	ctx := br.browser
	chromeLogin(t, ctx, app.Base, u)

	var polls, streams atomic.Int64
	requests := chromedp.Events(ctx, network.RequestWillBeSent)
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go func() {
		for ev, err := range requests {
			if err != nil || watchCtx.Err() != nil {
				return
			}
			switch {
			case strings.Contains(ev.Request.URL, "/sa-core/v1/mission/recent"):
				polls.Add(1)
			case strings.Contains(ev.Request.URL, "/mission/stream"):
				streams.Add(1)
			}
		}
	}()
	chromeDo(t, ctx, "block the page stream", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, network.SetBlockedURLs, network.SetBlockedURLsParams{
			URLPatterns: []*network.BlockPattern{{URLPattern: app.Base + "/mission/stream*", Block: true}},
		})
		return err
	}))
	chromeDo(t, ctx, "open /mission", chromedp.Navigate(app.Base+"/mission"), chromedp.WaitVisible(chromedp.ID("compose-text")))
	waitStream(t, ctx, "down")
	chromeEval[bool](t, ctx, watchDrops)
	if streams.Load() == 0 {
		t.Fatal("the page never tried its stream")
	}
	if n := polls.Load(); n != 0 {
		t.Fatalf("%d mission/recent requests while nothing is in flight", n)
	}

	id := submitFromPage(t, ctx, "settle me by polling")
	chromeWait[bool](t, ctx, "the drop settled by polling", settledExpr(id), 20*time.Second)
	wantClassOrder(t, classHistory(t, ctx, id), "drop is-queued", "drop")
	if chromeEval[int](t, ctx, `window.__sseMessages`) != 0 {
		t.Fatal("an SSE message arrived although the stream is blocked")
	}
	n := polls.Load()
	if n == 0 {
		t.Fatal("the drop settled without a mission/recent request")
	}
	// Nothing is in flight now: the poll trigger fires twice more and declines both times.
	chromeEval[bool](t, ctx, `(() => {
		window.__pollChecks = 0;
		window.__pollWanted = 0;
		const shouldPoll = asterionMission.shouldPoll;
		asterionMission.shouldPoll = () => {
			const yes = shouldPoll();
			window.__pollChecks++;
			if (yes) window.__pollWanted++;
			return yes;
		};
		return true;
	})()`)
	chromeWait[bool](t, ctx, "two more ticks of the poll trigger", `window.__pollChecks >= 2`, 10*time.Second)
	if w := chromeEval[int](t, ctx, `window.__pollWanted`); w != 0 {
		t.Fatalf("the poll trigger wanted %d more polls after nothing was in flight", w)
	}
	if m := polls.Load(); m != n {
		t.Fatalf("%d more mission/recent requests after nothing was in flight", m-n)
	}
	t.Logf("took %v (%d polls)", time.Since(start).Round(time.Millisecond), n)
}

// TestMissionBrowserComposeSurvivesLiveUpdates: text typed in the compose bar, and its
// priority and continue-from choices, survive ten live updates of the field, typed in between.
func TestMissionBrowserComposeSurvivesLiveUpdates(t *testing.T) {
	holdBrowserSlot(t)
	start := time.Now()
	app := startAppServer(t, appServerConfig{})
	u := app.user(t, "acme", "fay", identity.RoleMember)
	bctx := context.Background()
	parent, err := app.Jobs.Submit(bctx, jobs.SubmitRequest{Viewer: u.Viewer, Prompt: "an earlier thought"})
	if err != nil {
		t.Fatal(err)
	}
	br := newChrome(t)
	ctx := br.browser
	chromeLogin(t, ctx, app.Base, u)
	openMission(t, ctx, app.Base)
	chromeEval[bool](t, ctx, `document.getElementById("compose-text").__same = true`)
	chromeDo(t, ctx, "choose priority and parent",
		chromedp.Click(chromedp.CSS(dropSelector(parent.PromptID.String())+" .drop-continue")),
		chromedp.SetValue(chromedp.ID("compose-priority"), "80"),
	)
	// Work submitted elsewhere (another tab, the API) updates this field live: ten new drops,
	// each waited for, with a few words typed between them.
	base := chromeEval[int](t, ctx, `window.__sseMessages`)
	var typed strings.Builder
	for i := range 10 {
		chunk := "word" + string(rune('a'+i)) + " "
		chromeDo(t, ctx, "type "+chunk, chromedp.SendKeys(chromedp.ID("compose-text"), chunk))
		typed.WriteString(chunk)
		text := "elsewhere " + string(rune('a'+i))
		if _, err := app.Jobs.Submit(bctx, jobs.SubmitRequest{Viewer: u.Viewer, Prompt: text}); err != nil {
			t.Fatal(err)
		}
		waitDropWithText(t, ctx, text)
	}
	chromeWait[bool](t, ctx, "ten settled drops", `document.querySelectorAll("#field .drop[data-state=succeeded]").length >= 11`, 25*time.Second)
	got := chromeEval[map[string]any](t, ctx, `(() => { const ta = document.getElementById("compose-text");
		return { text: ta.value, same: ta.__same === true, priority: document.getElementById("compose-priority").value,
			parent: document.getElementById("compose-parent").value, messages: window.__sseMessages }; })()`)
	if n, _ := got["messages"].(float64); int(n)-base < 10 {
		t.Fatalf("%v live updates, want at least 10", int(n)-base)
	}
	if got["text"] != typed.String() || got["same"] != true {
		t.Fatalf("compose text = %q (same element: %v), want %q", got["text"], got["same"], typed.String())
	}
	if got["priority"] != "80" || got["parent"] != parent.PromptID.String() {
		t.Fatalf("compose choices changed: priority %v, continue from %v", got["priority"], got["parent"])
	}
	t.Logf("took %v (%v live updates)", time.Since(start).Round(time.Millisecond), got["messages"])
}
