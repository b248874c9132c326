package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"asterion/identity"
	"asterion/jobs/provider"
)

// Browser tests of the operator dashboard in Debian's Chromium (helpers in
// browser_helpers_test.go: the whole app on a loopback port, a headless browser with a fresh
// profile, screenshots and HTML of every tab saved, and their paths logged, when a test fails).
// Every wait is on a DOM condition.

// dashChromeLogin signs in through the login form and lands on next.
func dashChromeLogin(t *testing.T, ctx context.Context, base string, u appUser, next, waitFor string) {
	t.Helper()
	chromeDo(t, ctx, "sign in as "+u.Name,
		chromedp.Navigate(base+"/login?next="+next),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), u.Name),
		chromedp.SendKeys(chromedp.ID("password"), u.Password),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(waitFor)),
	)
}

// apiSubmit posts a prompt over the REST API with a bearer token and returns the operation id.
func apiSubmit(t *testing.T, base, tok, prompt string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"prompt": prompt})
	req, err := http.NewRequest(http.MethodPost, base+"/sa-core/v1/prompt", strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Operation struct {
			OperationID string `json:"operation_id"`
		} `json:"operation"`
	}
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("submit: %d", resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || out.Operation.OperationID == "" {
		t.Fatalf("submit answer: %v %+v", err, out)
	}
	return out.Operation.OperationID
}

