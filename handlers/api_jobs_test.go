package handlers

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/identity"
	"asterion/jobs/deferred"
	"asterion/jobs/jobstest"
)

// liveJobList is GET /sa-core/v1/jobs.
type liveJobList struct {
	Items      []liveJob `json:"items"`
	NextCursor *string   `json:"next_cursor"`
}

func TestGetJob(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)
	bob := f.user(t, "acme", "bob", identity.RoleMember)
	opA := f.user(t, "acme", "olga", identity.RoleOperator)
	gary := f.user(t, "globex", "gary", identity.RoleMember)
	opB := f.user(t, "globex", "oscar", identity.RoleOperator)

	s := f.submit(t, alice, "what is the answer")
	j := f.waitJob(t, alice, s.JobID, "succeeded")
	if j.JobID != s.JobID || j.PromptID != s.PromptID || j.OrgID != alice.OrgID || j.CreatedBy != alice.ID ||
		j.Attempt != 1 || j.ResponseID == nil || j.Supersedes != nil {
		t.Errorf("job %+v", j)
	}
	if len(j.History) != 1 || j.History[0].JobID != s.JobID || j.History[0].State != "succeeded" {
		t.Errorf("history %+v, want the one job", j.History)
	}
	r := f.do(t, "GET", "/sa-core/v1/jobs/"+s.JobID, alice.Tok, nil)
	raw := mustDecode[map[string]any](t, r.Body)
	for _, k := range []string{"job_id", "prompt_id", "state", "priority", "attempt", "max_attempts", "error_kind",
		"error_message", "supersedes", "response_id", "created_at", "updated_at", "history"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("GET job has no %q: %s", k, r.Body)
		}
	}
	// The operator of the org sees it.
	if got := f.job(t, opA, s.JobID); got.JobID != s.JobID {
		t.Errorf("operator got %+v", got)
	}

	// Anyone who may not see it gets exactly the answer of an id that does not exist.
	missing := f.do(t, "GET", "/sa-core/v1/jobs/"+uuid.NewString(), gary.Tok, nil)
	checkProblem(t, missing, 404)
	for _, u := range []liveUser{gary, opB, bob} {
		r := f.do(t, "GET", "/sa-core/v1/jobs/"+s.JobID, u.Tok, nil)
		checkProblem(t, r, 404)
		if !bytes.Equal(r.Body, missing.Body) {
			t.Errorf("%s asking for another's job gets %s; a missing id gets %s", u.Name, r.Body, missing.Body)
		}
	}
	for _, id := range []string{"not-a-uuid", "123", s.JobID + "0", url.PathEscape("{" + s.JobID + "}")} {
		checkProblem(t, f.do(t, "GET", "/sa-core/v1/jobs/"+id, alice.Tok, nil), 404)
	}
	checkProblem(t, f.do(t, "GET", "/sa-core/v1/jobs/"+s.JobID, "", nil), 401)
}

func TestListJobsAccess(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)
	opA := f.user(t, "acme", "olga", identity.RoleOperator)
	admin := f.user(t, "acme", "root", identity.RoleAdmin)
	gary := f.user(t, "globex", "gary", identity.RoleMember)
	opB := f.user(t, "globex", "oscar", identity.RoleOperator)

	mine := map[string]bool{}
	for i := range 3 {
		mine[f.submit(t, alice, "acme "+strconv.Itoa(i)).JobID] = true
	}
	theirs := map[string]bool{}
	for i := range 2 {
		theirs[f.submit(t, gary, "globex "+strconv.Itoa(i)).JobID] = true
	}

	checkProblem(t, f.do(t, "GET", "/sa-core/v1/jobs", alice.Tok, nil), http.StatusForbidden)
	checkProblem(t, f.do(t, "GET", "/sa-core/v1/jobs", "", nil), http.StatusUnauthorized)

	list := func(u liveUser, query string) []liveJob {
		t.Helper()
		r := f.do(t, "GET", "/sa-core/v1/jobs"+query, u.Tok, nil)
		if r.StatusCode != 200 {
			t.Fatalf("list jobs%s as %s: %s", query, u.Name, r)
		}
		return mustDecode[liveJobList](t, r.Body).Items
	}
	ids := func(js []liveJob) map[string]bool {
		m := map[string]bool{}
		for _, j := range js {
			m[j.JobID] = true
		}
		return m
	}
	union := map[string]bool{}
	for k := range mine {
		union[k] = true
	}
	for k := range theirs {
		union[k] = true
	}
	for _, tc := range []struct {
		who   liveUser
		query string
		want  map[string]bool
	}{
		{opA, "", mine},
		{opB, "", theirs},
		{admin, "", union},
		{admin, "?org=globex", theirs},
		{admin, "?org=acme", mine},
		{opA, "?org=globex", map[string]bool{}},
		{opA, "?org=no-such-org", map[string]bool{}},
	} {
		if got := ids(list(tc.who, tc.query)); !mapsEqual(got, tc.want) {
			t.Errorf("%s lists %v with %q, want %v", tc.who.Name, got, tc.query, tc.want)
		}
	}
	for _, q := range []string{"?state=bogus", "?since=yesterday", "?limit=0", "?limit=501", "?limit=x", "?cursor=garbage!", "?cursor=" + url.QueryEscape("bm90IGEgY3Vyc29y")} {
		p := checkProblem(t, f.do(t, "GET", "/sa-core/v1/jobs"+q, opA.Tok, nil), 422)
		if len(p.Errors) == 0 {
			t.Errorf("422 for %s names no field", q)
		}
	}
}

