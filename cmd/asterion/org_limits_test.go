package main

import (
	"context"
	"strings"
	"testing"

	"asterion/db"
	"asterion/db/dbtest"
	"asterion/identity"
)

func TestOrgSetBudgetAndWeight(t *testing.T) {
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
	budget := func() *db.OrgBudget {
		t.Helper()
		var bs []db.OrgBudget
		if err := d.Bun.NewSelect().Model(&bs).Where("org_id = ?", org.ID).Scan(ctx); err != nil {
			t.Fatal(err)
		}
		if len(bs) == 0 {
			return nil
		}
		return &bs[0]
	}

	if out := ok("org", "set-budget", "acme", "--tokens", "5000", "--period", "month"); !strings.Contains(out, "5000 tokens a month") {
		t.Errorf("set-budget printed %q", out)
	}
	if b := budget(); b == nil || b.Tokens != 5000 || b.Period != "month" {
		t.Fatalf("budget row %+v", b)
	}
	if out := ok("org", "set-budget", "--json", "--tokens", "10", "--period", "day", "acme"); !strings.Contains(out, `"period": "day"`) {
		t.Errorf("set-budget --json printed %q", out)
	}
	if b := budget(); b == nil || b.Tokens != 10 || b.Period != "day" {
		t.Fatalf("budget row after the change %+v", b)
	}
	ok("org", "set-budget", "acme", "--clear")
	if b := budget(); b != nil {
		t.Fatalf("budget row after --clear %+v", b)
	}

	ok("org", "set-weight", "acme", "3")
	var share db.OrgShare
	if err := d.Bun.NewSelect().Model(&share).Where("org_id = ?", org.ID).Scan(ctx); err != nil || share.Weight != 3 {
		t.Fatalf("share row %+v %v", share, err)
	}

	for _, tt := range []struct {
		args []string
		code int
		in   string
	}{
		{[]string{"org", "set-budget", "acme", "--tokens", "5", "--period", "week"}, 2, "week"},
		{[]string{"org", "set-budget", "acme", "--tokens", "0", "--period", "day"}, 2, "at least 1"},
		{[]string{"org", "set-budget", "acme", "--clear", "--tokens", "5"}, 2, "usage"},
		{[]string{"org", "set-budget", "nobody", "--tokens", "5", "--period", "day"}, 1, "nobody"},
		{[]string{"org", "set-weight", "acme", "0"}, 2, "weight"},
		{[]string{"org", "set-weight", "acme"}, 2, "usage"},
		{[]string{"org", "set-weight", "nobody", "2"}, 1, "nobody"},
	} {
		r := runBinary(t, env, "", tt.args...)
		if line := wantFailure(t, r, tt.code); !strings.Contains(line, tt.in) {
			t.Errorf("asterion %s: %q, want it to mention %q", strings.Join(tt.args, " "), line, tt.in)
		}
	}
}
