package handlers

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"asterion/identity"
)

// wantAccess is the authorization rule of every route, written out by hand: a route added to
// routes.go without a line here fails TestAuthorizationMatrix, and so does a route whose access
// in routes.go differs from what is written here.
var wantAccess = map[string]Access{
	"GET /healthz": Public, "GET /readyz": Public, "GET /metrics": Public,
	"GET /": Public, "GET /login": Public, "POST /login": Public, "POST /logout": Member,

	"GET /mission": Member, "GET /mission/stream": Member, "GET /mission/drops": Member,
	"POST /mission/prompts": Member, "POST /mission/prompts/:id/cancel": Member, "POST /mission/prompts/:id/retry": Member,

	"GET /admin/deferred-operations": Operator, "GET /admin/deferred-operations/list": Operator,
	"GET /admin/deferred-operations/events": Operator, "GET /admin/deferred-operations/:id": Operator,
	"GET /admin/deferred-operations/:id/panel": Operator, "GET /admin/deferred-operations/:id/events": Operator,
	"POST /admin/deferred-operations/:id/poll": Operator, "POST /admin/deferred-operations/:id/cancel": Operator,
	"GET /admin/jobs": Operator, "GET /admin/jobs/list": Operator, "GET /admin/jobs/events": Operator,
	"GET /admin/jobs/bulk": Operator, "POST /admin/jobs/bulk": Operator, "GET /admin/jobs/:id": Operator,
	"GET /admin/jobs/:id/panel": Operator, "GET /admin/jobs/:id/events": Operator,
	"POST /admin/jobs/:id/cancel": Operator, "POST /admin/jobs/:id/retry": Operator,
	"GET /admin/health": Operator, "GET /admin/health/panel": Operator,
	"POST /admin/health/orgs/:id/pause": Operator, "POST /admin/health/orgs/:id/resume": Operator,
	"POST /admin/health/models/pause": Admin, "POST /admin/health/models/resume": Admin,
	"GET /admin/river": Admin, "GET /admin/river/*": Admin,

	"GET /sa-core/v1/deferred-operations": Member, "GET /sa-core/v1/deferred-operations/:id": Member,
	"GET /sa-core/v1/deferred-operations/:id/status": Member, "POST /sa-core/v1/deferred-operations/:id/poll": Member,
	"POST /sa-core/v1/deferred-operations/:id/cancel": Member,
	"POST /sa-core/v1/chains":                         Member, "GET /sa-core/v1/chains/:id": Member,

	"POST /sa-core/v1/prompt": Member, "GET /sa-core/v1/mission/recent": Member, "GET /sa-core/v1/mission/events": Member,
	"GET /sa-core/v1/jobs": Operator, "GET /sa-core/v1/jobs/:id": Member, "GET /sa-core/v1/jobs/:id/output": Member,
	"GET /sa-core/v1/jobs/:id/output/events": Member,
	"POST /sa-core/v1/jobs/:id/cancel":       Member,
	"POST /sa-core/v1/jobs/:id/retry":        Member, "GET /sa-core/v1/metrics/queue": Operator,
	"GET /sa-core/v1/openapi.json": Public,

	"GET /v1/models": Member, "GET /v1/models/*": Member, "POST /v1/chat/completions": Member,
	"POST /v1/responses": Member, "GET /v1/responses/:id": Member, "POST /v1/responses/:id/cancel": Member,
	"POST /v1/files": Member, "GET /v1/files": Member, "GET /v1/files/:id": Member,
	"GET /v1/files/:id/content": Member, "DELETE /v1/files/:id": Member,
	"POST /v1/batches": Member, "GET /v1/batches": Member, "GET /v1/batches/:id": Member, "POST /v1/batches/:id/cancel": Member,
}

