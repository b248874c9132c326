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
