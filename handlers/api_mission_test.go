package handlers

import (
	"net/url"
	"testing"
	"time"

	"asterion/identity"
)

// liveMission is GET /sa-core/v1/mission/recent.
type liveMission struct {
	AsOf  string            `json:"as_of"`
	Items []liveMissionItem `json:"items"`
}

type liveMissionItem struct {
	PromptID  string  `json:"prompt_id"`
	ParentID  *string `json:"parent_id"`
	Text      string  `json:"text"`
	CreatedAt string  `json:"created_at"`
	Job       struct {
		JobID       string  `json:"job_id"`
		State       string  `json:"state"`
		Priority    int     `json:"priority"`
		Attempt     int     `json:"attempt"`
		MaxAttempts int     `json:"max_attempts"`
		ErrorKind   *string `json:"error_kind"`
		UpdatedAt   string  `json:"updated_at"`
	} `json:"job"`
	Response *struct {
		ResponseID string `json:"response_id"`
		Text       string `json:"text"`
		CreatedAt  string `json:"created_at"`
	} `json:"response"`
}

func (f *liveServer) mission(t *testing.T, u liveUser, query string) liveMission {
	t.Helper()
	r := f.do(t, "GET", "/sa-core/v1/mission/recent"+query, u.Tok, nil)
	if r.StatusCode != 200 {
		t.Fatalf("mission/recent%s as %s: %s", query, u.Name, r)
	}
	m := mustDecode[liveMission](t, r.Body)
	if _, err := time.Parse(time.RFC3339Nano, m.AsOf); err != nil {
		t.Fatalf("as_of %q: %v", m.AsOf, err)
	}
	return m
}

func promptSet(items []liveMissionItem) map[string]bool {
	m := map[string]bool{}
	for _, it := range items {
		m[it.PromptID] = true
	}
	return m
}

func TestMissionRecentScope(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)
	bob := f.user(t, "acme", "bob", identity.RoleMember)
	olga := f.user(t, "acme", "olga", identity.RoleOperator)
	gary := f.user(t, "globex", "gary", identity.RoleMember)

	own := map[liveUser]map[string]bool{}
	var aliceJob string
	for _, u := range []liveUser{alice, alice, bob, olga, gary} {
		s := f.submit(t, u, "from "+u.Name)
		if own[u] == nil {
			own[u] = map[string]bool{}
		}
		own[u][s.PromptID] = true
		if u == alice {
			aliceJob = s.JobID
		}
	}
	acme := map[string]bool{}
	for _, u := range []liveUser{alice, bob, olga} {
		for p := range own[u] {
			acme[p] = true
		}
	}
	for _, tc := range []struct {
		who  liveUser
		want map[string]bool
	}{{alice, own[alice]}, {bob, own[bob]}, {gary, own[gary]}, {olga, acme}} {
		if got := promptSet(f.mission(t, tc.who, "").Items); !mapsEqual(got, tc.want) {
			t.Errorf("%s sees %v, want %v", tc.who.Name, got, tc.want)
		}
	}

	// An item carries the prompt, its job and, once there, the response.
	f.waitJob(t, alice, aliceJob, "succeeded")
	for _, it := range f.mission(t, alice, "").Items {
		if it.Job.JobID != aliceJob {
			continue
		}
		if it.Text != "from alice" || it.Job.State != "succeeded" || it.Job.Attempt != 1 || it.Response == nil ||
			it.Response.ResponseID == "" || it.Response.Text == "" || it.CreatedAt == "" || it.Job.UpdatedAt == "" {
			t.Errorf("item %+v", it)
		}
	}
}

func TestMissionRecentChaining(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)

	first := f.mission(t, alice, "")
	if len(first.Items) != 0 {
		t.Fatalf("a new user sees %d items", len(first.Items))
	}
	s := f.submit(t, alice, "appear after as_of")
	next := f.mission(t, alice, "?since="+url.QueryEscape(first.AsOf))
	if !promptSet(next.Items)[s.PromptID] {
		t.Fatalf("the prompt submitted after as_of %s is missing from since=as_of: %+v", first.AsOf, next.Items)
	}
	// Chaining again sees every later change of the same prompt (it runs to the end).
	j := f.waitJob(t, alice, s.JobID, "succeeded")
	last := f.mission(t, alice, "?since="+url.QueryEscape(next.AsOf))
	var seen bool
	for _, it := range last.Items {
		if it.PromptID == s.PromptID {
			seen = true
			if it.Job.State != "succeeded" || it.Response == nil {
				t.Errorf("the chained call shows %s without the final state: %+v", j.State, it)
			}
		}
	}
	if !seen {
		t.Errorf("the job's later changes are missing from since=%s", next.AsOf)
	}
	// Nothing changed since: nothing returned, and as_of does not go backwards.
	quiet := f.mission(t, alice, "?since="+url.QueryEscape(last.AsOf))
	for _, it := range quiet.Items {
		if it.PromptID == s.PromptID && it.Job.UpdatedAt < last.AsOf {
			t.Errorf("a change from before since=%s came back: %+v", last.AsOf, it)
		}
	}
	a, _ := time.Parse(time.RFC3339Nano, last.AsOf)
	b, _ := time.Parse(time.RFC3339Nano, quiet.AsOf)
	if b.Before(a) {
		t.Errorf("as_of went backwards: %s then %s", last.AsOf, quiet.AsOf)
	}

	// Limits and bad parameters.
	for range 3 {
		f.submit(t, alice, "more")
	}
	if got := f.mission(t, alice, "?limit=1"); len(got.Items) != 1 {
		t.Errorf("limit=1 gave %d items", len(got.Items))
	}
	if got := f.mission(t, alice, "?limit=500"); len(got.Items) != 4 {
		t.Errorf("limit=500 gave %d items, want 4", len(got.Items))
	}
	for q, field := range map[string]string{
		"?since=yesterday": "since", "?since=2026-01-01": "since", "?limit=0": "limit", "?limit=501": "limit",
		"?limit=-1": "limit", "?limit=ten": "limit",
	} {
		p := checkProblem(t, f.do(t, "GET", "/sa-core/v1/mission/recent"+q, alice.Tok, nil), 422)
		if _, ok := p.Errors[field]; !ok {
			t.Errorf("%s: 422 does not name %s: %+v", q, field, p)
		}
	}
	checkProblem(t, f.do(t, "GET", "/sa-core/v1/mission/recent", "", nil), 401)
}

// Paging mission/recent with a small limit by chaining as_of still returns every prompt.
func TestMissionRecentChainingWithLimit(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	alice := f.user(t, "acme", "alice", identity.RoleMember)
	want := map[string]bool{}
	for range 7 {
		want[f.submit(t, alice, "page").PromptID] = true
	}
	got := map[string]bool{}
	since := ""
	for i := 0; i < 20 && len(got) < len(want); i++ {
		q := "?limit=2"
		if since != "" {
			q += "&since=" + url.QueryEscape(since)
		}
		m := f.mission(t, alice, q)
		if len(m.Items) > 2 {
			t.Fatalf("limit=2 gave %d items", len(m.Items))
		}
		for _, it := range m.Items {
			got[it.PromptID] = true
		}
		since = m.AsOf
	}
	if !mapsEqual(got, want) {
		t.Errorf("chaining with limit=2 saw %d of %d prompts", len(got), len(want))
	}
}
