package handlers

import (
	"net/http"
	"strings"
	"testing"

	"asterion/identity"
	"asterion/jobs/deferred"
)

// TestSupersededOperationLinksItsSuccessor: after a retry the old operation's status carries
// superseded_by and a Link rel="successor", and following it reaches the new job's operation.
func TestSupersededOperationLinksItsSuccessor(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "acme", "alice", identity.RoleMember)
	stranger := f.user(t, "globex", "gary", identity.RoleMember)
	sub := f.submit(t, u, "retry me")
	f.waitJob(t, u, sub.JobID, "succeeded")
	old := mustDecode[struct {
		OperationID string `json:"operation_id"`
		StatusHref  string `json:"status_href"`
	}](t, sub.Operation)
	r := f.do(t, "POST", "/sa-core/v1/jobs/"+sub.JobID+"/retry", u.Tok, nil)
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("retry: %s", r)
	}
	retried := mustDecode[struct {
		Operation struct {
			OperationID string `json:"operation_id"`
			StatusHref  string `json:"status_href"`
		} `json:"operation"`
	}](t, r.Body)

	st := f.do(t, "GET", old.StatusHref, u.Tok, nil)
	if st.StatusCode != http.StatusOK {
		t.Fatalf("old status: %s", st)
	}
	if err := deferred.ValidateStatus(st.Body); err != nil {
		t.Errorf("the old status does not validate: %v\n%s", err, st.Body)
	}
	doc := mustDecode[struct {
		SupersededBy *struct {
			OperationID string `json:"operation_id"`
			StatusHref  string `json:"status_href"`
		} `json:"superseded_by"`
	}](t, st.Body)
	if doc.SupersededBy == nil || doc.SupersededBy.OperationID != retried.Operation.OperationID ||
		doc.SupersededBy.StatusHref != retried.Operation.StatusHref {
		t.Fatalf("superseded_by %+v, want the retry's operation %s", doc.SupersededBy, retried.Operation.OperationID)
	}
	link := st.Header.Get("Link")
	if link != "<"+retried.Operation.StatusHref+`>; rel="successor"` {
		t.Errorf("Link %q", link)
	}
	next := f.do(t, "GET", strings.TrimSuffix(strings.TrimPrefix(strings.Split(link, ";")[0], "<"), ">"), u.Tok, nil)
	if next.StatusCode != http.StatusOK || !strings.Contains(string(next.Body), retried.Operation.OperationID) {
		t.Errorf("following the link: %s", next)
	}
	if r := f.do(t, "GET", old.StatusHref, stranger.Tok, nil); r.StatusCode != http.StatusNotFound || r.Header.Get("Link") != "" {
		t.Errorf("another org's view of the old status: %s (Link %q)", r, r.Header.Get("Link"))
	}
	// An operation nothing replaced has neither.
	if fresh := f.do(t, "GET", retried.Operation.StatusHref, u.Tok, nil); fresh.Header.Get("Link") != "" ||
		strings.Contains(string(fresh.Body), "superseded_by") {
		t.Errorf("a live operation: %s", fresh)
	}
}
