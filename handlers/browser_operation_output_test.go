package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"asterion/identity"
)

// operationOutputExpr is a JavaScript expression for the operation page's output text while
// the operation runs ("" otherwise, or when the page shows none).
const operationOutputExpr = `(() => { const s = document.getElementById("op-status");
	const o = document.getElementById("job-output-text");
	return s && s.dataset.status === "running" && o ? o.textContent : ""; })()`

// waitOperationOutputLonger waits until the running operation's output is longer than prev.
func waitOperationOutputLonger(t *testing.T, ctx context.Context, prev string) string {
	t.Helper()
	return chromeWait[string](t, ctx, "operation output longer than "+jsString(prev),
		`(() => { const s = `+operationOutputExpr+`; return s.length > `+jsString(prev)+`.length ? s : ""; })()`,
		10*time.Second)
}

// TestBrowserOperationPageLiveOutput: on the operation page of a running prompt, the job's
// output grows in place without a reload; a reload mid-answer shows the text so far and it
// keeps growing; once the operation completes the page shows the whole answer.
func TestBrowserOperationPageLiveOutput(t *testing.T) {
	holdBrowserSlot(t)
	// Workers start once the page is live, so that the whole answer is written while it watches.
	cfg := liveOutputConfig(t)
	cfg.HoldWorkers = true
	app := &appServer{startLiveServerWith(t, cfg)}
	op := app.user(t, "acme", "olga", identity.RoleOperator)
	id := apiSubmit(t, app.Base, apiToken(t, app, "olga"), "narrate #sim:latency=8s #sim:tokens=80")
	br := newChrome(t)
	ctx := br.browser
	dashChromeLogin(t, ctx, app.Base, op, "%2Fadmin%2Fdeferred-operations%2F"+id, "#op-panel")
	chromeWait[bool](t, ctx, "the stream to connect", `document.querySelector('#live-status').dataset.liveState === 'live'`, 5*time.Second)
	chromeEval[bool](t, ctx, `window.__noReload = true`)
	app.StartWorkers(t)

	prev := ""
	for range 3 {
		s := waitOperationOutputLonger(t, ctx, prev)
		if !strings.HasPrefix(s, prev) {
			t.Fatalf("output %q does not continue %q", s, prev)
		}
		prev = s
	}
	if !chromeEval[bool](t, ctx, `window.__noReload === true`) {
		t.Error("the page reloaded while the output grew")
	}

	// A reload shows the text so far, and the text keeps growing after it.
	chromeDo(t, ctx, "reload mid-answer", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("op-panel")))
	reloaded := chromeEval[string](t, ctx, operationOutputExpr)
	if !strings.HasPrefix(reloaded, prev) {
		t.Errorf("after a reload the output is %q, want it to start with %q", reloaded, prev)
	}
	chromeWait[bool](t, ctx, "the stream to connect again", `document.querySelector('#live-status').dataset.liveState === 'live'`, 5*time.Second)
	grown := waitOperationOutputLonger(t, ctx, reloaded)

	final := chromeWait[string](t, ctx, "the completed operation's output",
		`(() => { const s = document.getElementById("op-status"); const o = document.getElementById("job-output-text");
			return s && s.dataset.status === "completed" && o ? o.textContent : ""; })()`, 15*time.Second)
	if !strings.HasPrefix(final, grown) || len(final) <= len(grown) {
		t.Errorf("the completed page shows %q, want the whole answer, more than %q", final, grown)
	}
}