func mapsEqual(a, b map[string]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

func TestListJobsPagination(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)
	op := f.user(t, "acme", "olga", identity.RoleOperator)
	gary := f.user(t, "globex", "gary", identity.RoleMember)
	f.submit(t, gary, "not in acme")

	var submitted []string
	for i := range 25 {
		submitted = append(submitted, f.submit(t, alice, "page me "+strconv.Itoa(i)).JobID)
	}
	slices.Reverse(submitted) // newest first

	var got []string
	cursor := ""
	pages := 0
	for {
		q := "?limit=10"
		if cursor != "" {
			q += "&cursor=" + url.QueryEscape(cursor)
		}
		r := f.do(t, "GET", "/sa-core/v1/jobs"+q, op.Tok, nil)
		if r.StatusCode != 200 {
			t.Fatalf("page %d: %s", pages, r)
		}
		page := mustDecode[liveJobList](t, r.Body)
		pages++
		if len(page.Items) > 10 {
			t.Fatalf("page %d has %d items, limit 10", pages, len(page.Items))
		}
		for _, j := range page.Items {
			got = append(got, j.JobID)
		}
		if page.NextCursor == nil {
			break
		}
		if *page.NextCursor == "" || pages > 5 {
			t.Fatalf("page %d: next_cursor %q", pages, *page.NextCursor)
		}
		cursor = *page.NextCursor
	}
	if pages != 3 {
		t.Errorf("%d pages, want 3", pages)
	}
	if !slices.Equal(got, submitted) {
		t.Errorf("paged jobs (newest first):\n%v\nwant\n%v", got, submitted)
	}

	// A filter holds across pages too.
	r := f.do(t, "GET", "/sa-core/v1/jobs?state=succeeded&limit=500", op.Tok, nil)
	for _, j := range mustDecode[liveJobList](t, r.Body).Items {
		if j.State != "succeeded" {
			t.Errorf("state=succeeded listed a %s job", j.State)
		}
	}
}

