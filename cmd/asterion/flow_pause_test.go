package main

import (
	"context"
	"strings"
	"testing"

	"asterion/db/dbtest"
	"asterion/identity"
)

// TestOrgAndModelPause: the pause commands write the flags the claim and the governor honour,
// audit them, and refuse bad arguments.
func TestOrgAndModelPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	org, err := identity.NewService(d.Bun).CreateOrg(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"DATABASE_URL": d.URL.String()}
	ok := func(args ...string) string {
		t.Helper()
		r := runBinary(t, env, "", args...)
		if r.code != 0 {
			t.Fatalf("asterion %s: exit %d: %s", strings.Join(args, " "), r.code, r.stderr)
		}
		return r.stdout
	}
	scalar := func(q string, args ...any) (v any) {
		t.Helper()
		if err := d.Bun.QueryRowContext(ctx, q, args...).Scan(&v); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return v
	}
	orgPaused := func() any {
		return scalar("SELECT coalesce((SELECT paused FROM sa_org_share WHERE org_id = ?), false)", org.ID)
	}
	modelPaused := func() any {
		return scalar("SELECT coalesce((SELECT operator_paused FROM sa_governor WHERE model = 'gpt-x'), false)")
	}

	if out := ok("org", "pause", "acme"); !strings.Contains(out, "org acme is paused") {
		t.Errorf("org pause printed %q", out)
	}
	if orgPaused() != true {
		t.Fatal("org not paused")
	}
	if out := ok("org", "resume", "--json", "acme"); !strings.Contains(out, `"paused": false`) {
		t.Errorf("org resume --json printed %q", out)
	}
	if orgPaused() != false {
		t.Fatal("org not resumed")
	}
	if out := ok("model", "pause", "gpt-x"); !strings.Contains(out, "model gpt-x is paused") {
		t.Errorf("model pause printed %q", out)
	}
	if modelPaused() != true {
		t.Fatal("model not paused")
	}
	ok("model", "resume", "gpt-x")
	if modelPaused() != false {
		t.Fatal("model not resumed")
	}
	if n := scalar("SELECT count(*) FROM sa_audit WHERE actor = 'cli' AND action IN ('org.paused', 'org.resumed', 'model.paused', 'model.resumed')"); n != int64(4) {
		t.Errorf("%v audit rows, want 4", n)
	}
	// The command line acts as an admin: it lifts an admin's org pause, and a model resume ends
	// the provider's pause too.
	if _, err := d.Bun.ExecContext(ctx, "UPDATE sa_org_share SET paused = true, paused_role = 'admin', paused_actor = 'user:ada' WHERE org_id = ?", org.ID); err != nil {
		t.Fatal(err)
	}
	ok("org", "resume", "acme")
	if orgPaused() != false {
		t.Fatal("the command line did not lift an admin's org pause")
	}
	if _, err := d.Bun.ExecContext(ctx, "UPDATE sa_governor SET paused_until = now() + interval '4 minutes' WHERE model = 'gpt-x'"); err != nil {
		t.Fatal(err)
	}
	ok("model", "resume", "gpt-x")
	if held := scalar("SELECT paused_until IS NOT NULL FROM sa_governor WHERE model = 'gpt-x'"); held != false {
		t.Fatal("model resume left the provider's pause")
	}

	for _, tt := range []struct {
		args []string
		code int
		in   string
	}{
		{[]string{"org", "pause"}, 2, "usage"},
		{[]string{"org", "pause", "acme", "globex"}, 2, "usage"},
		{[]string{"org", "resume", "nobody"}, 1, "nobody"},
		{[]string{"model", "pause"}, 2, "usage"},
		{[]string{"model"}, 2, "usage"},
		{[]string{"model", "pause", "two words"}, 1, "invalid"},
	} {
		r := runBinary(t, env, "", tt.args...)
		if line := wantFailure(t, r, tt.code); !strings.Contains(line, tt.in) {
			t.Errorf("asterion %s: %q, want it to mention %q", strings.Join(tt.args, " "), line, tt.in)
		}
	}
}
