package handlers

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/jobs/governor"
	"asterion/jobs/provider"
	"asterion/jobs/usage"
)

// orgPaused reads an org's pause flag (no share row: not paused).
func (e *dashEnv) orgPaused(t *testing.T, orgID int64) bool {
	t.Helper()
	var paused bool
	if err := e.DB.Bun.QueryRowContext(context.Background(),
		"SELECT coalesce((SELECT paused FROM sa_org_share WHERE org_id = ?), false)", orgID).Scan(&paused); err != nil {
		t.Fatal(err)
	}
	return paused
}

// modelPaused reads a model's operator pause (no governor row: not paused).
func (e *dashEnv) modelPaused(t *testing.T, model string) bool {
	t.Helper()
	var paused bool
	if err := e.DB.Bun.QueryRowContext(context.Background(),
		"SELECT coalesce((SELECT operator_paused FROM sa_governor WHERE model = ?), false)", model).Scan(&paused); err != nil {
		t.Fatal(err)
	}
	return paused
}

// audits counts the audit rows of action on subject by actor.
func (e *dashEnv) audits(t *testing.T, action, subject, actor string) int {
	t.Helper()
	var n int
	if err := e.DB.Bun.QueryRowContext(context.Background(),
		"SELECT count(*) FROM sa_audit WHERE action = ? AND subject_id = ? AND actor = ?", action, subject, actor).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// seedFlow gives the fixture real flow-control state: a model the provider taught limits and
// asked to wait, a model an operator paused, acme's budget and its usage this minute.
func seedFlow(t *testing.T, f *dashFixture) {
	t.Helper()
	ctx := context.Background()
	e := f.e
	g, err := governor.New(governor.Config{DB: e.DB.Bun})
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Observe(ctx, "m-learned", governor.Observation{Limits: provider.Limits{HasLimitRequests: true, LimitRequests: 60,
		HasLimitTokens: true, LimitTokens: 40000}, RateLimited: true, RetryAfter: time.Minute, HasRetryAfter: true}); err != nil {
		t.Fatal(err)
	}
	if err := g.Pause(ctx, "m-held", governor.Pauser{Role: governor.RoleAdmin, Actor: "cli"}); err != nil {
		t.Fatal(err)
	}
	m, err := usage.New(usage.Config{DB: e.DB.Bun})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetBudget(ctx, f.opA.orgID, usage.Budget{Tokens: 5000, Period: usage.Day}); err != nil {
		t.Fatal(err)
	}
	for i, tokens := range []int{300, 700} {
		if _, err := m.Record(ctx, e.DB.Bun, usage.AttemptUsage{JobID: uuid.New(), Attempt: 1 + i, OrgID: f.opA.orgID,
			Model: "m-learned", StartedAt: time.Now(), InputTokens: tokens / 2, OutputTokens: tokens - tokens/2}); err != nil {
			t.Fatal(err)
		}
	}
	e.exec(t, "INSERT INTO sa_org_share (org_id, weight) VALUES (?, 3)", f.opB.orgID)
}

// TestHealthFlowShowsRealState: the health page shows each model's governor and each org's
// share and budget from the database, an operator its own org only, an admin every org.
func TestHealthFlowShowsRealState(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	seedFlow(t, f)
	acme, globex := strconv.FormatInt(f.opA.orgID, 10), strconv.FormatInt(f.opB.orgID, 10)

	r := e.get(t, f.opA, "/admin/health")
	wantStatus(t, r, http.StatusOK, "health as acme's operator")
	for _, want := range []string{
		`data-model="m-learned"`, `data-rpm="60"`, `data-tpm="40000"`, "60 (learned)", "1000 / 40000",
		"2 / 60", `data-provider-paused`, `data-model="m-held" data-paused="true"`, "paused by an admin (cli)",
		`data-org="acme" data-paused="false"`, "1000 / 5000 tokens this day (20.0 %)",
		`action="/admin/health/orgs/` + acme + `/pause"`, `name="csrf_token" value="` + f.opA.csrf + `"`,
		`id="chart-tokens"`, `data-token-line="m-learned"`, "(your org)",
	} {
		wantContains(t, r.body, want, "acme operator's health page")
	}
	// The account's calls and 429s count every org's traffic; the operator sees its org's use.
	for _, bad := range []string{`data-org="globex"`, "/admin/health/orgs/" + globex, "/admin/health/models/pause", "data-account-calls"} {
		wantNotContains(t, r.body, bad, "acme operator's health page")
	}
	// The queued job of the fixture counts in its org's row.
	wantContains(t, r.body, `<td class="py-1.5 text-right tabular-nums" data-queued>1</td>`, "acme's queued job")

	// Globex's operator sees the shared models but not acme's tokens.
	r = e.get(t, f.opB, "/admin/health/panel")
	wantContains(t, r.body, `data-model="m-learned"`, "globex operator's models")
	wantContains(t, r.body, `data-org="globex"`, "globex operator's org")
	for _, bad := range []string{`data-org="acme"`, `data-token-line="m-learned"`, "1000 / 40000"} {
		wantNotContains(t, r.body, bad, "globex operator's panel")
	}

	r = e.get(t, f.adm, "/admin/health/panel")
	for _, want := range []string{`data-org="acme"`, `data-org="globex"`, `action="/admin/health/models/pause"`,
		`action="/admin/health/models/resume"`, `name="model" value="m-held"`, "75 % of slots", "(every org)", "data-account-calls"} {
		wantContains(t, r.body, want, "admin's panel")
	}
}

// TestHealthPauseActions: pausing and resuming an org or a model from the dashboard needs the
// CSRF token and the right role, changes the flag, is audited and says so.
func TestHealthPauseActions(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	seedFlow(t, f)
	acme, globex := strconv.FormatInt(f.opA.orgID, 10), strconv.FormatInt(f.opB.orgID, 10)
	pauseAcme := "/admin/health/orgs/" + acme + "/pause"

	// Without the CSRF token: refused, nothing changes.
	r := e.post(t, f.opA, pauseAcme, nil, false)
	wantStatus(t, r, http.StatusForbidden, "org pause without CSRF")
	if e.orgPaused(t, f.opA.orgID) {
		t.Fatal("org paused without a CSRF token")
	}
	// A member and another org's operator change nothing.
	wantStatus(t, e.post(t, f.member, pauseAcme, nil, true), http.StatusForbidden, "member pauses its org")
	wantStatus(t, e.post(t, f.opB, pauseAcme, nil, true), http.StatusNotFound, "globex's operator pauses acme")
	if e.orgPaused(t, f.opA.orgID) {
		t.Fatal("org paused by a member or another org's operator")
	}

	// The org's operator pauses it: redirected with a notice, flagged, audited.
	r = e.post(t, f.opA, pauseAcme, nil, true)
	wantStatus(t, r, http.StatusSeeOther, "acme's operator pauses acme")
	if !strings.Contains(r.location, "notice=org-paused") {
		t.Fatalf("redirect to %q, want the org-paused notice", r.location)
	}
	if !e.orgPaused(t, f.opA.orgID) || e.audits(t, "org.paused", acme, "user:olga") != 1 {
		t.Fatal("org pause not written or not audited")
	}
	r = e.get(t, f.opA, strings.Split(r.location, "#")[0])
	wantContains(t, r.body, "Paused the organisation", "notice")
	wantContains(t, r.body, `data-org="acme" data-paused="true"`, "paused row")
	wantContains(t, r.body, `action="/admin/health/orgs/`+acme+`/resume"`, "resume button")
	// Another org's operator cannot resume it either.
	wantStatus(t, e.post(t, f.opB, "/admin/health/orgs/"+acme+"/resume", nil, true), http.StatusNotFound, "globex resumes acme")
	if !e.orgPaused(t, f.opA.orgID) {
		t.Fatal("another org's operator resumed acme")
	}
	r = e.post(t, f.opA, "/admin/health/orgs/"+acme+"/resume", nil, true)
	wantStatus(t, r, http.StatusSeeOther, "acme's operator resumes acme")
	if e.orgPaused(t, f.opA.orgID) || e.audits(t, "org.resumed", acme, "user:olga") != 1 {
		t.Fatal("org resume not written or not audited")
	}
	// An admin may pause any org; a missing or malformed id is 404.
	wantStatus(t, e.post(t, f.adm, "/admin/health/orgs/"+globex+"/pause", nil, true), http.StatusSeeOther, "admin pauses globex")
	if !e.orgPaused(t, f.opB.orgID) || e.audits(t, "org.paused", globex, "user:ada") != 1 {
		t.Fatal("admin's org pause not written or not audited")
	}
	wantStatus(t, e.post(t, f.adm, "/admin/health/orgs/999999/pause", nil, true), http.StatusNotFound, "missing org")
	wantStatus(t, e.post(t, f.adm, "/admin/health/orgs/x/pause", nil, true), http.StatusNotFound, "malformed org id")

	// Models: admin only, with CSRF.
	form := func() url.Values { return url.Values{"model": {"m-learned"}} }
	wantStatus(t, e.post(t, f.opA, "/admin/health/models/pause", form(), true), http.StatusForbidden, "operator pauses a model")
	wantStatus(t, e.post(t, f.member, "/admin/health/models/pause", form(), true), http.StatusForbidden, "member pauses a model")
	wantStatus(t, e.post(t, f.adm, "/admin/health/models/pause", form(), false), http.StatusForbidden, "model pause without CSRF")
	if e.modelPaused(t, "m-learned") {
		t.Fatal("model paused by an operator, a member or without CSRF")
	}
	r = e.post(t, f.adm, "/admin/health/models/pause", form(), true)
	wantStatus(t, r, http.StatusSeeOther, "admin pauses a model")
	if !strings.Contains(r.location, "notice=model-paused") || !e.modelPaused(t, "m-learned") ||
		e.audits(t, "model.paused", "m-learned", "user:ada") != 1 {
		t.Fatalf("model pause: redirect %q, paused %v", r.location, e.modelPaused(t, "m-learned"))
	}
	wantContains(t, e.get(t, f.adm, "/admin/health/panel").body, `data-model="m-learned" data-paused="true"`, "paused model row")
	wantStatus(t, e.post(t, f.adm, "/admin/health/models/resume", form(), true), http.StatusSeeOther, "admin resumes a model")
	if e.modelPaused(t, "m-learned") || e.audits(t, "model.resumed", "m-learned", "user:ada") != 1 {
		t.Fatal("model resume not written or not audited")
	}
	wantStatus(t, e.post(t, f.adm, "/admin/health/models/pause", url.Values{"model": {""}}, true), http.StatusBadRequest, "no model")
}

// modelProviderPaused reads whether a provider's pause still holds a model.
func (e *dashEnv) modelProviderPaused(t *testing.T, model string) bool {
	t.Helper()
	var paused bool
	if err := e.DB.Bun.QueryRowContext(context.Background(),
		"SELECT coalesce((SELECT paused_until > now() FROM sa_governor WHERE model = ?), false)", model).Scan(&paused); err != nil {
		t.Fatal(err)
	}
	return paused
}

// TestHealthPauseRoleRule: the page says who paused an org; an org's operator cannot lift the
// pause an admin set (a notice says so, nothing changes, no resume button is offered), the
// admin can; an admin's resume of a model ends the provider's pause too.
func TestHealthPauseRoleRule(t *testing.T) {
	t.Parallel()
	f := newDashFixture(t)
	e := f.e
	seedFlow(t, f)
	acme := strconv.FormatInt(f.opA.orgID, 10)
	resumeAcme := "/admin/health/orgs/" + acme + "/resume"

	wantStatus(t, e.post(t, f.adm, "/admin/health/orgs/"+acme+"/pause", nil, true), http.StatusSeeOther, "admin pauses acme")
	r := e.get(t, f.opA, "/admin/health/panel")
	wantContains(t, r.body, "paused by an admin (user:ada)", "acme operator's panel")
	wantContains(t, r.body, "data-pause-held", "acme operator's panel")
	wantNotContains(t, r.body, `action="`+resumeAcme+`"`, "acme operator's panel")

	r = e.post(t, f.opA, resumeAcme, nil, true)
	wantStatus(t, r, http.StatusSeeOther, "acme's operator resumes the admin's pause")
	if !strings.Contains(r.location, "notice=org-pause-held") {
		t.Fatalf("redirect to %q, want the org-pause-held notice", r.location)
	}
	if !e.orgPaused(t, f.opA.orgID) || e.audits(t, "org.resumed", acme, "user:olga") != 0 {
		t.Fatal("the operator lifted the admin's pause")
	}
	wantContains(t, e.get(t, f.opA, strings.Split(r.location, "#")[0]).body, "only an admin can resume it", "notice")
	// Re-pausing it as the operator would make the pause the operator's: refused too.
	r = e.post(t, f.opA, "/admin/health/orgs/"+acme+"/pause", nil, true)
	if !strings.Contains(r.location, "notice=org-pause-held") || e.audits(t, "org.paused", acme, "user:olga") != 0 {
		t.Fatalf("the operator re-paused the admin's pause: redirect %q", r.location)
	}

	r = e.get(t, f.adm, "/admin/health/panel")
	wantContains(t, r.body, `action="`+resumeAcme+`"`, "admin's panel")
	wantStatus(t, e.post(t, f.adm, resumeAcme, nil, true), http.StatusSeeOther, "admin resumes acme")
	if e.orgPaused(t, f.opA.orgID) || e.audits(t, "org.resumed", acme, "user:ada") != 1 {
		t.Fatal("the admin's resume not written or not audited")
	}

	// The provider paused m-learned: an admin's resume ends that pause too.
	if !e.modelProviderPaused(t, "m-learned") {
		t.Fatal("seeded provider pause missing")
	}
	r = e.get(t, f.adm, "/admin/health/panel")
	wantContains(t, r.body, "End the provider&#39;s pause", "admin's panel")
	wantStatus(t, e.post(t, f.adm, "/admin/health/models/resume", url.Values{"model": {"m-learned"}}, true), http.StatusSeeOther,
		"admin ends the provider's pause")
	if e.modelProviderPaused(t, "m-learned") || e.audits(t, "model.resumed", "m-learned", "user:ada") != 1 {
		t.Fatal("the provider's pause outlived the admin's resume, or the resume was not audited")
	}
}