func TestCancelAndRetry(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)
	bob := f.user(t, "acme", "bob", identity.RoleMember)
	gary := f.user(t, "globex", "gary", identity.RoleMember)
	opB := f.user(t, "globex", "oscar", identity.RoleOperator)

	s := f.submit(t, alice, "wait for me #sim:hang")
	f.waitJob(t, alice, s.JobID, "running")
	cancelPath := "/sa-core/v1/jobs/" + s.JobID + "/cancel"
	retryPath := "/sa-core/v1/jobs/" + s.JobID + "/retry"

	// Nobody else may act on it, and they learn nothing: the answer of a missing id.
	missing := f.do(t, "POST", "/sa-core/v1/jobs/"+uuid.NewString()+"/cancel", gary.Tok, nil)
	checkProblem(t, missing, 404)
	for _, u := range []liveUser{gary, opB, bob} {
		for _, p := range []string{cancelPath, retryPath} {
			r := f.do(t, "POST", p, u.Tok, nil)
			checkProblem(t, r, 404)
			if !bytes.Equal(r.Body, missing.Body) {
				t.Errorf("%s on another's job: %s; on a missing id: %s", u.Name, r.Body, missing.Body)
			}
		}
	}
	checkProblem(t, f.do(t, "POST", "/sa-core/v1/jobs/not-a-uuid/cancel", alice.Tok, nil), 404)
	checkProblem(t, f.do(t, "POST", "/sa-core/v1/jobs/not-a-uuid/retry", alice.Tok, nil), 404)
	if j := f.job(t, alice, s.JobID); j.State != "running" {
		t.Fatalf("after others' attempts the job is %s", j.State)
	}

	// A running job cannot be retried.
	checkProblem(t, f.do(t, "POST", retryPath, alice.Tok, nil), http.StatusConflict)

	r := f.do(t, "POST", cancelPath, alice.Tok, nil)
	if r.StatusCode != 200 {
		t.Fatalf("cancel: %s", r)
	}
	if j := mustDecode[liveJob](t, r.Body); j.State != "cancelled" || j.JobID != s.JobID {
		t.Errorf("cancel answered %+v", j)
	}
	checkProblem(t, f.do(t, "POST", cancelPath, alice.Tok, nil), http.StatusConflict)

	r = f.do(t, "POST", retryPath, alice.Tok, nil)
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("retry: %s", r)
	}
	retried := mustDecode[struct {
		Job       liveJob        `json:"job"`
		Operation map[string]any `json:"operation"`
	}](t, r.Body)
	nj := retried.Job
	if nj.JobID == s.JobID || nj.PromptID != s.PromptID || nj.Supersedes == nil || *nj.Supersedes != s.JobID ||
		nj.Attempt != 1 || nj.State != "queued" {
		t.Errorf("retry made %+v", nj)
	}
	if r.Header.Get("Location") == "" || r.Header.Get("Location") != retried.Operation["status_href"] {
		t.Errorf("retry Location %q, status_href %v", r.Header.Get("Location"), retried.Operation["status_href"])
	}
	if err := deferred.ValidateHandle(mustDecode[map[string]json.RawMessage](t, r.Body)["operation"]); err != nil {
		t.Errorf("retry operation: %v", err)
	}
	old := f.job(t, alice, s.JobID)
	if old.State != "superseded" {
		t.Errorf("the retried job is %s, want superseded", old.State)
	}
	if len(old.History) != 2 || old.History[0].JobID != s.JobID || old.History[1].JobID != nj.JobID {
		t.Errorf("history %+v, want old then new", old.History)
	}
	// A superseded job is terminal: neither cancel nor retry again.
	checkProblem(t, f.do(t, "POST", cancelPath, alice.Tok, nil), http.StatusConflict)
	checkProblem(t, f.do(t, "POST", retryPath, alice.Tok, nil), http.StatusConflict)

	// The new job hangs too; cancel it while queued or running and check it stays cancelled
	// (a late result of the abandoned call is discarded).
	f.waitJob(t, alice, nj.JobID, "queued", "running")
	r = f.do(t, "POST", "/sa-core/v1/jobs/"+nj.JobID+"/cancel", alice.Tok, nil)
	if r.StatusCode != 200 {
		t.Fatalf("cancel the retry: %s", r)
	}
	// Once River has finished with both vehicles, no worker runs them any more: whatever the
	// abandoned calls did has been written or discarded.
	f.waitRiverFinalized(t, nj.JobID, s.JobID)
	for _, id := range []string{nj.JobID, s.JobID} {
		if j := f.job(t, alice, id); j.State != "cancelled" && j.State != "superseded" {
			t.Fatalf("job %s moved on to %s after its cancel", id, j.State)
		}
	}
}

// waitRiverFinalized waits until the River job of each prompt job is finalized: no worker
// executes it any more.
func (f *liveServer) waitRiverFinalized(t *testing.T, jobIDs ...string) {
	t.Helper()
	for _, id := range jobIDs {
		jobstest.WaitFor(t, 20*time.Second, "the river job of "+id+" to be finalized", func() bool {
			var all, open int
			err := f.DB.Bun.QueryRowContext(context.Background(),
				"SELECT count(*), count(*) FILTER (WHERE finalized_at IS NULL) FROM river_job WHERE args->>'job_id' = ?", id).Scan(&all, &open)
			if err != nil {
				t.Fatalf("river job of %s: %v", id, err)
			}
			if all == 0 {
				t.Fatalf("job %s has no river job", id)
			}
			return open == 0
		})
	}
}
