package handlers

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
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
	wantContains(t, r.body, "Retried as", "old operation links its successor")
}
