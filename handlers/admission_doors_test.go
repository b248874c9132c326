package handlers

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"asterion/identity"
)

// doorRequest builds the request that asks a route to create a job, with the fixtures of
// TestEveryDoorPassesAdmission.
type doorRequest func(fx doorFixtures) (method, path, contentType, body string)

// doorFixtures are the objects the doors act on: finished jobs of org A to retry, one per door
// that retries a single job.
type doorFixtures struct {
	apiRetry, missionRetry, missionRetryPrompt, dashRetry string
}

// jobDoors is every route that is not a plain read, written out by hand: a door that can
// create a job has the request that asks it to, the others nil. A route added to routes.go
// without a line here fails TestEveryDoorPassesAdmission, the way the authorization matrix
// fails a route with no rule, so no new door can skip admission unnoticed.
var jobDoors = map[string]doorRequest{
	"POST /login": nil, "POST /logout": nil,
	"POST /mission/prompts": func(doorFixtures) (string, string, string, string) {
		return "POST", "/mission/prompts", "application/x-www-form-urlencoded", "prompt=through+the+compose+bar"
	},
	"POST /mission/prompts/:id/cancel": nil,
	"POST /mission/prompts/:id/retry": func(fx doorFixtures) (string, string, string, string) {
		return "POST", "/mission/prompts/" + fx.missionRetryPrompt + "/retry", "application/x-www-form-urlencoded",
			"job_id=" + fx.missionRetry
	},
	"POST /admin/deferred-operations/:id/poll": nil, "POST /admin/deferred-operations/:id/cancel": nil,
	"POST /admin/jobs/bulk": func(doorFixtures) (string, string, string, string) {
		return "POST", "/admin/jobs/bulk", "application/x-www-form-urlencoded",
			url.Values{"action": {"retry"}, "state": {"cancelled"}, "expected": {"3"}}.Encode()
	},
	"POST /admin/jobs/:id/cancel": nil,
	"POST /admin/jobs/:id/retry": func(fx doorFixtures) (string, string, string, string) {
		return "POST", "/admin/jobs/" + fx.dashRetry + "/retry", "application/x-www-form-urlencoded", ""
	},
	"POST /admin/health/orgs/:id/pause": nil, "POST /admin/health/orgs/:id/resume": nil,
	"POST /admin/health/models/pause": nil, "POST /admin/health/models/resume": nil,
	"POST /sa-core/v1/deferred-operations/:id/poll": nil, "POST /sa-core/v1/deferred-operations/:id/cancel": nil,
	"POST /sa-core/v1/chains": func(doorFixtures) (string, string, string, string) {
		return "POST", "/sa-core/v1/chains", "application/json", `{"steps":[{"prompt":"through a chain"}]}`
	},
	"POST /sa-core/v1/prompt": func(doorFixtures) (string, string, string, string) {
		return "POST", "/sa-core/v1/prompt", "application/json", `{"prompt":"through the API"}`
	},
	"POST /sa-core/v1/jobs/:id/cancel": nil,
	"POST /v1/chat/completions": func(doorFixtures) (string, string, string, string) {
		return "POST", "/v1/chat/completions", "application/json", `{"messages":[{"role":"user","content":"through the front door"}]}`
	},
	"POST /v1/responses": func(doorFixtures) (string, string, string, string) {
		return "POST", "/v1/responses", "application/json", `{"input":"through the responses door"}`
	},
	"POST /v1/responses/:id/cancel": nil,
	// A file holds no job; a batch's lines pass admission one by one in the background, and a
	// refused line goes to the error file (TestFrontDoorBatchLinesPassAdmission).
	"POST /v1/files": nil, "DELETE /v1/files/:id": nil, "POST /v1/batches": nil, "POST /v1/batches/:id/cancel": nil,
	"POST /sa-core/v1/jobs/:id/retry": func(fx doorFixtures) (string, string, string, string) {
		return "POST", "/sa-core/v1/jobs/" + fx.apiRetry + "/retry", "application/json", ""
	},
}

