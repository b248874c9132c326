package handlers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/jobstest"
	"asterion/jobs/provider"
)

// chromePath is Debian's Chromium, which the browser tests drive (no browser download).
const chromePath = "/usr/bin/chromium"

// appServer is the one server harness (liveServer) as the browser tests use it: users sign in
// through the login form with a password.
type appServer struct{ *liveServer }

// appServerConfig changes the defaults of startAppServer.
type appServerConfig struct {
	// Provider defaults to the sim provider with a 300–600 ms latency.
	Provider provider.Provider
	// HoldWorkers leaves the worker runtime stopped until StartWorkers, so that jobs stay
	// queued for as long as the test needs.
	HoldWorkers bool
}

func startAppServer(t *testing.T, cfg appServerConfig) *appServer {
	t.Helper()
	if cfg.Provider == nil {
		cfg.Provider = provider.NewSim(provider.SimConfig{MinLatency: 300 * time.Millisecond, MaxLatency: 600 * time.Millisecond})
	}
	return &appServer{startLiveServerWith(t, liveServerConfig{Provider: cfg.Provider, HoldWorkers: cfg.HoldWorkers})}
}

// appUser is a signed-up user with a password for the login form.
type appUser struct {
	Name, Password string
	Viewer         jobs.Viewer
	Role           identity.Role
}

// user creates name in org (created when missing) with role and a password.
func (a *appServer) user(t *testing.T, org, name string, role identity.Role) appUser {
	t.Helper()
	ctx := context.Background()
	if _, err := a.IDs.OrgByName(ctx, org); err != nil {
		if _, err := a.IDs.CreateOrg(ctx, org); err != nil {
			t.Fatalf("create org %s: %v", org, err)
		}
	}
	pw := name + "-secret-pw"
	u, err := a.IDs.CreateUser(ctx, org, name, role, pw)
	if err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
	return appUser{Name: name, Password: pw, Role: role,
		Viewer: jobs.Viewer{OrgID: u.OrgID, UserID: u.ID}}
}

// jobState reads the state of the newest job of a prompt straight from the database.
func (a *appServer) jobState(t *testing.T, promptID string) string {
	t.Helper()
	var st string
	err := a.DB.Bun.QueryRowContext(context.Background(),
		"SELECT state FROM sa_job WHERE prompt_id = ? ORDER BY created_at DESC, id DESC LIMIT 1", promptID).Scan(&st)
	if err != nil {
		t.Fatalf("state of prompt %s: %v", promptID, err)
	}
	return st
}

// waitJobState polls the database until the newest job of a prompt is in state.
func (a *appServer) waitJobState(t *testing.T, promptID, state string, within time.Duration) {
	t.Helper()
	jobstest.WaitFor(t, within, "the job of prompt "+promptID+" to be "+state, func() bool { return a.jobState(t, promptID) == state })
}

// browserSlot lets one browser test drive Chromium at a time.
var browserSlot = make(chan struct{}, 1)

// holdBrowserSlot marks the test parallel, then waits for the browser slot and holds it until
// the test ends: browser tests overlap with the package's other tests, not with each other.
func holdBrowserSlot(t *testing.T) {
	t.Helper()
	t.Parallel()
	browserSlot <- struct{}{}
	t.Cleanup(func() { <-browserSlot })
}

// chrome is one headless Chromium with a fresh profile, for one test. Its tabs share the
// profile (and so the session cookie). When the test fails (or ASTERION_TEST_SCREENSHOTS is
// set), every open tab leaves a screenshot and its HTML in the artifact directory, whose path
// is logged.
type chrome struct {
	t       *testing.T
	browser context.Context
	mu      sync.Mutex
	tabs    map[string]context.Context
	order   []string
}

// newChrome starts the browser. Without /usr/bin/chromium the test is skipped, unless CI is set:
// then it fails.
func newChrome(t *testing.T) *chrome {
	t.Helper()
	if _, err := os.Stat(chromePath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %s is missing: %v", chromePath, err)
		}
		t.Skipf("%s is missing; browser tests need Debian's chromium package", chromePath)
	}
	profile := t.TempDir()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromePath),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(1280, 900),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
	)
	allocCtx, allocCancel := chromedp.NewExecAllocator(context.Background(), opts...)
	browser, browserCancel := chromedp.NewContext(allocCtx)
	c := &chrome{t: t, browser: browser, tabs: map[string]context.Context{}}
	t.Cleanup(func() {
		if t.Failed() || os.Getenv("ASTERION_TEST_SCREENSHOTS") != "" {
			c.saveArtifacts()
		}
		browserCancel()
		allocCancel()
	})
	if err := chromedp.Do(browser); err != nil { // starts the browser and its first tab
		t.Fatalf("start %s: %v", chromePath, err)
	}
	c.tabs["main"] = browser
	c.order = append(c.order, "main")
	return c
}

