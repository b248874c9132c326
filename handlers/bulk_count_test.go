package handlers

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"asterion/identity"
)

var expectedField = regexp.MustCompile(`name="expected" value="(\d+)"`)

// TestBulkActionChecksConfirmedCount: the bulk cancel acts only on the selection its
// confirmation showed. When a job joined the selection since, the action answers 409 and
// cancels nothing; a missing or malformed count is a 400 and cancels nothing; the count shown
// now works.
func TestBulkActionChecksConfirmedCount(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	r := e.get(t, f.opA, "/admin/jobs/bulk?action=cancel&state=queued")
	m := expectedField.FindStringSubmatch(r.body)
	if r.status != http.StatusOK || m == nil || m[1] != "1" {
		t.Fatalf("confirmation: %d, expected field %v, want 1", r.status, m)
	}
	late := e.submit(t, f.member, "arrived after the confirmation")
	post := func(expected []string) dashResp {
		form := url.Values{"action": {"cancel"}, "state": {"queued"}}
		if expected != nil {
			form["expected"] = expected
		}
		return e.post(t, f.opA, "/admin/jobs/bulk", form, true)
	}
	r = post([]string{m[1]})
	if r.status != http.StatusConflict || !strings.Contains(r.body, "showed 1 job but 2 match now") {
		t.Fatalf("stale count: %d, want 409 saying what changed:\n%s", r.status, r.body)
	}
	for _, bad := range [][]string{nil, {""}, {"x"}, {"-1"}, {"1e3"}, {"1001"}} {
		if r := post(bad); r.status != http.StatusBadRequest {
			t.Errorf("expected=%q: %d, want 400", bad, r.status)
		}
	}
	for _, id := range []string{f.jobIDA, late.JobID.String()} {
		if st := e.jobState(t, id); st != "queued" {
			t.Fatalf("job %s is %s after refused bulk cancels", id, st)
		}
	}
	if r := post([]string{"2"}); r.status != http.StatusSeeOther {
		t.Fatalf("current count: %d %s", r.status, r.body)
	}
	for _, id := range []string{f.jobIDA, late.JobID.String()} {
		if st := e.jobState(t, id); st != "cancelled" {
			t.Errorf("job %s is %s after the bulk cancel", id, st)
		}
	}
}

// FuzzBulkForm feeds arbitrary form bodies to the bulk action's parsing (action, filter and the
// confirmed count), as an operator: it never panics, a count it accepts is within 0..dashBulkCap,
// and a state it keeps is a job state.
func FuzzBulkForm(f *testing.F) {
	for _, s := range []string{
		"action=cancel&state=queued&expected=5", "action=retry&state=cancelled&range=24h&expected=0",
		"action=explode", "expected=99999999999999999999", "expected=%00", "state=%ff&org=x&q=nope&cursor=zzz",
		"expected=1001&action=cancel", "expected=+1", "", "&&==&",
	} {
		f.Add(s)
	}
	s := &Server{}
	op := identity.Principal{UserID: 1, OrgID: 1, Role: identity.RoleOperator}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, body string) {
		vals, err := url.ParseQuery(body)
		if err != nil {
			return
		}
		_, _ = bulkStates(vals.Get("action"))
		q := s.parseJobsQuery(t.Context(), op, vals.Get, now)
		if q.view.State != "" && q.errs["state"] != "" {
			t.Fatalf("state %q both kept and refused", q.view.State)
		}
		if n, err := parseBulkExpected(vals.Get("expected")); err == nil && (n < 0 || n > dashBulkCap) {
			t.Fatalf("count %d accepted from %q", n, vals.Get("expected"))
		}
		if err := checkBulkCount(vals.Get("expected"), 3); err == nil {
			if n, perr := parseBulkExpected(vals.Get("expected")); perr != nil || n != 3 {
				t.Fatalf("count %q accepted for a selection of 3", vals.Get("expected"))
			}
		}
	})
}
