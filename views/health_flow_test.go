package views

import (
	"html"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"asterion/static"
)

func sampleFlow(admin bool) HealthFlow {
	until := time.Date(2026, 12, 1, 15, 4, 5, 0, time.UTC)
	minutes := make([]time.Time, 60)
	for i := range minutes {
		minutes[i] = until.Add(time.Duration(i-59) * time.Minute).Truncate(time.Minute)
	}
	a, b := make([]int64, 60), make([]int64, 60)
	a[10], a[59], b[30] = 1200, 800, 50000
	return HealthFlow{
		Models: []ModelFlow{
			{Model: "gpt-a", RPM: 60, TPM: 40000, RPMSource: "configured", TPMSource: "learned", UsedCalls: 3, UsedTokens: 800,
				PausedUntil: &until, Calls: 10, Limited: 1},
			{Model: "gpt-b", OperatorPaused: true, RPMSource: "none", TPMSource: "none"},
		},
		Orgs: []OrgFlow{
			{ID: 7, Org: "acme", Running: 2, Queued: 5, Weight: 1, Share: "25 %", BudgetTokens: 1000, BudgetPeriod: "day", Used: 250,
				Resets: until},
			{ID: 8, Org: "globex", Weight: 3, Paused: true},
		},
		Tokens:         TokenChart{Minutes: minutes, Series: []TokenSeries{{"gpt-b", b}, {"gpt-a", a}}},
		CanPauseModels: admin,
		AccountCounts:  admin,
		UsedScope:      "every org",
	}
}

func TestHealthFlowSection(t *testing.T) {
	h := sampleHealth()
	h.Flow = sampleFlow(true)
	_, doc := render(t, HealthPanel(h, "tok-1"))
	for _, action := range []string{"/admin/health/orgs/7/pause", "/admin/health/orgs/8/resume"} {
		form := findOne(t, doc, "form", "action", action, "method", "post")
		findOne(t, form, "input", "name", "csrf_token", "value", "tok-1")
	}
	// Each model offers a pause unless an operator paused it, and a resume while any pause
	// (the operator's of gpt-b, the provider's of gpt-a) holds it.
	for _, m := range []struct{ row, action string }{{"gpt-a", "/admin/health/models/pause"}, {"gpt-a", "/admin/health/models/resume"},
		{"gpt-b", "/admin/health/models/resume"}} {
		form := findOne(t, findOne(t, doc, "tr", "data-model", m.row), "form", "action", m.action, "method", "post")
		findOne(t, form, "input", "name", "csrf_token", "value", "tok-1")
		findOne(t, form, "input", "name", "model", "value", m.row)
	}
	if n := len(findAll(findOne(t, doc, "tr", "data-model", "gpt-b"), "form", "action", "/admin/health/models/pause")); n != 0 {
		t.Errorf("a model an operator paused offers %d pause forms", n)
	}
	findOne(t, doc, "tr", "data-model", "gpt-b", "data-paused", "true")
	findOne(t, doc, "tr", "data-org", "globex", "data-paused", "true")
	fig := findOne(t, doc, "figure", "id", "chart-tokens")
	svg := findOne(t, fig, "svg", "role", "img", "aria-labelledby", "chart-tokens-title chart-tokens-desc")
	if n := len(findAll(svg, "path")); n != 2 {
		t.Errorf("%d token lines, want 2", n)
	}
	findOne(t, svg, "path", "data-token-line", "gpt-a")
	got := text(doc)
	for _, want := range []string{"3 / 60", "800 / 40000", "40000 (learned)", "250 / 1000 tokens this day (25.0 %)",
		"provider asked to wait until 15:04:05 UTC", "paused by an operator", "25 % of slots", "Calls · 429s", "10 · 1"} {
		if !strings.Contains(got, want) {
			t.Errorf("panel text lacks %q", want)
		}
	}

	h.Flow = sampleFlow(false)
	_, doc = render(t, HealthPanel(h, "tok-1"))
	if n := len(findAll(doc, "form", "action", "/admin/health/models/pause")) + len(findAll(doc, "form", "action", "/admin/health/models/resume")); n != 0 {
		t.Errorf("an operator's panel has %d model pause forms", n)
	}
	// The account's calls and 429s count every org's traffic: not on an operator's panel.
	if n := len(findAll(doc, "td", "data-account-calls", "*")); n != 0 || strings.Contains(text(doc), "429s") {
		t.Errorf("an operator's panel shows the account's calls (%d cells)", n)
	}
}