// TestEveryDoorPassesAdmission: with org A's budget held by a queued job's reservation, every
// route that can create a job refuses, answering the budget's refusal as that surface answers
// a limit (429 with the problem type /budget-exhausted and a Retry-After, or the bulk action's
// refused count), and no route writes a job; another org is not held.
func TestEveryDoorPassesAdmission(t *testing.T) {
	f := startLiveServerWith(t, liveServerConfig{HoldWorkers: true})
	ctx := context.Background()
	operator := f.user(t, "doors-a", "doors-operator", identity.RoleOperator)
	outsider := f.user(t, "doors-b", "doors-outsider", identity.RoleMember)

	cancelled := func(text string) liveSubmitted {
		sub := f.submit(t, operator, text)
		if r := f.do(t, "POST", "/sa-core/v1/jobs/"+sub.JobID+"/cancel", operator.Tok, nil); r.StatusCode != http.StatusOK {
			t.Fatalf("cancel %s: %s", sub.JobID, r)
		}
		return sub
	}
	fx := doorFixtures{apiRetry: cancelled("retry by the API").JobID, dashRetry: cancelled("retry on the dashboard").JobID}
	m := cancelled("retry on the mission page")
	fx.missionRetry, fx.missionRetryPrompt = m.JobID, m.PromptID
	f.submit(t, operator, "holds the budget")
	if _, err := f.DB.Bun.ExecContext(ctx, "INSERT INTO sa_org_budget (org_id, tokens, period) VALUES (?, 1, 'day')", operator.OrgID); err != nil {
		t.Fatal(err)
	}
	jobs := func() int {
		var n int
		if err := f.DB.Bun.QueryRowContext(ctx, "SELECT count(*) FROM sa_job WHERE org_id = ?", operator.OrgID).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	client := &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	seen := map[string]bool{}
	for _, r := range New(Deps{}).Routes() {
		key := r.Method + " " + r.Path
		if r.Method == "GET" {
			continue
		}
		seen[key] = true
		door, listed := jobDoors[key]
		if !listed {
			t.Errorf("route %s has no line in jobDoors: say whether it can create a job, and how", key)
			continue
		}
		if door == nil {
			continue
		}
		method, path, contentType, body := door(fx)
		before := jobs()
		req, _ := http.NewRequestWithContext(ctx, method, f.Base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+operator.Tok)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s: %v", key, err)
			continue
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		buf := string(raw)
		switch {
		case key == "POST /admin/jobs/bulk":
			loc, _ := url.Parse(resp.Header.Get("Location"))
			if resp.StatusCode != http.StatusSeeOther || loc.Query().Get("refused") != "3" || loc.Query().Get("done") != "0" {
				t.Errorf("%s: %d %s, want a redirect with three refused and none done", key, resp.StatusCode, loc)
			}
		case resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "":
			t.Errorf("%s: %d (Retry-After %q) %s, want 429 with Retry-After", key, resp.StatusCode, resp.Header.Get("Retry-After"), buf)
		case r.Surface == API && !strings.Contains(buf, "/budget-exhausted"):
			t.Errorf("%s: %s, want the problem type /budget-exhausted", key, buf)
		case r.Surface == OpenAI && !strings.Contains(buf, `"code":"insufficient_quota"`):
			t.Errorf("%s: %s, want OpenAI's insufficient_quota error", key, buf)
		}
		if after := jobs(); after != before {
			t.Errorf("%s wrote %d jobs past the budget", key, after-before)
		}
	}
	for key := range jobDoors {
		if !seen[key] {
			t.Errorf("jobDoors names %s, which is not a route any more", key)
		}
	}
	if r := f.do(t, "POST", "/sa-core/v1/prompt", outsider.Tok, map[string]any{"prompt": "another org"}); r.StatusCode != http.StatusAccepted {
		t.Errorf("another org's submit: %s", r)
	}
}