func apiToken(t *testing.T, a *appServer, name string) string {
	t.Helper()
	tok, err := a.IDs.CreateToken(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// recordRows makes the page remember the status of every operation row as it is inserted,
// so the test sees each step even when two come in quick succession.
const recordRows = `(function(){
  if (window.__rows) return true;
  window.__rows = {}; window.__since = performance.timeOrigin;
  function note(n) {
    if (n.nodeType !== 1) return;
    var rows = n.matches && n.matches('tr[id^="op-"]') ? [n] : (n.querySelectorAll ? n.querySelectorAll('tr[id^="op-"]') : []);
    for (var i = 0; i < rows.length; i++) {
      var l = window.__rows[rows[i].id] = window.__rows[rows[i].id] || [];
      var st = rows[i].getAttribute('data-status');
      if (l[l.length-1] !== st) l.push(st);
    }
  }
  new MutationObserver(function(ms){ ms.forEach(function(m){ m.addedNodes.forEach(note); }); })
    .observe(document.body, {childList: true, subtree: true});
  return true;
})()`

// TestBrowserDashboardLiveOperations: an operator signs in, the list renders and goes live; a
// prompt submitted over the API appears and moves pending → running → completed without a
// reload; at 375 px the page does not scroll sideways; pause stops updates and resume catches up.
func TestBrowserDashboardLiveOperations(t *testing.T) {
	a := startAppServer(t, appServerConfig{Provider: provider.NewSim(provider.SimConfig{MinLatency: time.Second, MaxLatency: time.Second})})
	op := a.user(t, "acme", "olga", identity.RoleOperator)
	tok := apiToken(t, a, "olga")
	c := newChrome(t)
	ctx := c.browser
	start := time.Now()
	dashChromeLogin(t, ctx, a.Base, op, "%2Fadmin%2Fdeferred-operations", "#ops-list")
	chromeWait[bool](t, ctx, "the stream to connect", `document.querySelector('#live-status').dataset.liveState === 'live'`, 5*time.Second)
	chromeEval[bool](t, ctx, recordRows)
	chromeEval[bool](t, ctx, `window.__noReload = true`)

	id := apiSubmit(t, a.Base, tok, "hello dashboard #sim:latency=1s")
	sel := jsString("#op-" + id)
	chromeWait[bool](t, ctx, "the new row to complete",
		`(function(){var r=document.querySelector(`+sel+`);return !!r && r.dataset.status==='completed'})()`, 10*time.Second)
	seen := chromeEval[[]string](t, ctx, `window.__rows[`+jsString("op-"+id)+`] || []`)
	if strings.Join(seen, ",") != "pending,running,completed" {
		t.Errorf("the row went through %v, want pending, running, completed", seen)
	}
	if !chromeEval[bool](t, ctx, `window.__noReload === true`) {
		t.Error("the page reloaded")
	}
	if n := chromeEval[int](t, ctx, `document.querySelectorAll('#ops-rows > tr[id^="op-"]').length`); n != 1 {
		t.Errorf("%d rows, want 1", n)
	}
	chromeWait[bool](t, ctx, "the counts to follow",
		`document.querySelector('#ops-counts [data-count="completed"] [data-count-value]').textContent === '1'`, 5*time.Second)

	// Pause: nothing changes while paused; resume reconnects and the snapshot catches up.
	chromeDo(t, ctx, "pause", chromedp.Click(chromedp.CSS(`[data-live-toggle]`)))
	chromeWait[bool](t, ctx, "paused", `document.querySelector('[data-live-toggle]').getAttribute('aria-pressed') === 'true' && document.querySelector('#live-status').dataset.liveState === 'paused'`, 3*time.Second)
	id2 := apiSubmit(t, a.Base, tok, "while paused #sim:latency=10ms")
	a.waitJobState(t, promptOfOperation(t, a, id2), "succeeded", 10*time.Second)
	if chromeEval[bool](t, ctx, `!!document.querySelector(`+jsString("#op-"+id2)+`)`) {
		t.Error("a row arrived while paused")
	}
	chromeDo(t, ctx, "resume", chromedp.Click(chromedp.CSS(`[data-live-toggle]`)))
	chromeWait[bool](t, ctx, "the snapshot after resuming",
		`(function(){var r=document.querySelector(`+jsString("#op-"+id2)+`);return !!r && r.dataset.status==='completed' && document.querySelector('#live-status').dataset.liveState==='live'})()`, 5*time.Second)

	// Usable at 375 px: nothing wider than the viewport but the table's own scroller.
	chromeDo(t, ctx, "narrow viewport", chromedp.EmulateViewport(375, 800))
	chromeWait[bool](t, ctx, "no sideways scroll at 375 px", `document.documentElement.scrollWidth <= window.innerWidth`, 3*time.Second)
	t.Logf("live list test took %v in the browser", time.Since(start).Round(time.Millisecond))
}

// promptOfOperation reads the prompt id of an operation.
func promptOfOperation(t *testing.T, a *appServer, opID string) string {
	t.Helper()
	var id string
	if err := a.DB.Bun.QueryRowContext(context.Background(), "SELECT subject->>'prompt_id' FROM sa_operation WHERE id = ?", opID).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestBrowserDashboardCancel: a hanging prompt is cancelled from its detail page through the
// confirmation dialog; the detail page shows it cancelled and the list in another tab updates
// its row without a reload.
func TestBrowserDashboardCancel(t *testing.T) {
	a := startAppServer(t, appServerConfig{})
	op := a.user(t, "acme", "olga", identity.RoleOperator)
	tok := apiToken(t, a, "olga")
	c := newChrome(t)
	list := c.browser
	dashChromeLogin(t, list, a.Base, op, "%2Fadmin%2Fdeferred-operations", "#ops-list")
	chromeWait[bool](t, list, "the list stream", `document.querySelector('#live-status').dataset.liveState === 'live'`, 5*time.Second)
	chromeEval[bool](t, list, `window.__noReload = true`)

	id := apiSubmit(t, a.Base, tok, "never answers #sim:hang")
	chromeWait[bool](t, list, "the hanging row to run",
		`(function(){var r=document.querySelector(`+jsString("#op-"+id)+`);return !!r && r.dataset.status==='running'})()`, 10*time.Second)

	detail, closeDetail := c.tab("detail")
	defer closeDetail()
	chromeDo(t, detail, "open the operation",
		chromedp.Navigate(a.Base+"/admin/deferred-operations/"+id),
		chromedp.WaitVisible(chromedp.CSS(`#op-status[data-status="running"]`)),
	)
	// The panel may be re-rendered by a live update at any moment, so click through the
	// current DOM (a node id taken a moment earlier may be gone) and retry until it took.
	chromeWait[bool](t, detail, "the cancel dialog to open", `(function(){
		var d = document.querySelector('#cancel-dialog');
		if (d && d.open) return true;
		var b = document.querySelector('#op-panel [data-dialog-open="cancel-dialog"]');
		if (b) b.click();
		return false;
	})()`, 10*time.Second)
	chromeWait[bool](t, detail, "the cancel to be confirmed", `(function(){
		var b = document.querySelector('#cancel-dialog[open] button[type=submit]');
		if (!b) return false;
		b.click();
		return true;
	})()`, 10*time.Second)
	chromeDo(t, detail, "see the cancel",
		chromedp.WaitVisible(chromedp.CSS(`#op-status[data-status="cancelled"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#notice`)),
		chromedp.WaitVisible(chromedp.CSS(`#cancel-unavailable`)),
	)
	chromeWait[bool](t, list, "the list row to show the cancel",
		`(function(){var r=document.querySelector(`+jsString("#op-"+id)+`);return !!r && r.dataset.status==='cancelled'})()`, 5*time.Second)
	if !chromeEval[bool](t, list, `window.__noReload === true`) {
		t.Error("the list reloaded")
	}
	if st := a.jobState(t, promptOfOperation(t, a, id)); st != "cancelled" {
		t.Errorf("job is %s", st)
	}
}

// TestBrowserDashboardPollingFallback: when the stream cannot connect the page says so and
// refreshes the table every 2 s; a new operation still shows up.
func TestBrowserDashboardPollingFallback(t *testing.T) {
	a := startAppServer(t, appServerConfig{})
	op := a.user(t, "acme", "olga", identity.RoleOperator)
	tok := apiToken(t, a, "olga")
	c := newChrome(t)
	ctx := c.browser
	// Every EventSource of the page fails at once, as behind a proxy that drops streams.
	chromeDo(t, ctx, "break EventSource", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
			window.EventSource = function (url) {
				var s = this; s.url = url; s.readyState = 0;
				s.addEventListener = function () {}; s.removeEventListener = function () {};
				s.close = function () { s.readyState = 2; };
				setTimeout(function () { s.readyState = 2; if (s.onerror) s.onerror(new Event("error")); }, 20);
			};
			window.EventSource.CONNECTING = 0; window.EventSource.OPEN = 1; window.EventSource.CLOSED = 2;`})
		return err
	}))
	dashChromeLogin(t, ctx, a.Base, op, "%2Fadmin%2Fdeferred-operations", "#ops-list")
	chromeWait[bool](t, ctx, "the polling notice",
		`document.querySelector('#live-status').dataset.liveState === 'polling' && !document.querySelector('#live-fallback').hidden`, 5*time.Second)
	id := apiSubmit(t, a.Base, tok, "seen by polling #sim:latency=10ms")
	chromeWait[bool](t, ctx, "the row through polling",
		`(function(){var r=document.querySelector(`+jsString("#op-"+id)+`);return !!r && r.dataset.status==='completed'})()`, 8*time.Second)
}

// TestBrowserDashboardMemberRefused: a member signs in and is refused the dashboard.
func TestBrowserDashboardMemberRefused(t *testing.T) {
	a := startAppServer(t, appServerConfig{HoldWorkers: true})
	m := a.user(t, "acme", "mia", identity.RoleMember)
	c := newChrome(t)
	ctx := c.browser
	// The login page has a main h1 too: wait for the error page's own way back.
	dashChromeLogin(t, ctx, a.Base, m, "%2Fadmin%2Fdeferred-operations", `main a.btn-primary[href="/mission"]`)
	title := chromeEval[string](t, ctx, `document.querySelector('main h1').textContent`)
	if title != "Not allowed" {
		t.Errorf("member sees %q, want the 403 page", title)
	}
	if chromeEval[bool](t, ctx, `!!document.querySelector('#ops-list')`) {
		t.Error("member sees the operations list")
	}
	if chromeEval[bool](t, ctx, `!!document.querySelector('a[href="/admin/deferred-operations"]')`) {
		t.Error("member's navigation links the dashboard")
	}
}
