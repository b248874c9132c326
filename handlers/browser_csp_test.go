package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"asterion/identity"
)

// recordCSPViolations makes every document of the tab note each Content-Security-Policy
// violation in window.__csp (the script is the browser's, so the page's policy does not apply
// to it).
const recordCSPViolations = `
	window.__csp = [];
	document.addEventListener("securitypolicyviolation", function (e) {
		window.__csp.push(e.violatedDirective + " " + (e.blockedURI || "inline") + " " + (e.sample || ""));
	});`

// TestBrowserPagesUnderCSP signs in through the form and opens every kind of page (mission, the
// dashboard lists, an operation, a job, queue health) in Chromium under the server's
// Content-Security-Policy: each page goes live (htmx and the SSE extension work) and the browser
// reports no violation (no inline script, no eval, no <style> element).
func TestBrowserPagesUnderCSP(t *testing.T) {
	holdBrowserSlot(t)
	a := startAppServer(t, appServerConfig{})
	a.StartWorkers(t)
	adm := a.user(t, "csp-org", "csp-admin", identity.RoleAdmin)
	tok := apiToken(t, a, "csp-admin")
	opID := apiSubmit(t, a.Base, tok, "under the policy #sim:latency=10ms")
	c := newChrome(t)
	ctx := c.browser
	chromeDo(t, ctx, "record CSP violations", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recordCSPViolations})
		return err
	}))
	check := func(what string) {
		t.Helper()
		v := chromeEval[[]string](t, ctx, `window.__csp || ["the recorder is missing"]`)
		if len(v) > 0 {
			t.Errorf("%s: Content-Security-Policy violations: %s", what, strings.Join(v, "; "))
		}
	}
	chromeDo(t, ctx, "open the sign-in page", chromedp.Navigate(a.Base+"/login"), chromedp.WaitVisible(chromedp.ID("username")))
	check("/login")
	chromeLogin(t, ctx, a.Base, adm)
	chromeWait[bool](t, ctx, "the mission stream", `document.getElementById("live-status").textContent === "Live"`, 10*time.Second)
	submitFromPage(t, ctx, "sent from the page under the policy")
	check("/mission")

	var jobID string
	if err := a.DB.Bun.QueryRowContext(context.Background(), "SELECT id FROM sa_job ORDER BY created_at LIMIT 1").Scan(&jobID); err != nil {
		t.Fatal(err)
	}
	live := `document.querySelector('#live-status') && document.querySelector('#live-status').dataset.liveState === 'live'`
	for _, p := range []struct{ path, ready string }{
		{"/admin/deferred-operations", live},
		{"/admin/deferred-operations/" + opID, live},
		{"/admin/jobs", live},
		{"/admin/jobs/" + jobID, live},
		{"/admin/health", `document.querySelector('#health-panel') !== null && !!window.htmx`},
	} {
		chromeDo(t, ctx, "open "+p.path, chromedp.Navigate(a.Base+p.path))
		chromeWait[bool](t, ctx, p.path+" ready", p.ready, 10*time.Second)
		check(p.path)
	}
	// The health panel refreshes itself through htmx every 5 s: one refresh must happen.
	chromeEval[bool](t, ctx, `(document.querySelector('#health-panel').firstElementChild.dataset.old = "1") === "1"`)
	chromeWait[bool](t, ctx, "a health panel refresh", `!document.querySelector('#health-panel [data-old]')`, 10*time.Second)
	check("/admin/health after a refresh")
}
