package flowctl_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/uuid"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/jobs/flowctl"
	"asterion/jobs/governor"
	"asterion/jobs/usage"
)

type fixture struct {
	d          *dbtest.DB
	c          *flowctl.Control
	orgA, orgB int64
	adminID    int64
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	d := dbtest.New(t)
	ctx := context.Background()
	g, err := governor.New(governor.Config{DB: d.Bun, RPM: 120})
	if err != nil {
		t.Fatal(err)
	}
	c, err := flowctl.New(flowctl.Config{DB: d.Bun, Governor: g})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{d: d, c: c}
	for name, id := range map[string]*int64{"acme": &f.orgA, "globex": &f.orgB} {
		if err := d.Bun.QueryRowContext(ctx, "INSERT INTO orgs (name) VALUES (?) RETURNING id", name).Scan(id); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Bun.QueryRowContext(ctx, "INSERT INTO users (org_id, name, role, password_hash) VALUES (?, 'ada', 'admin', '') RETURNING id",
		f.orgB).Scan(&f.adminID); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	if _, err := f.d.Bun.ExecContext(context.Background(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func (f *fixture) orgs(t *testing.T, v flowctl.Viewer) map[string]flowctl.OrgFlow {
	t.Helper()
	rows, err := f.c.Orgs(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]flowctl.OrgFlow{}
	for _, o := range rows {
		out[o.Org] = o
	}
	return out
}

func (f *fixture) audits(t *testing.T, action string) int {
	t.Helper()
	var n int
	if err := f.d.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM sa_audit WHERE action = ?", action).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOrgsReadShareBudgetAndWork(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	f.exec(t, "INSERT INTO sa_job_count (org_id, state, n) VALUES (?, 'running', 2), (?, 'queued', 5), (?, 'queued', -1), (?, 'succeeded', 9)",
		f.orgA, f.orgA, f.orgA, f.orgA)
	f.exec(t, "INSERT INTO sa_org_share (org_id, weight, paused) VALUES (?, 3, true)", f.orgB)
	m, err := usage.New(usage.Config{DB: f.d.Bun})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.SetBudget(ctx, f.orgA, usage.Budget{Tokens: 1000, Period: usage.Day}); err != nil {
		t.Fatal(err)
	}
	for i, tokens := range []int{100, 150} {
		if _, err := m.Record(ctx, f.d.Bun, usage.AttemptUsage{JobID: uuid.New(), Attempt: 1 + i, OrgID: f.orgA, Model: "m1",
			StartedAt: time.Now(), InputTokens: tokens, OutputTokens: 0}); err != nil {
			t.Fatal(err)
		}
	}
	all := f.orgs(t, flowctl.Viewer{AllOrgs: true, OrgID: f.orgB})
	a, b := all["acme"], all["globex"]
	if len(all) != 2 || a.Running != 2 || a.Queued != 4 || a.Weight != 1 || a.Paused ||
		a.Budget != (usage.Budget{Tokens: 1000, Period: usage.Day}) || a.Used != 250 || a.Resets.IsZero() {
		t.Errorf("acme as admin: %+v (of %d rows)", a, len(all))
	}
	if b.Weight != 3 || !b.Paused || b.Budget.Tokens != 0 || b.Running != 0 {
		t.Errorf("globex as admin: %+v", b)
	}
	own := f.orgs(t, flowctl.Viewer{OrgID: f.orgA, OrgWide: true})
	if len(own) != 1 || own["acme"].Queued != 4 {
		t.Errorf("acme's operator sees %+v, want acme alone", own)
	}
	perMin, err := f.c.PerMinute(ctx, flowctl.Viewer{OrgID: f.orgB, OrgWide: true}, time.Now().Add(-time.Hour))
	if err != nil || len(perMin) != 0 {
		t.Errorf("globex's operator sees acme's usage: %+v %v", perMin, err)
	}
	// An attempt that finished five minutes ago counts in its minute, not in the last 60 s.
	f.exec(t, `INSERT INTO sa_attempt (job_id, attempt, org_id, model, started_at, finished_at, input_tokens, output_tokens, cost_usd)
		VALUES (?, 1, ?, 'm1', now() - interval '5 minutes', now() - interval '5 minutes', 40, 0, 0)`, uuid.New(), f.orgB)
	perMin, err = f.c.PerMinute(ctx, flowctl.Viewer{AllOrgs: true}, time.Now().Add(-time.Hour))
	if err != nil || len(perMin) != 2 {
		t.Fatalf("per minute as admin: %+v %v", perMin, err)
	}
	old, last := perMin[0], perMin[1]
	if old.Calls != 1 || old.Tokens != 40 || old.RecentCalls != 0 || old.RecentTokens != 0 ||
		last.Calls != 2 || last.Tokens != 250 || last.RecentCalls != 2 || last.RecentTokens != 250 || last.Model != "m1" ||
		last.At.Sub(old.At) < 4*time.Minute {
		t.Errorf("per minute as admin: %+v", perMin)
	}
}

func TestOrgPauseRules(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	uid := f.adminID
	actor := flowctl.Actor{UserID: &uid, Name: "user:ada"}
	tests := []struct {
		name  string
		v     flowctl.Viewer
		org   int64
		want  error
		after bool
	}{
		{"member of the org", flowctl.Viewer{OrgID: f.orgA}, f.orgA, flowctl.ErrForbidden, false},
		{"operator of another org", flowctl.Viewer{OrgID: f.orgB, OrgWide: true}, f.orgA, flowctl.ErrNotFound, false},
		{"admin, missing org", flowctl.Viewer{OrgID: f.orgB, AllOrgs: true}, 999999, flowctl.ErrNotFound, false},
		{"operator of the org", flowctl.Viewer{OrgID: f.orgA, OrgWide: true}, f.orgA, nil, true},
		{"admin", flowctl.Viewer{OrgID: f.orgB, AllOrgs: true}, f.orgA, nil, true},
	}
	for _, tt := range tests {
		f.exec(t, "DELETE FROM sa_org_share")
		before := f.audits(t, flowctl.ActionOrgPaused)
		err := f.c.SetOrgPaused(ctx, tt.v, actor, tt.org, true)
		if !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", tt.name, err, tt.want)
		}
		if got := f.orgs(t, flowctl.Viewer{AllOrgs: true})["acme"].Paused; got != tt.after {
			t.Errorf("%s: acme paused=%v, want %v", tt.name, got, tt.after)
		}
		wantAudits := before
		if tt.after {
			wantAudits++
		}
		if got := f.audits(t, flowctl.ActionOrgPaused); got != wantAudits {
			t.Errorf("%s: %d audit rows, want %d", tt.name, got, wantAudits)
		}
	}
	// Resume keeps the weight an earlier command set (the admin paused it last, so the admin
	// resumes it).
	f.exec(t, "UPDATE sa_org_share SET weight = 7 WHERE org_id = ?", f.orgA)
	if err := f.c.SetOrgPaused(ctx, flowctl.Viewer{OrgID: f.orgB, AllOrgs: true}, actor, f.orgA, false); err != nil {
		t.Fatal(err)
	}
	if a := f.orgs(t, flowctl.Viewer{AllOrgs: true})["acme"]; a.Paused || a.Weight != 7 || f.audits(t, flowctl.ActionOrgResumed) != 1 {
		t.Errorf("after resume: %+v", a)
	}
}

func TestModelPauseIsAdminOnly(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	uid := f.adminID
	actor := flowctl.Actor{UserID: &uid, Name: "user:ada"}
	for _, v := range []flowctl.Viewer{{OrgID: f.orgA}, {OrgID: f.orgA, OrgWide: true}} {
		if err := f.c.SetModelPaused(ctx, v, actor, "m1", true); !errors.Is(err, flowctl.ErrForbidden) {
			t.Errorf("viewer %+v: %v, want ErrForbidden", v, err)
		}
	}
	admin := flowctl.Viewer{OrgID: f.orgB, AllOrgs: true}
	for _, bad := range []string{"", " ", "a\nb", string(make([]byte, 300))} {
		if err := f.c.SetModelPaused(ctx, admin, actor, bad, true); !errors.Is(err, flowctl.ErrInvalid) {
			t.Errorf("model %q: %v, want ErrInvalid", bad, err)
		}
	}
	if err := f.c.SetModelPaused(ctx, admin, actor, "m1", true); err != nil {
		t.Fatal(err)
	}
	states, err := f.c.Models(ctx)
	if err != nil || len(states) != 1 || !states[0].OperatorPaused || states[0].RPM != 120 ||
		states[0].PausedRole != governor.RoleAdmin || states[0].PausedActor != "user:ada" || states[0].PausedBy == nil ||
		*states[0].PausedBy != uid ||
		states[0].RPMSource != governor.SourceConfigured || states[0].TPMSource != governor.SourceNone {
		t.Fatalf("models after pause: %+v %v", states, err)
	}
	var e db.AuditEntry
	if err := f.d.Bun.NewSelect().Model(&e).Where("action = ?", flowctl.ActionModelPaused).Scan(ctx); err != nil ||
		e.SubjectID != "m1" || e.OrgID != f.orgB || e.ActorID == nil || *e.ActorID != uid {
		t.Errorf("audit row %+v: %v", e, err)
	}
	if err := f.c.SetModelPaused(ctx, admin, actor, "m1", false); err != nil {
		t.Fatal(err)
	}
	if states, _ := f.c.Models(ctx); len(states) != 1 || states[0].OperatorPaused {
		t.Errorf("models after resume: %+v", states)
	}
}

// TestOrgPauseRoleRule: a pause records who set it, and only an equal or higher role changes
// it: an org's operator neither resumes nor re-pauses an org an admin paused, an admin lifts
// any pause, an operator its own.
func TestOrgPauseRoleRule(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	var opID int64
	if err := f.d.Bun.QueryRowContext(ctx, "INSERT INTO users (org_id, name, role, password_hash) VALUES (?, 'olga', 'operator', '') RETURNING id",
		f.orgA).Scan(&opID); err != nil {
		t.Fatal(err)
	}
	admin, adminActor := flowctl.Viewer{OrgID: f.orgB, UserID: f.adminID, AllOrgs: true}, flowctl.Actor{UserID: &f.adminID, Name: "user:ada"}
	op, opActor := flowctl.Viewer{OrgID: f.orgA, UserID: opID, OrgWide: true}, flowctl.Actor{UserID: &opID, Name: "user:olga"}
	acme := func() flowctl.OrgFlow { return f.orgs(t, flowctl.Viewer{AllOrgs: true})["acme"] }

	if err := f.c.SetOrgPaused(ctx, admin, adminActor, f.orgA, true); err != nil {
		t.Fatal(err)
	}
	if a := acme(); !a.Paused || a.PausedRole != governor.RoleAdmin || a.PausedBy == nil || *a.PausedBy != f.adminID || a.PausedActor != "user:ada" {
		t.Fatalf("after the admin's pause: %+v", a)
	}
	resumes := f.audits(t, flowctl.ActionOrgResumed)
	for _, paused := range []bool{false, true} {
		err := f.c.SetOrgPaused(ctx, op, opActor, f.orgA, paused)
		if !errors.Is(err, flowctl.ErrPauseHeld) || !errors.Is(err, flowctl.ErrForbidden) {
			t.Errorf("the operator sets paused=%v over the admin's pause: %v, want ErrPauseHeld", paused, err)
		}
	}
	if a := acme(); !a.Paused || a.PausedRole != governor.RoleAdmin || f.audits(t, flowctl.ActionOrgResumed) != resumes {
		t.Fatalf("the operator changed the admin's pause: %+v", a)
	}
	if err := f.c.SetOrgPaused(ctx, admin, adminActor, f.orgA, false); err != nil {
		t.Fatalf("the admin lifts its pause: %v", err)
	}
	if a := acme(); a.Paused || a.PausedRole != "" || a.PausedBy != nil || a.PausedActor != "" {
		t.Fatalf("after the admin's resume: %+v", a)
	}

	// The operator's own pause: the operator lifts it, and so does an admin.
	for _, lifter := range []struct {
		name string
		v    flowctl.Viewer
		a    flowctl.Actor
	}{{"operator", op, opActor}, {"admin", admin, adminActor}} {
		if err := f.c.SetOrgPaused(ctx, op, opActor, f.orgA, true); err != nil {
			t.Fatal(err)
		}
		if a := acme(); !a.Paused || a.PausedRole != governor.RoleOperator || a.PausedActor != "user:olga" {
			t.Fatalf("after the operator's pause: %+v", a)
		}
		if err := f.c.SetOrgPaused(ctx, lifter.v, lifter.a, f.orgA, false); err != nil {
			t.Errorf("the %s lifts the operator's pause: %v", lifter.name, err)
		}
		if acme().Paused {
			t.Errorf("the %s's resume left acme paused", lifter.name)
		}
	}
	// A missing org is still not found, not held.
	if err := f.c.SetOrgPaused(ctx, admin, adminActor, 999999, false); !errors.Is(err, flowctl.ErrNotFound) {
		t.Errorf("missing org: %v, want ErrNotFound", err)
	}
}