func TestTokensChartStaysInsideThePlot(t *testing.T) {
	g := tokensChart(sampleFlow(true).Tokens)
	if g.Empty || len(g.Lines) != 2 || g.Lines[0].Color == g.Lines[1].Color {
		t.Fatalf("chart %+v", g)
	}
	num := regexp.MustCompile(`[ML]([0-9.]+),([0-9.]+)`)
	for _, l := range g.Lines {
		for _, m := range num.FindAllStringSubmatch(l.Points, -1) {
			if x, y := m[1], m[2]; !within(t, x, chartLeft, chartRight) || !within(t, y, chartTop, chartBottom) {
				t.Errorf("%s: point %s,%s outside the plot", l.Model, x, y)
			}
		}
	}
	if e := tokensChart(TokenChart{}); !e.Empty || len(e.Lines) != 0 {
		t.Errorf("empty chart %+v", e)
	}
	if got := compactCount(50000); got != "50k" {
		t.Errorf("compactCount(50000) = %q", got)
	}
}

func within(t *testing.T, s string, lo, hi float64) bool {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f >= lo && f <= hi
}

// TestHealthFlowCSSCoversClasses: every class of the flow section is in the built CSS.
func TestHealthFlowCSSCoversClasses(t *testing.T) {
	b, err := fs.ReadFile(static.FS, "css/app.css")
	if err != nil {
		t.Fatal(err)
	}
	css := string(b)
	h := sampleHealth()
	h.Flow = sampleFlow(true)
	classRE := regexp.MustCompile(`class="([^"]*)"`)
	notSelector := regexp.MustCompile(`[^a-zA-Z0-9_-]`)
	for _, m := range classRE.FindAllStringSubmatch(renderString(t, HealthPanel(h, "x")), -1) {
		for _, cl := range strings.Fields(html.UnescapeString(m[1])) {
			sel := "." + notSelector.ReplaceAllStringFunc(cl, func(s string) string { return `\` + s })
			if !strings.Contains(css, sel) {
				t.Errorf("class %q is not in static/css/app.css: run make generate", cl)
			}
		}
	}
}

// TestHealthFlowShowsWhoPaused: a pause says who set it; a pause the viewer may not lift
// offers no resume button; a provider's pause offers the admin its end.
func TestHealthFlowShowsWhoPaused(t *testing.T) {
	h := sampleHealth()
	h.Flow = sampleFlow(true)
	h.Flow.Orgs[1].PausedRole, h.Flow.Orgs[1].PausedActor, h.Flow.Orgs[1].PauseHeld = "admin", "user:ada", true
	h.Flow.Models[1].PausedRole, h.Flow.Models[1].PausedActor = "admin", "cli"
	_, doc := render(t, HealthPanel(h, "tok-1"))
	if n := len(findAll(doc, "form", "action", "/admin/health/orgs/8/resume")); n != 0 {
		t.Errorf("%d resume forms for a pause the viewer may not lift", n)
	}
	findOne(t, findOne(t, doc, "tr", "data-org", "globex"), "span", "data-pause-held", "")
	got := text(doc)
	for _, want := range []string{"paused by an admin (user:ada)", "paused by an admin (cli)", "only an admin can resume it",
		"End the provider's pause"} {
		if !strings.Contains(got, want) {
			t.Errorf("panel text lacks %q", want)
		}
	}
}
