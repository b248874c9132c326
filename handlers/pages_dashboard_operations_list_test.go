package handlers

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestDashboardOperationsList covers counts, filters, search and keyset pagination.
func TestDashboardOperationsList(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	for i := 0; i < 51; i++ {
		e.submit(t, f.opA, "bulk prompt")
	}
	r := e.get(t, f.opA, "/admin/deferred-operations")
	wantStatus(t, r, http.StatusOK, "list")
	if n := strings.Count(r.body, `<tr id="op-`); n != 50 {
		t.Errorf("first page has %d rows, want 50", n)
	}
	wantContains(t, r.body, `data-count="pending"`, "counts bar")
	countRE := regexp.MustCompile(`data-count="pending"[^>]*>\s*<span>pending</span>\s*<span[^>]*>(\d+)</span>`)
	if m := countRE.FindStringSubmatch(r.body); m == nil || m[1] != "52" {
		t.Errorf("pending count = %v, want 52", m)
	}
	// Keyset pagination: the older page holds the rest, the oldest (org A's first prompt) last.
	older := regexp.MustCompile(`href="(/admin/deferred-operations\?cursor=[^"]+)"[^>]*rel="next"`).FindStringSubmatch(r.body)
	if older == nil {
		t.Fatalf("no Older link")
	}
	r2 := e.get(t, f.opA, strings.ReplaceAll(older[1], "&amp;", "&"))
	wantStatus(t, r2, http.StatusOK, "older page")
	if n := strings.Count(r2.body, `<tr id="op-`); n != 2 {
		t.Errorf("second page has %d rows, want 2", n)
	}
	wantContains(t, r2.body, f.opIDA, "second page")
	wantContains(t, r2.body, "← Newest", "second page")
	// A bad cursor restarts at the newest page instead of failing.
	wantStatus(t, e.get(t, f.opA, "/admin/deferred-operations?cursor=bogus"), http.StatusOK, "bad cursor")

	// Search by operation id and by correlation id (the prompt's).
	r = e.get(t, f.opA, "/admin/deferred-operations?q="+f.opIDA)
	if n := strings.Count(r.body, `<tr id="op-`); n != 1 {
		t.Errorf("search by id: %d rows", n)
	}
	r = e.get(t, f.opA, "/admin/deferred-operations?q="+f.promptIDA)
	wantContains(t, r.body, `<tr id="op-`+f.opIDA, "search by correlation id")
	r = e.get(t, f.opA, "/admin/deferred-operations?q=not-a-uuid")
	wantStatus(t, r, http.StatusOK, "bad search")
	wantContains(t, r.body, `aria-invalid="true"`, "bad search is flagged")
	wantContains(t, r.body, "enter a full operation or correlation id", "bad search message")

	// Status, kind, owner, time range.
	if n := strings.Count(e.get(t, f.opA, "/admin/deferred-operations?status=completed").body, `<tr id="op-`); n != 0 {
		t.Errorf("status=completed: %d rows", n)
	}
	if n := strings.Count(e.get(t, f.opA, "/admin/deferred-operations?kind=prompt.execute&owner=asterion.jobs&range=1h").body, `<tr id="op-`); n != 50 {
		t.Errorf("kind+owner+range: %d rows", n)
	}
	if n := strings.Count(e.get(t, f.opA, "/admin/deferred-operations?owner=someone.else").body, `<tr id="op-`); n != 0 {
		t.Errorf("owner filter: %d rows", n)
	}
	future := time.Now().UTC().Add(time.Hour).Format("2006-01-02T15:04")
	if n := strings.Count(e.get(t, f.opA, "/admin/deferred-operations?from="+future).body, `<tr id="op-`); n != 0 {
		t.Errorf("from in the future: %d rows", n)
	}
	// The admin filters by org; an operator's org filter is ignored (it sees only its org).
	r = e.get(t, f.adm, "/admin/deferred-operations?org=globex")
	wantContains(t, r.body, f.opIDB, "admin org filter")
	wantNotContains(t, r.body, f.opIDA, "admin org filter")
	r = e.get(t, f.opA, "/admin/deferred-operations?org=globex&q="+f.opIDB)
	wantNotContains(t, r.body, `<tr id="op-`+f.opIDB, "operator asking for org B")
}
