package handlers

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"asterion/identity"
	"asterion/jobs/provider"
)

// startOutputAppServer is startAppServer with live output: the workers' output writer feeds
// the server's output hub, as in serve.
func startOutputAppServer(t *testing.T) *appServer {
	t.Helper()
	cfg := liveOutputConfig(t)
	cfg.Provider = provider.NewSim(provider.SimConfig{MinLatency: 300 * time.Millisecond, MaxLatency: 600 * time.Millisecond})
	return &appServer{startLiveServerWith(t, cfg)}
}

// outputExpr is a JavaScript expression for the text of a drop's output element while the drop
// is running ("" otherwise, or when it has none).
func runningOutputExpr(promptID string) string {
	return `(() => { const d = document.getElementById(` + jsString("drop-"+promptID) + `);
		if (!d || d.dataset.state !== "running" || d.className.trim() !== "drop is-pending") return "";
		const o = document.getElementById("out-" + d.dataset.jobId);
		return o ? o.textContent : ""; })()`
}

// waitLonger waits until the running drop's output is longer than prev and returns it.
func waitLonger(t *testing.T, ctx context.Context, promptID, prev string) string {
	t.Helper()
	return chromeWait[string](t, ctx, "output longer than "+jsString(prev)+" on a running drop",
		`(() => { const s = `+runningOutputExpr(promptID)+`; return s.length > `+jsString(prev)+`.length ? s : ""; })()`,
		10*time.Second)
}

var timeRE = regexp.MustCompile(`<time datetime="([^"]*)"[^>]*>[^<]*</time>`)

// dropHTML is a drop's outerHTML with its times reduced to their datetime (app.js writes their
// text relative to now, and their title, when it gets to them).
func dropHTML(t *testing.T, ctx context.Context, promptID string) string {
	t.Helper()
	html := chromeEval[string](t, ctx, `document.getElementById(`+jsString("drop-"+promptID)+`).outerHTML`)
	return timeRE.ReplaceAllString(html, `<time datetime="$1"></time>`)
}