// tab returns a new tab named name (for artifacts) and a func that closes it, as a user closes
// a tab. The tab also closes with the browser.
func (c *chrome) tab(name string) (context.Context, func()) {
	ctx, cancel := chromedp.NewContext(c.browser)
	if err := chromedp.Do(ctx); err != nil {
		c.t.Fatalf("open tab %s: %v", name, err)
	}
	c.mu.Lock()
	c.tabs[name] = ctx
	c.order = append(c.order, name)
	c.mu.Unlock()
	return ctx, func() {
		c.mu.Lock()
		delete(c.tabs, name)
		c.mu.Unlock()
		cancel()
	}
}

var unsafeFileChars = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// artifactDir is $ASTERION_TEST_ARTIFACTS (CI keeps it) or a directory under the system's
// temporary directory that outlives the test.
func artifactDir(t *testing.T) string {
	base := os.Getenv("ASTERION_TEST_ARTIFACTS")
	if base == "" {
		base = filepath.Join(os.TempDir(), "asterion-test-artifacts")
	}
	dir := filepath.Join(base, unsafeFileChars.ReplaceAllString(t.Name(), "_")+"-"+time.Now().Format("150405.000"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Logf("artifacts: %v", err)
		return ""
	}
	return dir
}

// saveArtifacts writes a screenshot and the HTML of every open tab.
func (c *chrome) saveArtifacts() {
	dir := artifactDir(c.t)
	if dir == "" {
		return
	}
	c.mu.Lock()
	names := append([]string(nil), c.order...)
	tabs := make(map[string]context.Context, len(c.tabs))
	for k, v := range c.tabs {
		tabs[k] = v
	}
	c.mu.Unlock()
	for _, name := range names {
		ctx, ok := tabs[name]
		if !ok {
			continue
		}
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if png, err := chromedp.Run(sctx, chromedp.FullScreenshot(100)); err == nil {
			p := filepath.Join(dir, name+".png")
			if err := os.WriteFile(p, png, 0o644); err == nil {
				c.t.Logf("screenshot of tab %s: %s", name, p)
			}
		} else {
			c.t.Logf("screenshot of tab %s: %v", name, err)
		}
		if html, err := chromedp.Run(sctx, chromedp.Evaluate[string](`document.documentElement.outerHTML`)); err == nil {
			p := filepath.Join(dir, name+".html")
			if err := os.WriteFile(p, []byte(html), 0o644); err == nil {
				c.t.Logf("HTML of tab %s: %s", name, p)
			}
		}
		cancel()
	}
}

// chromeLogin signs in through the real login form and waits for the mission page.
func chromeLogin(t *testing.T, ctx context.Context, base string, u appUser) {
	t.Helper()
	chromeDo(t, ctx, "sign in as "+u.Name,
		chromedp.Navigate(base+"/login?next=%2Fmission"),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), u.Name),
		chromedp.SendKeys(chromedp.ID("password"), u.Password),
		chromedp.Click(chromedp.CSS(`form[action="/login"] button[type=submit]`)),
		chromedp.WaitVisible(chromedp.ID("mission")),
	)
}

// chromeDo runs browser steps with a 30 s budget and fails the test with what was being done.
func chromeDo(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(sctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// chromeEval evaluates a JavaScript expression in the tab.
func chromeEval[T any](t *testing.T, ctx context.Context, expr string) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// chromeWait waits until a JavaScript expression is truthy (checked every 25 ms, so it also works
// in a background tab) and returns its value.
func chromeWait[T any](t *testing.T, ctx context.Context, what, expr string, within time.Duration) T {
	t.Helper()
	sctx, cancel := context.WithTimeout(ctx, within+5*time.Second)
	defer cancel()
	v, err := chromedp.Run(sctx, chromedp.Poll[T](expr,
		chromedp.WithPollingInterval(25*time.Millisecond), chromedp.WithPollingTimeout(within)))
	if err != nil {
		t.Fatalf("wait for %s (%s) within %v: %v", what, expr, within, err)
	}
	return v
}

// jsString quotes s as a JavaScript string literal.
func jsString(s string) string {
	return fmt.Sprintf("%q", s)
}

// dropSelector is the CSS selector of a prompt's drop.
func dropSelector(promptID string) string { return "#drop-" + strings.TrimSpace(promptID) }
