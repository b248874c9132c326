package handlers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs/usage"
)

// TestBrowserHealthPauseOrg: an operator opens the health page in Chromium under the server's
// Content-Security-Policy, sees the tokens chart drawn from real usage, pauses its org with
// the row's button and sees the notice and the paused row; the flag is in the database.
func TestBrowserHealthPauseOrg(t *testing.T) {
	holdBrowserSlot(t)
	a := startAppServer(t, appServerConfig{HoldWorkers: true})
	op := a.user(t, "acme", "olga", identity.RoleOperator)
	ctx := context.Background()
	m, err := usage.New(usage.Config{DB: a.DB.Bun})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Record(ctx, a.DB.Bun, usage.AttemptUsage{JobID: uuid.New(), Attempt: 1, OrgID: op.Viewer.OrgID,
		Model: "gpt-chart", StartedAt: time.Now(), InputTokens: 120, OutputTokens: 80}); err != nil {
		t.Fatal(err)
	}
	c := newChrome(t)
	tab := c.browser
	chromeDo(t, tab, "record CSP violations", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: recordCSPViolations})
		return err
	}))
	dashChromeLogin(t, tab, a.Base, op, "%2Fadmin%2Fhealth", `#flow-orgs-section tr[data-org="acme"]`)
	chromeWait[bool](t, tab, "the tokens line", `!!document.querySelector('#chart-tokens path[data-token-line="gpt-chart"]')`, 5*time.Second)
	// The panel refreshes every 5 s and may replace the button just before a click: click
	// after the script returns (the click navigates), and click again if no page came back.
	for try := 0; ; try++ {
		if !chromeEval[bool](t, tab, `(function(){
			var b = document.querySelector('#flow-orgs-section tr[data-org="acme"] form[action$="/pause"] button[type=submit]');
			if (!b) return false;
			setTimeout(function(){ b.click(); }, 0);
			return true;
		})()`) {
			t.Fatal("no pause button on acme's row")
		}
		wctx, cancel := context.WithTimeout(tab, 5*time.Second)
		err := chromedp.Do(wctx, chromedp.WaitVisible(chromedp.CSS(`#notice`)))
		cancel()
		if err == nil {
			break
		}
		if try == 2 {
			t.Fatalf("no notice after three clicks: %v", err)
		}
	}
	chromeDo(t, tab, "see the pause",
		chromedp.WaitVisible(chromedp.CSS(`#notice`)),
		chromedp.WaitVisible(chromedp.CSS(`#flow-orgs-section tr[data-org="acme"][data-paused="true"]`)),
	)
	if n := chromeEval[string](t, tab, `document.querySelector('#notice').textContent`); !strings.Contains(n, "Paused the organisation") {
		t.Errorf("notice %q", n)
	}
	if v := chromeEval[[]string](t, tab, `window.__csp || ["the recorder is missing"]`); len(v) > 0 {
		t.Errorf("Content-Security-Policy violations: %s", strings.Join(v, "; "))
	}
	var paused bool
	if err := a.DB.Bun.QueryRowContext(ctx, "SELECT paused FROM sa_org_share WHERE org_id = ?", op.Viewer.OrgID).Scan(&paused); err != nil || !paused {
		t.Fatalf("org paused=%v (%v) after the click", paused, err)
	}
}