// TestAuthorizationMatrix runs every route of the route table as anonymous, a member of org A
// (who owns the objects named in paths), another member and an operator of org A, a member of
// org B, an operator of org B and an admin, and checks the answer against the route's rule: 401
// (API) or a redirect to the login page for anonymous; 403 for a role below the rule; 404 for an
// object the caller may not see (another org's, or another member's); otherwise allowed.
func TestAuthorizationMatrix(t *testing.T) {
	f := startLiveServer(t)
	memberA := f.user(t, "org-a", "matrix-member-a", identity.RoleMember)
	peerA := f.user(t, "org-a", "matrix-peer-a", identity.RoleMember)
	operatorA := f.user(t, "org-a", "matrix-operator-a", identity.RoleOperator)
	memberB := f.user(t, "org-b", "matrix-member-b", identity.RoleMember)
	operatorB := f.user(t, "org-b", "matrix-operator-b", identity.RoleOperator)
	admin := f.user(t, "org-root", "matrix-admin", identity.RoleAdmin)

	sub := f.submit(t, memberA, "matrix prompt")
	f.waitJob(t, memberA, sub.JobID, "succeeded")
	op := mustDecode[struct {
		OperationID string `json:"operation_id"`
	}](t, sub.Operation)
	chainResp := f.do(t, "POST", "/sa-core/v1/chains", memberA.Tok, map[string]any{"steps": []map[string]any{{"prompt": "matrix chain"}}})
	if chainResp.StatusCode != http.StatusAccepted {
		t.Fatalf("create chain: %s", chainResp)
	}
	chain := mustDecode[struct {
		ChainID string `json:"chain_id"`
	}](t, chainResp.Body)
	if chain.ChainID == "" {
		t.Fatalf("chain answer has no chain_id: %s", chainResp.Body)
	}
	response := mustDecode[struct {
		ID string `json:"id"`
	}](t, f.do(t, "POST", "/v1/responses", memberA.Tok, map[string]any{"input": "matrix response", "background": true}).Body)
	ids := map[string]string{
		"/v1/responses/":                   response.ID,
		"/mission/prompts/":                sub.PromptID,
		"/admin/deferred-operations/":      op.OperationID,
		"/admin/jobs/":                     sub.JobID,
		"/sa-core/v1/deferred-operations/": op.OperationID,
		"/sa-core/v1/chains/":              chain.ChainID,
		"/sa-core/v1/jobs/":                sub.JobID,
		"/admin/health/orgs/":              strconv.FormatInt(memberA.OrgID, 10),
		"/v1/files/":                       uploadBatchFile(t, f.sdkClient(memberA.Tok), chatLine("m", "matrix")).ID,
		"/v1/batches/":                     matrixBatch(t, f, memberA),
	}
	// A delete consumes its object: each caller deletes a file of org A of its own.
	fresh := map[string]func() string{"DELETE /v1/files/:id": func() string {
		return uploadBatchFile(t, f.sdkClient(memberA.Tok), chatLine("m", "matrix")).ID
	}}
	// A wildcard that names an object of every org's (a model) is filled with a real one.
	stars := map[string]string{"/v1/models/*": f.Jobs.Admission().DefaultModel()}
	fill := func(path string) (string, bool) {
		if !strings.Contains(path, ":") {
			return strings.Replace(path, "*", stars[path], 1), false
		}
		for prefix, id := range ids {
			if strings.HasPrefix(path, prefix+":") {
				return strings.Replace(path, ":id", id, 1), true
			}
		}
		t.Fatalf("route %s has a path parameter with no fixture: add one to the matrix", path)
		return "", false
	}

	type who struct {
		name  string
		tok   string
		role  identity.Role
		seesA bool
	}
	people := []who{
		{"anonymous", "", "", false},
		{"member of org A", memberA.Tok, identity.RoleMember, true},
		// Another member of the same org sees none of the first one's objects.
		{"another member of org A", peerA.Tok, identity.RoleMember, false},
		{"operator of org A", operatorA.Tok, identity.RoleOperator, true},
		{"member of org B", memberB.Tok, identity.RoleMember, false},
		{"operator of org B", operatorB.Tok, identity.RoleOperator, false},
		{"admin", admin.Tok, identity.RoleAdmin, true},
	}
	client := &http.Client{Timeout: 15 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}
	srv := New(Deps{})
	seen := map[string]bool{}
	for _, r := range srv.Routes() {
		key := r.Method + " " + r.Path
		seen[key] = true
		want, ok := wantAccess[key]
		if !ok {
			t.Errorf("route %s has no line in wantAccess: write down who may call it", key)
			continue
		}
		if want != r.Access {
			t.Errorf("route %s: routes.go says %s, the matrix says %s", key, r.Access, want)
		}
		path, hasObject := fill(r.Path)
		// The mission field is personal: its object routes act on the caller's own prompts only,
		// whatever the role.
		ownerOnly := strings.HasPrefix(r.Path, "/mission/prompts/:")
		for _, p := range people {
			if mk, ok := fresh[key]; ok {
				path = strings.Replace(r.Path, ":id", mk(), 1)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			// A form naming the job satisfies the page actions that check which job a drop showed;
			// JSON endpoints answer it with 415, which is still "allowed" for this matrix.
			req, _ := http.NewRequestWithContext(ctx, r.Method, f.Base+path, strings.NewReader("job_id="+sub.JobID))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			if p.tok != "" {
				req.Header.Set("Authorization", "Bearer "+p.tok)
			}
			resp, err := client.Do(req)
			if err != nil {
				cancel()
				t.Errorf("%s as %s: %v", key, p.name, err)
				continue
			}
			status := resp.StatusCode
			loc := resp.Header.Get("Location")
			resp.Body.Close()
			cancel()
			fail := func(wantText string) {
				t.Errorf("%s as %s: got %d (Location %q), want %s", key, p.name, status, loc, wantText)
			}
			switch {
			case status >= 500:
				fail("no server error")
			case r.Access == Public:
			case p.tok == "" && r.Surface != Page:
				if status != http.StatusUnauthorized {
					fail("401")
				}
			case p.tok == "":
				if status != http.StatusSeeOther || !strings.HasPrefix(loc, "/login") {
					fail("a redirect to /login")
				}
			case !p.role.Allows(r.Access.role()):
				if status != http.StatusForbidden {
					fail("403")
				}
			case hasObject && (!p.seesA || ownerOnly && p.tok != memberA.Tok):
				if status != http.StatusNotFound {
					fail("404, as for an id that does not exist")
				}
			case status == http.StatusUnauthorized || status == http.StatusForbidden:
				fail("allowed")
			case status == http.StatusNotFound && !strings.HasPrefix(r.Path, "/admin/river"):
				fail("allowed (found)")
			}
		}
	}
	for key := range wantAccess {
		if !seen[key] {
			t.Errorf("wantAccess names %s, which is not a route any more", key)
		}
	}
}
