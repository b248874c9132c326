package handlers

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"asterion/identity"
	"asterion/jobs/provider"
)

// TestProviderErrorsShownToMembers: when the provider fails, what a member reads (the job, the
// operation's status) carries the error kind, the HTTP status and a fixed description, never the
// provider's URL, addresses or response body; an operator of the org reads the full detail on
// the job (error_detail in the API, the dashboard's job page), a member of the org never does.
func TestProviderErrorsShownToMembers(t *testing.T) {
	t.Parallel()
	const secretBody = "upstream 10.9.8.7 said: quota for key sk-live-abc exhausted at https://internal.example/v1"
	failing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": secretBody}})
	}))
	t.Cleanup(failing.Close)
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadURL := "http://" + closed.Addr().String() + "/v1"
	closed.Close()

	for _, tc := range []struct {
		name, baseURL string
		leaks         []string
	}{
		{"response body", failing.URL + "/v1", []string{"10.9.8.7", "sk-live", "internal.example", "quota"}},
		{"unreachable", deadURL, []string{closed.Addr().String(), "127.0.0.1", "http://", "connection refused"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := provider.NewOpenAI(provider.OpenAIConfig{BaseURL: tc.baseURL, Model: "m", Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			a := startAppServer(t, appServerConfig{Provider: p})
			a.StartWorkers(t)
			a.user(t, "err-org", "err-member", identity.RoleMember)
			a.user(t, "err-org", "err-operator", identity.RoleOperator)
			member, operator := apiToken(t, a, "err-member"), apiToken(t, a, "err-operator")
			body, _ := json.Marshal(map[string]any{"prompt": "fail please", "max_attempts": 1})
			req, _ := http.NewRequest(http.MethodPost, a.Base+"/sa-core/v1/prompt", strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer "+member)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			var sub struct {
				PromptID  string `json:"prompt_id"`
				JobID     string `json:"job_id"`
				Operation struct {
					OperationID string `json:"operation_id"`
				} `json:"operation"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&sub)
			resp.Body.Close()
			if resp.StatusCode != http.StatusAccepted {
				t.Fatalf("submit: %d", resp.StatusCode)
			}
			a.waitJobState(t, sub.PromptID, "failed", 20*time.Second)
			get := func(tok, path string) string {
				req, _ := http.NewRequest(http.MethodGet, a.Base+path, nil)
				req.Header.Set("Authorization", "Bearer "+tok)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
				}
				return string(b)
			}
			for _, path := range []string{"/sa-core/v1/jobs/" + sub.JobID, "/sa-core/v1/deferred-operations/" + sub.Operation.OperationID + "/status",
				"/sa-core/v1/mission/recent"} {
				got := get(member, path)
				for _, leak := range tc.leaks {
					if strings.Contains(got, leak) {
						t.Errorf("member's %s carries %q: %s", path, leak, got)
					}
				}
				if strings.Contains(got, "error_detail") {
					t.Errorf("member's %s carries error_detail: %s", path, got)
				}
			}
			job := get(member, "/sa-core/v1/jobs/"+sub.JobID)
			if !strings.Contains(job, `"error_message":"provider `) {
				t.Errorf("member's job has no error message: %s", job)
			}
			var opJob struct {
				ErrorMessage string `json:"error_message"`
				ErrorDetail  string `json:"error_detail"`
			}
			if err := json.Unmarshal([]byte(get(operator, "/sa-core/v1/jobs/"+sub.JobID)), &opJob); err != nil {
				t.Fatal(err)
			}
			if opJob.ErrorDetail == "" || !strings.Contains(opJob.ErrorDetail, tc.leaks[0]) {
				t.Errorf("operator's error_detail %q lacks the provider's detail %q", opJob.ErrorDetail, tc.leaks[0])
			}
			if page := get(operator, "/admin/jobs/"+sub.JobID); !strings.Contains(page, tc.leaks[0]) {
				t.Errorf("the operator's job page lacks the provider's detail %q", tc.leaks[0])
			}
		})
	}
}
