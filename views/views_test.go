package views

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/a-h/templ"
	"golang.org/x/net/html"

	"asterion/static"
)

// nastyToken holds every character that could break out of an attribute or a JSON string.
const nastyToken = `tok"en'<b>&amp;\x`

func render(t *testing.T, c templ.Component) (string, *html.Node) {
	t.Helper()
	var buf bytes.Buffer
	if err := c.Render(context.Background(), &buf); err != nil {
		t.Fatalf("render: %v", err)
	}
	doc, err := html.Parse(strings.NewReader(buf.String()))
	if err != nil {
		t.Fatalf("parse rendered HTML: %v", err)
	}
	return buf.String(), doc
}

func attr(n *html.Node, key string) (string, bool) {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val, true
		}
	}
	return "", false
}

// findAll returns the elements under n named tag (any tag when "") whose attributes include
// every key=value of attrs (a value of "*" only asks that the attribute exists).
func findAll(n *html.Node, tag string, attrs ...string) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && (tag == "" || n.Data == tag) {
			ok := true
			for i := 0; i+1 < len(attrs); i += 2 {
				v, has := attr(n, attrs[i])
				if !has || (attrs[i+1] != "*" && v != attrs[i+1]) {
					ok = false
					break
				}
			}
			if ok {
				out = append(out, n)
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func findOne(t *testing.T, n *html.Node, tag string, attrs ...string) *html.Node {
	t.Helper()
	got := findAll(n, tag, attrs...)
	if len(got) != 1 {
		t.Fatalf("want exactly one <%s %v>, found %d", tag, attrs, len(got))
	}
	return got[0]
}

func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return strings.Join(strings.Fields(b.String()), " ")
}

func hrefs(n *html.Node) map[string]bool {
	out := map[string]bool{}
	for _, a := range findAll(n, "a", "href", "*") {
		v, _ := attr(a, "href")
		out[v] = true
	}
	return out
}

func page(role string) Page {
	return Page{
		Title:     "Test",
		User:      &User{Name: "Ada Lovelace", Role: role, OrgName: "default"},
		CSRFToken: nastyToken,
		Nav:       NavMission,
	}
}

func TestLayoutCarriesCSRFTokenEscaped(t *testing.T) {
	raw, doc := render(t, OperationsShell(page(RoleOperator)))

	if strings.Contains(raw, `<b>`) || strings.Contains(raw, `tok"en`) {
		t.Fatalf("raw token leaked unescaped into the HTML:\n%s", raw)
	}

	body := findOne(t, doc, "body")
	hx, ok := attr(body, "hx-headers")
	if !ok {
		t.Fatal("<body> has no hx-headers")
	}
	var headers map[string]string
	if err := json.Unmarshal([]byte(hx), &headers); err != nil {
		t.Fatalf("hx-headers %q is not JSON: %v", hx, err)
	}
	if headers["X-CSRF-Token"] != nastyToken || len(headers) != 1 {
		t.Errorf("hx-headers = %v, want only X-CSRF-Token=%q", headers, nastyToken)
	}

	form := findOne(t, doc, "form", "action", "/logout")
	if m, _ := attr(form, "method"); m != "post" {
		t.Errorf("logout form method = %q, want post", m)
	}
	hidden := findOne(t, form, "input", "name", "csrf_token")
	if v, _ := attr(hidden, "value"); v != nastyToken {
		t.Errorf("logout csrf_token = %q, want %q", v, nastyToken)
	}
	if ty, _ := attr(hidden, "type"); ty != "hidden" {
		t.Errorf("csrf_token input type = %q, want hidden", ty)
	}
}

func TestLayoutWithoutTokenHasNoHXHeaders(t *testing.T) {
	p := page(RoleMember)
	p.CSRFToken = ""
	_, doc := render(t, ErrorPage(p, 404, "", ""))
	if _, ok := attr(findOne(t, doc, "body"), "hx-headers"); ok {
		t.Error("hx-headers rendered with an empty token")
	}
}

func TestLayoutReferencesAssets(t *testing.T) {
	_, doc := render(t, OperationsShell(page(RoleAdmin)))
	head := findOne(t, doc, "head")

	link := findOne(t, head, "link", "href", "/static/css/app.css")
	if rel, _ := attr(link, "rel"); rel != "stylesheet" {
		t.Errorf("css link rel = %q", rel)
	}
	var order []string
	for _, s := range findAll(head, "script") {
		src, _ := attr(s, "src")
		if _, ok := attr(s, "defer"); !ok {
			t.Errorf("script %s is not deferred", src)
		}
		order = append(order, src)
	}
	// Deferred scripts run in document order: the extension needs htmx first.
	want := []string{"/static/js/htmx.min.js", "/static/js/sse.js", "/static/js/app.js"}
	if strings.Join(order, " ") != strings.Join(want, " ") {
		t.Errorf("scripts = %v, want %v", order, want)
	}
	vp := findOne(t, head, "meta", "name", "viewport")
	if c, _ := attr(vp, "content"); !strings.Contains(c, "width=device-width") {
		t.Errorf("viewport content = %q", c)
	}
	if got := text(findOne(t, head, "title")); got != "Test · Asterion" {
		t.Errorf("title = %q", got)
	}

	skip := findOne(t, doc, "a", "href", "#main")
	if !strings.Contains(text(skip), "Skip") {
		t.Errorf("skip link text = %q", text(skip))
	}
	findOne(t, doc, "main", "id", "main")
}

func TestNavDependsOnRole(t *testing.T) {
	const (
		mission = "/mission"
		ops     = "/admin/deferred-operations"
		jobs    = "/admin/jobs"
		river   = "/admin/river"
	)
	cases := []struct {
		role      string
		want, not []string
	}{
		{RoleMember, []string{mission}, []string{ops, jobs, river}},
		{RoleOperator, []string{mission, ops, jobs}, []string{river}},
		{RoleAdmin, []string{mission, ops, jobs, river}, nil},
		{"", []string{mission}, []string{ops, jobs, river}},
	}
	for _, tc := range cases {
		t.Run("role="+tc.role, func(t *testing.T) {
			p := page(tc.role)
			_, doc := render(t, ErrorPage(p, 403, "", ""))
			nav := findOne(t, doc, "nav")
			got := hrefs(nav)
			for _, h := range tc.want {
				if !got[h] {
					t.Errorf("nav lacks %s: %v", h, got)
				}
			}
			for _, h := range tc.not {
				if hrefs(doc)[h] {
					t.Errorf("page links to %s for role %q", h, tc.role)
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("nav = %v, want exactly %v", got, tc.want)
			}
			header := findOne(t, doc, "header")
			for _, s := range []string{"Asterion", "Ada Lovelace", tc.role, "default"} {
				if !strings.Contains(text(header), s) {
					t.Errorf("header %q lacks %q", text(header), s)
				}
			}
		})
	}
}

func TestNavMarksActiveItem(t *testing.T) {
	// OperationsShell is the operations page whatever Nav the handler passed.
	_, doc := render(t, OperationsShell(page(RoleAdmin)))
	cur := findOne(t, doc, "a", "aria-current", "page")
	if h, _ := attr(cur, "href"); h != "/admin/deferred-operations" {
		t.Errorf("aria-current on %s, want the operations link", h)
	}

	p := page(RoleAdmin)
	p.Nav = NavJobs
	_, doc = render(t, ErrorPage(p, 404, "", ""))
	cur = findOne(t, doc, "a", "aria-current", "page")
	if h, _ := attr(cur, "href"); h != "/admin/jobs" {
		t.Errorf("Page.Nav ignored: aria-current on %s", h)
	}
}

func TestSignedOutPageHasNoNavOrLogout(t *testing.T) {
	_, doc := render(t, ErrorPage(Page{}, 404, "", ""))
	if n := findAll(doc, "nav"); len(n) != 0 {
		t.Error("nav rendered without a user")
	}
	if f := findAll(doc, "form", "action", "/logout"); len(f) != 0 {
		t.Error("logout form rendered without a user")
	}
	if !hrefs(doc)["/login"] {
		t.Error("no sign-in link for a signed-out visitor")
	}
}

func TestLoginPage(t *testing.T) {
	d := LoginData{Username: `ada"<x>`, CSRFToken: nastyToken, Next: "/admin/jobs?x=1&y=2"}

	t.Run("no error", func(t *testing.T) {
		raw, doc := render(t, LoginPage(d))
		if n := findAll(doc, "", "role", "alert"); len(n) != 0 {
			t.Errorf("alert shown without an error: %s", text(n[0]))
		}
		if strings.Contains(raw, "<x>") || strings.Contains(raw, `<b>`) {
			t.Error("unescaped input in login page")
		}
		form := findOne(t, doc, "form", "action", "/login")
		if m, _ := attr(form, "method"); m != "post" {
			t.Errorf("method = %q", m)
		}
		for name, want := range map[string]string{"csrf_token": nastyToken, "next": d.Next} {
			in := findOne(t, form, "input", "name", name)
			if v, _ := attr(in, "value"); v != want {
				t.Errorf("%s = %q, want %q", name, v, want)
			}
			if ty, _ := attr(in, "type"); ty != "hidden" {
				t.Errorf("%s type = %q", name, ty)
			}
		}
		for name, ac := range map[string]string{"username": "username", "password": "current-password"} {
			in := findOne(t, form, "input", "name", name)
			if v, _ := attr(in, "autocomplete"); v != ac {
				t.Errorf("%s autocomplete = %q, want %q", name, v, ac)
			}
			id, _ := attr(in, "id")
			findOne(t, form, "label", "for", id)
		}
		if v, _ := attr(findOne(t, form, "input", "name", "username"), "value"); v != d.Username {
			t.Errorf("username kept as %q", v)
		}
		if v, _ := attr(findOne(t, form, "input", "name", "password"), "type"); v != "password" {
			t.Errorf("password input type = %q", v)
		}
		if len(findAll(doc, "nav")) != 0 || len(findAll(doc, "form", "action", "/logout")) != 0 {
			t.Error("login page shows navigation or sign-out")
		}
	})

	t.Run("error", func(t *testing.T) {
		d := d
		d.Error = "Wrong username or <password>."
		_, doc := render(t, LoginPage(d))
		alert := findOne(t, doc, "", "role", "alert")
		if got := text(alert); got != d.Error {
			t.Errorf("alert text = %q, want %q", got, d.Error)
		}
	})
}

func TestOperationsShell(t *testing.T) {
	_, doc := render(t, OperationsShell(page(RoleOperator)))
	main := findOne(t, doc, "main", "id", "main")
	if got := text(findOne(t, main, "h1")); got != "Deferred operations" {
		t.Errorf("h1 = %q", got)
	}
	if !strings.Contains(text(main), "No operations yet") {
		t.Errorf("no empty state in main: %q", text(main))
	}
	p := page(RoleOperator)
	p.Title = ""
	_, doc = render(t, OperationsShell(p))
	if got := text(findOne(t, doc, "title")); got != "Deferred operations · Asterion" {
		t.Errorf("default title = %q", got)
	}
}

func TestErrorPage(t *testing.T) {
	_, doc := render(t, ErrorPage(page(RoleMember), 404, "", "No such prompt <here>."))
	main := findOne(t, doc, "main", "id", "main")
	got := text(main)
	for _, s := range []string{"404", "Page not found", "No such prompt <here>."} {
		if !strings.Contains(got, s) {
			t.Errorf("error page %q lacks %q", got, s)
		}
	}
	if !hrefs(main)["/mission"] {
		t.Error("error page has no link home")
	}

	_, doc = render(t, ErrorPage(Page{}, 403, "Operators only", ""))
	main = findOne(t, doc, "main", "id", "main")
	if !strings.Contains(text(main), "Operators only") || !hrefs(main)["/login"] {
		t.Errorf("signed-out 403 page: %q", text(main))
	}
}

func TestStatusBadge(t *testing.T) {
	cases := map[string]string{
		"pending": "amber", "queued": "amber", "running": "sky",
		"completed": "emerald", "succeeded": "emerald",
		"failed": "rose", "timed-out": "rose", "expired": "rose",
		"cancelled": "zinc", "superseded": "zinc", "unknown": "slate", "": "slate",
	}
	for status, colour := range cases {
		_, doc := render(t, StatusBadge(status))
		span := findOne(t, doc, "span", "data-status", status)
		class, _ := attr(span, "class")
		if !strings.Contains(class, "bg-"+colour+"-") {
			t.Errorf("%q badge class %q, want %s", status, class, colour)
		}
		if status == "timed-out" && text(span) != "timed out" {
			t.Errorf("label = %q", text(span))
		}
		raw, _ := render(t, StatusBadge(status))
		animated := strings.Contains(raw, "animate-pulse")
		if animated != (status == "running") {
			t.Errorf("%q animated = %v", status, animated)
		}
		if animated && !strings.Contains(raw, "motion-reduce:animate-none") {
			t.Error("running badge animates without a reduced-motion variant")
		}
	}
}

func TestRelativeTime(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 2, 3, 456000000, time.FixedZone("X", 3600))
	_, doc := render(t, RelativeTime(at))
	el := findOne(t, doc, "time", "data-relative", "*")
	if v, _ := attr(el, "datetime"); v != "2026-11-30T00:02:03.456Z" {
		t.Errorf("datetime = %q", v)
	}
	if got := text(el); got != "2026-11-30 00:02:03Z" {
		t.Errorf("fallback text = %q", got)
	}
	_, doc = render(t, RelativeTime(time.Time{}))
	if len(findAll(doc, "time")) != 0 {
		t.Error("zero time rendered a <time>")
	}
}

func TestStaticAssets(t *testing.T) {
	read := func(name string) string {
		t.Helper()
		b, err := fs.ReadFile(static.FS, name)
		if err != nil {
			t.Fatalf("static.FS: %v (run make generate)", err)
		}
		if len(b) == 0 {
			t.Fatalf("%s is empty", name)
		}
		return string(b)
	}
	css := read("css/app.css")
	htmx := read("js/htmx.min.js")
	sse := read("js/sse.js")
	app := read("js/app.js")

	if !strings.Contains(htmx, `version:"2.`) {
		t.Error("js/htmx.min.js is not htmx 2")
	}
	// htmx-ext-sse 2.x declares getSelectors, an htmx 2 extension hook; the htmx 1 extension
	// shipped as htmx.org/dist/ext/sse.js lacks it and warns "You are using an htmx 1 extension".
	if !strings.Contains(sse, "htmx.defineExtension('sse'") || !strings.Contains(sse, "getSelectors") {
		t.Error("js/sse.js is not the htmx-ext-sse 2 extension")
	}
	if strings.Contains(sse, "htmx 1 extension") {
		t.Error("js/sse.js is the htmx 1 extension from htmx.org/dist/ext")
	}
	for _, s := range []string{"data-copy", "data-relative", "setInterval"} {
		if !strings.Contains(app, s) {
			t.Errorf("js/app.js lacks %q", s)
		}
	}
	if !strings.Contains(css, "prefers-color-scheme:dark") {
		t.Error("css/app.css has no dark mode")
	}
}

// TestCSSCoversRenderedClasses fails when a class used by a component is missing from the built
// CSS, which is what happens when a .templ file changes and `make generate` is not run.
func TestCSSCoversRenderedClasses(t *testing.T) {
	b, err := fs.ReadFile(static.FS, "css/app.css")
	if err != nil {
		t.Fatal(err)
	}
	css := string(b)
	d := LoginData{Error: "x"}
	comps := []templ.Component{
		OperationsShell(page(RoleAdmin)), LoginPage(d), ErrorPage(Page{}, 404, "", "d"),
		RelativeTime(time.Now()),
	}
	for _, s := range []string{"pending", "running", "completed", "failed", "cancelled", "other"} {
		comps = append(comps, StatusBadge(s))
	}
	notSelector := regexp.MustCompile(`[^a-zA-Z0-9_-]`)
	seen := map[string]bool{}
	for _, c := range comps {
		_, doc := render(t, c)
		for _, n := range findAll(doc, "", "class", "*") {
			class, _ := attr(n, "class")
			for _, cl := range strings.Fields(class) {
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
	if len(seen) < 50 {
		t.Errorf("only %d classes seen; the walk is broken", len(seen))
	}
}
