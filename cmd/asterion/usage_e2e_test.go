package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/identity"
)

// TestServeCountsUsage: a served prompt's usage shows in /metrics, in metrics/queue for its
// org (per model), and on its job.
func TestServeCountsUsage(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"ASTERION_SIM_LATENCY": "0-0"})
	ids := identity.NewService(s.DB.Bun)
	tok, err := ids.CreateToken(context.Background(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	call := func(method, path string, body any) map[string]any {
		t.Helper()
		var rd *bytes.Reader
		if body != nil {
			b, _ := json.Marshal(body)
			rd = bytes.NewReader(b)
		} else {
			rd = bytes.NewReader(nil)
		}
		req, _ := http.NewRequest(method, s.BaseURL+path, rd)
		req.Header.Set("Authorization", "Bearer "+tok)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode >= 300 && resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s %s: %d %v", method, path, resp.StatusCode, out)
		}
		return out
	}
	sub := call("POST", "/sa-core/v1/prompt", map[string]any{"prompt": "four words of prompt #sim:tokens=6"})
	jobID := sub["job_id"].(string)
	dbtest.WaitFor(t, 20*time.Second, "the prompt to succeed", func() bool {
		return call("GET", "/sa-core/v1/jobs/"+jobID, nil)["state"] == "succeeded"
	})
	if u := call("GET", "/sa-core/v1/jobs/"+jobID, nil)["usage"].(map[string]any); u["input_tokens"] != 4.0 || u["output_tokens"] != 6.0 {
		t.Errorf("job usage %v", u)
	}
	m := call("GET", "/sa-core/v1/metrics/queue", nil)
	orgs, _ := m["orgs"].([]any)
	found := false
	for _, o := range orgs {
		u := o.(map[string]any)["usage"].(map[string]any)
		if models, ok := u["models"].(map[string]any); ok && models["sim-1"] != nil && u["output_tokens"] == 6.0 {
			found = true
		}
	}
	if !found {
		t.Errorf("metrics/queue orgs %v carry no usage of sim-1", orgs)
	}
	_, body := httpGet(t, s.BaseURL+"/metrics")
	for _, want := range []string{
		`asterion_tokens_total{direction="input",model="sim-1"} 4`,
		`asterion_tokens_total{direction="output",model="sim-1"} 6`,
		`asterion_cost_usd_total{model="sim-1"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestServeLogsEachSettledJobOnce: at info a served job's end is one line with its ids,
// attempt, error kind and duration, and River's routine records stay below info.
func TestServeLogsEachSettledJobOnce(t *testing.T) {
	t.Parallel()
	s := startServer(t, map[string]string{"ASTERION_SIM_LATENCY": "0-0", "ASTERION_LOG_LEVEL": "info"})
	ids := identity.NewService(s.DB.Bun)
	tok, err := ids.CreateToken(context.Background(), "admin")
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("POST", s.BaseURL+"/sa-core/v1/prompt", strings.NewReader(`{"prompt":"log me"}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var sub struct {
		JobID string `json:"job_id"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&sub)
	resp.Body.Close()
	dbtest.WaitForDetail(t, 20*time.Second, "the settled line", func() (bool, string) {
		logs := s.Logs.String()
		return strings.Contains(logs, `"msg":"job succeeded"`), "logs:\n" + logs
	})
	var settled []map[string]any
	for _, line := range strings.Split(s.Logs.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) != nil {
			continue
		}
		if rec["component"] == "river" && rec["level"] == "INFO" {
			t.Errorf("River logged at info: %s", line)
		}
		if rec["msg"] == "job succeeded" {
			settled = append(settled, rec)
		}
	}
	if len(settled) != 1 || settled[0]["job_id"] != sub.JobID || settled[0]["attempt"] != 1.0 ||
		settled[0]["duration"] == nil || settled[0]["prompt_id"] == nil {
		t.Errorf("settled lines %v", settled)
	}
}
