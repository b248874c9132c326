package handlers

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"asterion/identity"
	"asterion/jobs"
	"asterion/jobs/usage"
)

// TestSubmitOverBudget: once an org's usage reaches its budget, its submits answer 429 with a
// budget-exhausted problem and the seconds until the period resets; another org is not held.
func TestSubmitOverBudget(t *testing.T) {
	t.Parallel()
	var meter *usage.Meter
	f := startLiveServerWith(t, liveServerConfig{Jobs: func(cfg *jobs.Config) {
		m, err := usage.New(usage.Config{DB: cfg.DB, StatusTTL: -1})
		if err != nil {
			t.Fatal(err)
		}
		cfg.Usage, meter = m, m
	}})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	other := f.user(t, "globex", "gary", identity.RoleMember)
	if err := meter.SetBudget(context.Background(), u.OrgID, usage.Budget{Tokens: 5, Period: usage.Month}); err != nil {
		t.Fatal(err)
	}
	first := f.submit(t, u, "spend the budget #sim:tokens=5")
	f.waitJob(t, u, first.JobID, "succeeded")

	r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, map[string]any{"prompt": "one more"})
	if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("submit over budget: %s", r)
	}
	var p Problem
	if err := json.Unmarshal(r.Body, &p); err != nil || !strings.HasSuffix(p.Type, "/budget-exhausted") || p.Status != 429 {
		t.Errorf("problem %+v (%v)", p, err)
	}
	if secs, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || secs < 1 || secs > 31*24*3600 {
		t.Errorf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	f.submit(t, other, "another org is not held")
}

// TestSubmitLimitsAnswerTheirProblems: the queue quota and the submit rate answer 429 with their
// problem types and Retry-After, and a model outside the list 422 naming options.model.
func TestSubmitLimitsAnswerTheirProblems(t *testing.T) {
	t.Parallel()
	f := startLiveServerWith(t, liveServerConfig{HoldWorkers: true, Jobs: func(cfg *jobs.Config) {
		cfg.OrgMaxQueued, cfg.SubmitRate, cfg.Models = 1, 0.1, []string{"sim-1"}
	}})
	u := f.user(t, "acme", "alice", identity.RoleMember)
	bob := f.user(t, "acme", "bob", identity.RoleMember)
	v := f.user(t, "globex", "gary", identity.RoleMember)
	f.submit(t, u, "fills the quota")
	check := func(r liveResp, status int, kind string) {
		t.Helper()
		var p Problem
		if err := json.Unmarshal(r.Body, &p); err != nil || r.StatusCode != status || !strings.HasSuffix(p.Type, kind) {
			t.Errorf("want %d %s: %s", status, kind, r)
		}
		if status == 429 && r.Header.Get("Retry-After") == "" {
			t.Errorf("%s without Retry-After", kind)
		}
	}
	// bob has a submit left of his rate, his org none of its quota.
	check(f.do(t, "POST", "/sa-core/v1/prompt", bob.Tok, map[string]any{"prompt": "over the quota"}), 429, "/quota-exceeded")
	r := f.do(t, "POST", "/sa-core/v1/prompt", v.Tok, map[string]any{"prompt": "x", "options": map[string]any{"model": "gpt-9"}})
	if r.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(r.Body), "options.model") {
		t.Errorf("an unlisted model: %s", r)
	}
	// A burst of ten times 0.1 a second is one submit: the first of gary's passed the rate, the
	// next is refused.
	f.submit(t, v, "gary's one")
	check(f.do(t, "POST", "/sa-core/v1/prompt", v.Tok, map[string]any{"prompt": "gary's two"}), 429, "/submit-rate")
}