// TestMissionBrowserLiveOutput: a running prompt's text grows in place in a polite live region,
// the drop keeping its running classes and the compose bar its draft; a reload mid-answer shows
// the text so far and it keeps growing; the settled drop is what a reload shows; cancelling
// mid-answer keeps the partial text, also after a reload.
func TestMissionBrowserLiveOutput(t *testing.T) {
	holdBrowserSlot(t)
	start := time.Now()
	app := startOutputAppServer(t)
	u := app.user(t, "acme", "lena", identity.RoleMember)
	br := newChrome(t)
	ctx := br.browser
	chromeLogin(t, ctx, app.Base, u)
	openMission(t, ctx, app.Base)

	id := submitFromPage(t, ctx, "#sim:latency=4s #sim:tokens=40 Tell me a long story")
	chromeDo(t, ctx, "type a draft", chromedp.SendKeys(chromedp.ID("compose-text"), "a draft in progress"))
	// Three samples while the drop runs, each longer than the one before and continuing it.
	var samples []string
	prev := ""
	for range 3 {
		s := waitLonger(t, ctx, id, prev)
		if !strings.HasPrefix(s, prev) {
			t.Fatalf("output %q does not continue %q", s, prev)
		}
		samples = append(samples, s)
		prev = s
	}
	jobID := chromeEval[string](t, ctx, `document.getElementById(`+jsString("drop-"+id)+`).dataset.jobId`)
	if live := chromeEval[string](t, ctx, `document.getElementById("out-`+jobID+`").getAttribute("aria-live")`); live != "polite" {
		t.Errorf("output aria-live = %q, want polite", live)
	}
	if v := chromeEval[string](t, ctx, `document.getElementById("compose-text").value`); v != "a draft in progress" {
		t.Errorf("compose draft while output grows = %q", v)
	}
	if !chromeEval[bool](t, ctx, `window.__noReload === true`) {
		t.Fatal("the page was reloaded")
	}
	// The end of the text stays in view: with the output element made one line high, each
	// append scrolls it to its end. The height is a rule added to the page's style sheet (the
	// content security policy refuses a new style element), not the element's own style: a
	// re-rendered drop (a heartbeat's progress, say) replaces the element, and the rule holds
	// for the new one as well.
	chromeEval[bool](t, ctx, `(() => { const sheet = document.styleSheets[document.styleSheets.length - 1];
		sheet.insertRule("#out-`+jobID+` { max-height: 1.2em; }", sheet.cssRules.length); return true; })()`)
	prev = waitLonger(t, ctx, id, prev)
	if !chromeEval[bool](t, ctx, `(() => { const o = document.getElementById("out-`+jobID+`");
		return o.scrollHeight > o.clientHeight && o.scrollTop + o.clientHeight >= o.scrollHeight - 1; })()`) {
		t.Errorf("after an append the output is not scrolled to its end (scroll height, client height, scroll top, max-height, text: %s)",
			chromeEval[string](t, ctx, `(() => { const o = document.getElementById("out-`+jobID+`");
			return [o.scrollHeight, o.clientHeight, o.scrollTop, getComputedStyle(o).maxHeight, JSON.stringify(o.textContent)].join(", "); })()`))
	}

	// A reload mid-answer: the page shows the text so far at once, then it keeps growing.
	chromeDo(t, ctx, "reload mid-answer", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("compose-text")))
	first := chromeEval[string](t, ctx, runningOutputExpr(id))
	if !strings.HasPrefix(first, prev) {
		t.Fatalf("after a reload the output is %q, want it to start with %q (the text so far)", first, prev)
	}
	waitStream(t, ctx, "open")
	chromeEval[bool](t, ctx, watchDrops)
	grown := waitLonger(t, ctx, id, first)
	if !strings.HasPrefix(grown, first) {
		t.Fatalf("after a reload the output %q does not continue %q", grown, first)
	}

	// Settled: the drop the stream rendered is the one a reload shows.
	chromeWait[bool](t, ctx, "settled drop", settledExpr(id), 20*time.Second)
	settled := dropHTML(t, ctx, id)
	if strings.Contains(settled, "data-output") {
		t.Errorf("the settled drop still has its live output element: %s", settled)
	}
	chromeDo(t, ctx, "reload after success", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("compose-text")))
	waitStream(t, ctx, "open")
	if again := dropHTML(t, ctx, id); again != settled {
		t.Errorf("settled drop differs after a reload:\nlive:   %s\nreload: %s", settled, again)
	}
	chromeEval[bool](t, ctx, watchDrops)

	// Cancel mid-answer: the partial text stays on the cancelled drop. The answer runs for an
	// hour (a word every 100 ms), so it is still running whenever the click lands, however
	// loaded the machine: with a 4 s answer the cancel raced the answer's own end.
	cid := submitFromPage(t, ctx, "#sim:latency=1h #sim:tokens=36000 Another long story")
	partial := waitLonger(t, ctx, cid, "")
	partial = waitLonger(t, ctx, cid, partial)
	chromeDo(t, ctx, "cancel mid-answer", chromedp.Click(chromedp.CSS(dropSelector(cid)+" .drop-cancel")))
	cancelledExpr := `(() => { const d = document.getElementById(` + jsString("drop-"+cid) + `);
		if (!d || d.dataset.state !== "cancelled") return "";
		const o = document.getElementById("out-" + d.dataset.jobId);
		return o ? o.textContent : ""; })()`
	kept := chromeWait[string](t, ctx, "the cancelled drop with its partial text", cancelledExpr, 10*time.Second)
	if !strings.HasPrefix(kept, partial) || len(strings.Fields(kept)) >= 36000 {
		t.Errorf("cancelled drop keeps %q, want the partial text starting %q", kept, partial)
	}
	if st := app.jobState(t, cid); st != "cancelled" {
		t.Fatalf("job state %s, want cancelled", st)
	}
	chromeDo(t, ctx, "reload after the cancel", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("compose-text")))
	if after := chromeEval[string](t, ctx, cancelledExpr); after != kept {
		t.Errorf("after a reload the cancelled drop shows %q, want %q", after, kept)
	}
	t.Logf("samples %q; took %v", samples, time.Since(start).Round(time.Millisecond))
}
