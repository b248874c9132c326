package governor_test

import (
	"context"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/jobs/governor"
	"asterion/jobs/provider"
)

// TestStatesShowLimitsAndPauses: the operator's view of each model says which limit holds and
// where it comes from, and whether a provider's Retry-After or an operator holds the calls.
func TestStatesShowLimitsAndPauses(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	ctx := context.Background()
	g := newGovernor(t, d, governor.Config{RPM: 90})
	before := time.Now().Add(-time.Millisecond)
	if err := g.Observe(ctx, "a", governor.Observation{Limits: provider.Limits{HasLimitRequests: true, LimitRequests: 60,
		HasLimitTokens: true, LimitTokens: 40000}, RateLimited: true, RetryAfter: 30 * time.Second, HasRetryAfter: true}); err != nil {
		t.Fatal(err)
	}
	after := time.Now().Add(time.Millisecond)
	uid := int64(0)
	if err := d.Bun.QueryRowContext(ctx, "INSERT INTO orgs (name) VALUES ('o') RETURNING id").Scan(&uid); err != nil {
		t.Fatal(err)
	}
	if err := d.Bun.QueryRowContext(ctx, "INSERT INTO users (org_id, name, role, password_hash) VALUES (?, 'ada', 'admin', '') RETURNING id",
		uid).Scan(&uid); err != nil {
		t.Fatal(err)
	}
	if err := g.Pause(ctx, "b", governor.Pauser{UserID: &uid, Role: governor.RoleAdmin, Actor: "user:ada"}); err != nil {
		t.Fatal(err)
	}
	states, err := g.States(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(states) != 2 {
		t.Fatalf("states %+v, want a and b", states)
	}
	a, b := states[0], states[1]
	if a.Model != "a" || a.RPM != 90 || a.RPMSource != governor.SourceConfigured || a.TPM != 40000 ||
		a.TPMSource != governor.SourceLearned || !a.ProviderPaused() || a.OperatorPaused || a.Limited != 1 {
		t.Errorf("a: %+v", a)
	}
	// The pause runs 30 s from the database's clock during Observe, which lies between before
	// and after.
	if a.PausedUntil == nil || a.PausedUntil.Before(before.Add(30*time.Second)) || a.PausedUntil.After(after.Add(30*time.Second)) {
		t.Errorf("a paused until %v, want 30 s after the observation (between %v and %v)", a.PausedUntil,
			before.Add(30*time.Second), after.Add(30*time.Second))
	}
	if b.Model != "b" || !b.OperatorPaused || b.ProviderPaused() || b.TPMSource != governor.SourceNone || b.TPM != 0 ||
		b.PausedBy == nil || *b.PausedBy != uid || b.PausedRole != governor.RoleAdmin || b.PausedActor != "user:ada" {
		t.Errorf("b: %+v", b)
	}
	if a.PauseRole() != governor.RoleProvider || b.PauseRole() != governor.RoleAdmin {
		t.Errorf("pause roles: a %q, b %q", a.PauseRole(), b.PauseRole())
	}
}
