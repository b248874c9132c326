package handlers

import (
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"asterion/identity"
)

// TestDashboardOperationDetailAndActions covers the operator view and poll, cancel, retry.
func TestDashboardOperationDetailAndActions(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	path := "/admin/deferred-operations/" + f.opIDA
	r := e.get(t, f.opA, path)
	wantStatus(t, r, http.StatusOK, "detail")
	for _, want := range []string{"prompt.execute", "asterion.jobs", "Status history", `data-chain="verified"`,
		"Continuation digest", "Diagnostics digest", "Correlation id", f.jobIDA, `data-history-status="pending"`,
		`action="/admin/deferred-operations/` + f.opIDA + `/poll"`, `data-dialog-open="cancel-dialog"`, "mia", "acme"} {
		wantContains(t, r.body, want, "detail page")
	}
	// Never the raw payload: the prompt's text is not on the page.
	wantNotContains(t, r.body, f.textA, "detail page shows the prompt text")

	r = e.post(t, f.opA, path+"/poll", nil, true)
	wantStatus(t, r, http.StatusSeeOther, "poll")
	wantContains(t, r.location, "notice=op-polled", "poll redirect")
	wantContains(t, e.get(t, f.opA, r.location).body, "Polled the owning runtime", "poll notice")

	r = e.post(t, f.opA, path+"/cancel", nil, true)
	wantStatus(t, r, http.StatusSeeOther, "cancel")
	r = e.get(t, f.opA, r.location)
	wantContains(t, r.body, "Cancelled: the owner stopped the operation.", "cancel notice")
	wantContains(t, r.body, `id="op-status" data-status="cancelled"`, "cancelled status")
	wantContains(t, r.body, `disabled aria-describedby="cancel-unavailable"`, "disabled cancel")
	wantContains(t, r.body, "The operation has already finished (cancelled).", "cancel reason")
	if st := e.jobState(t, f.jobIDA); st != "cancelled" {
		t.Fatalf("job is %s after cancelling its operation", st)
	}
	// Cancelling again is refused with the reason, 409.
	r = e.post(t, f.opA, path+"/cancel", nil, true)
	wantStatus(t, r, http.StatusConflict, "second cancel")
	wantContains(t, r.body, "already finished", "second cancel reason")

	// A not-cancelable operation shows its reason and a disabled button.
	e.exec(t, "UPDATE sa_operation SET cancel_unavailable_reason = 'the provider call cannot be interrupted' WHERE id = ?", f.opIDB)
	r = e.get(t, f.adm, "/admin/deferred-operations/"+f.opIDB)
	wantContains(t, r.body, "the provider call cannot be interrupted", "cancel reason")
	wantContains(t, r.body, `disabled aria-describedby="cancel-unavailable"`, "disabled cancel")
	r = e.post(t, f.adm, "/admin/deferred-operations/"+f.opIDB+"/cancel", nil, true)
	wantStatus(t, r, http.StatusConflict, "not cancelable")
	wantContains(t, r.body, "Not cancelled: the provider call cannot be interrupted", "409 reason")

	// Retry the cancelled prompt job from the operation page: on to the new operation.
	r = e.get(t, f.opA, path)
	wantContains(t, r.body, `action="/admin/jobs/`+f.jobIDA+`/retry"`, "retry button")
	r = e.post(t, f.opA, "/admin/jobs/"+f.jobIDA+"/retry", url.Values{"return": {"operation"}}, true)
	wantStatus(t, r, http.StatusSeeOther, "retry")
	if !strings.HasPrefix(r.location, "/admin/deferred-operations/") || strings.Contains(r.location, f.opIDA) {
		t.Fatalf("retry went to %q, want the new operation", r.location)
	}
	r = e.get(t, f.opA, r.location)
	wantContains(t, r.body, "Retried", "retry notice")
	wantContains(t, r.body, `data-state="superseded"`, "the old job is superseded in the chain")
	r = e.get(t, f.opA, path)
	wantContains(t, r.body, "Superseded by", "old operation links its successor")
}

// operationOf is the operation id of a 202 answer's handle.
func operationOf(t *testing.T, raw []byte) string {
	t.Helper()
	return mustDecode[struct {
		OperationID string `json:"operation_id"`
	}](t, raw).OperationID
}

// linkIn returns the href of the operation link inside the element marked attr on page, or "".
func linkIn(page, attr string) string {
	m := regexp.MustCompile(`<span ` + attr + `[^>]*>(?s:.*?)<a href="(/admin/deferred-operations/[0-9a-f-]{36})"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return m[1]
}

// A failed job retried from the API: the old operation's page links its successor ("superseded
// by"), the successor's page links back ("retry of"), following either link answers 200, and
// another org's operator gets 404 on both pages while a member gets 403.
func TestOperationPagesLinkARetryBothWays(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "acme", "mona", identity.RoleMember)
	op := f.user(t, "acme", "otto", identity.RoleOperator)
	stranger := f.user(t, "globex", "gil", identity.RoleOperator)
	sub := f.submit(t, u, "doomed #sim:fail=provider_4xx")
	f.waitJob(t, u, sub.JobID, "failed")
	oldOp := operationOf(t, sub.Operation)
	r := f.do(t, "POST", "/sa-core/v1/jobs/"+sub.JobID+"/retry", u.Tok, nil)
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("retry: %s", r)
	}
	newOp := operationOf(t, mustDecode[struct {
		Operation json.RawMessage `json:"operation"`
	}](t, r.Body).Operation)
	oldPath, newPath := "/admin/deferred-operations/"+oldOp, "/admin/deferred-operations/"+newOp

	for _, c := range []struct{ path, attr, want, text, absent string }{
		{oldPath, "data-successor", newPath, "Superseded by", "data-predecessor"},
		{newPath, "data-predecessor", oldPath, "Retry of", "data-successor"},
	} {
		for _, p := range []string{c.path, c.path + "/panel"} {
			page := f.do(t, "GET", p, op.Tok, nil)
			if page.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %s", p, page)
			}
			body := string(page.Body)
			if got := linkIn(body, c.attr); got != c.want {
				t.Errorf("%s: %s link %q, want %q", p, c.attr, got, c.want)
			}
			if !strings.Contains(body, c.text) || strings.Contains(body, c.absent) {
				t.Errorf("%s: want %q and no %s", p, c.text, c.absent)
			}
		}
		if next := f.do(t, "GET", c.want, op.Tok, nil); next.StatusCode != http.StatusOK {
			t.Errorf("following %s from %s: %d", c.want, c.path, next.StatusCode)
		}
		for _, p := range []string{c.path, c.path + "/panel"} {
			if r := f.do(t, "GET", p, stranger.Tok, nil); r.StatusCode != http.StatusNotFound {
				t.Errorf("another org's operator on %s: %d, want 404", p, r.StatusCode)
			} else if strings.Contains(string(r.Body), oldOp) || strings.Contains(string(r.Body), newOp) {
				t.Errorf("another org's 404 on %s names an operation", p)
			}
			if r := f.do(t, "GET", p, u.Tok, nil); r.StatusCode != http.StatusForbidden {
				t.Errorf("a member on %s: %d, want 403", p, r.StatusCode)
			}
		}
	}
}
