package identity_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/identity"
)

func newLimitedService(t *testing.T, cfg identity.Config) (*identity.Service, *dbtest.DB) {
	t.Helper()
	_, d := newService(t)
	if cfg.PasswordCost == (identity.PasswordCost{}) {
		cfg.PasswordCost = testCost
	}
	s, err := identity.New(d.Bun, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

func failures(t *testing.T, d *dbtest.DB) int {
	t.Helper()
	var n int
	if err := d.Bun.NewSelect().TableExpr("login_failures").ColumnExpr("count(*)").Scan(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// ageFailures moves every recorded failure back by d, as if that much time had passed.
func ageFailures(t *testing.T, d *dbtest.DB, by time.Duration) {
	t.Helper()
	if _, err := d.Bun.ExecContext(context.Background(), "UPDATE login_failures SET at = at - ? * interval '1 microsecond'", by.Microseconds()); err != nil {
		t.Fatal(err)
	}
}

func wantLimited(t *testing.T, what string, err error) *identity.SignInLimitError {
	t.Helper()
	var lim *identity.SignInLimitError
	if !errors.As(err, &lim) {
		t.Fatalf("%s: %v, want a SignInLimitError", what, err)
	}
	return lim
}

// After five failures for one name from one address the sixth attempt of that name from there
// is refused whatever the password, until the oldest of the five leaves the window; the same
// name from another address, and another name from the same address, are unaffected.
func TestSignInLimitPerUserAndAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newLimitedService(t, identity.Config{})
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "alice", identity.RoleMember, "alice-password")
	mustUser(t, s, "acme", "bob", identity.RoleMember, "bob-password")

	for i := range 5 {
		if _, _, _, err := s.SignIn(ctx, "alice", "wrong-password", "192.0.2.1"); !errors.Is(err, identity.ErrUnauthenticated) {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	lim := wantLimited(t, "the right password after five failures from the same address", func() error {
		_, _, _, err := s.SignIn(ctx, "alice", "alice-password", "192.0.2.1")
		return err
	}())
	if ra := lim.RetryAfter(); ra < 14*time.Minute || ra > 15*time.Minute+time.Second {
		t.Fatalf("Retry-After %s, want about 15 minutes", ra)
	}
	if n := failures(t, d); n != 5 {
		t.Fatalf("%d failures stored, want 5 (refusals are not stored)", n)
	}
	if _, _, p, err := s.SignIn(ctx, "alice", "alice-password", "192.0.2.9"); err != nil || p.UserName != "alice" {
		t.Fatalf("the same name from another address: %+v %v", p, err)
	}
	if _, _, _, err := s.SignIn(ctx, "bob", "bob-password", "192.0.2.1"); err != nil {
		t.Fatalf("another name from the same address: %v", err)
	}
	ageFailures(t, d, 15*time.Minute)
	if _, _, p, err := s.SignIn(ctx, "alice", "alice-password", "192.0.2.1"); err != nil || p.UserName != "alice" {
		t.Fatalf("after the window: %+v %v", p, err)
	}
}

// A hundred failures for one name spread over many addresses (none reaching its own limits)
// refuse that name from every address, a new one too, until they leave the window; another
// name is unaffected.
func TestSignInLimitPerUser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newLimitedService(t, identity.Config{})
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "admin", identity.RoleAdmin, "admin-password")
	mustUser(t, s, "acme", "bob", identity.RoleMember, "bob-password")
	for i := range 100 {
		addr := fmt.Sprintf("198.51.100.%d", i/4)
		if _, _, _, err := s.SignIn(ctx, "admin", "wrong-password", addr); !errors.Is(err, identity.ErrUnauthenticated) {
			t.Fatalf("failure %d from %s: %v", i+1, addr, err)
		}
	}
	wantLimited(t, "the right password from a fresh address after 100 failures", func() error {
		_, _, _, err := s.SignIn(ctx, "admin", "admin-password", "203.0.113.77")
		return err
	}())
	if _, _, _, err := s.SignIn(ctx, "bob", "bob-password", "203.0.113.77"); err != nil {
		t.Fatalf("another name: %v", err)
	}
	if n := failures(t, d); n != 100 {
		t.Fatalf("%d failures stored, want 100", n)
	}
	ageFailures(t, d, 15*time.Minute)
	if _, _, _, err := s.SignIn(ctx, "admin", "admin-password", "203.0.113.77"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
}

func TestSignInLimitPerAddress(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newLimitedService(t, identity.Config{})
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "carol", identity.RoleMember, "carol-password")
	for i := range 20 {
		if _, _, _, err := s.SignIn(ctx, "nobody-"+string(rune('a'+i)), "x", "2001:db8:1:2::1"); !errors.Is(err, identity.ErrUnauthenticated) {
			t.Fatalf("failure %d: %v", i+1, err)
		}
	}
	// Another address of the same /64 counts as the same address.
	wantLimited(t, "right password from the same /64", func() error {
		_, _, _, err := s.SignIn(ctx, "carol", "carol-password", "2001:db8:1:2:ffff::7")
		return err
	}())
	if _, _, _, err := s.SignIn(ctx, "carol", "carol-password", "2001:db8:1:3::1"); err != nil {
		t.Fatalf("another /64: %v", err)
	}
	if n := failures(t, d); n != 20 {
		t.Fatalf("%d failures stored, want 20", n)
	}
}

// A success takes back the failure counted in advance: a user who signs in five times is not
// locked out.
func TestSignInSuccessDoesNotCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newLimitedService(t, identity.Config{})
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "dave", identity.RoleMember, "dave-password")
	for i := range 6 {
		if _, _, _, err := s.SignIn(ctx, "dave", "dave-password", "192.0.2.1"); err != nil {
			t.Fatalf("sign-in %d: %v", i+1, err)
		}
	}
	if n := failures(t, d); n != 0 {
		t.Fatalf("%d failures after successes", n)
	}
}

// Many concurrent wrong attempts for one name: exactly the limit are checked (each a failure),
// every other is refused without a hash, and the count never exceeds the limit.
func TestSignInConcurrentFlood(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newLimitedService(t, identity.Config{MaxFailuresPerAddress: 1000, HashWait: time.Minute})
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "erin", identity.RoleMember, "erin-password")
	const n = 60
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, _, errs[i] = s.SignIn(ctx, "erin", "wrong-password", "192.0.2.1")
		}()
	}
	wg.Wait()
	checked, refused := 0, 0
	for i, err := range errs {
		var lim *identity.SignInLimitError
		switch {
		case errors.Is(err, identity.ErrUnauthenticated):
			checked++
		case errors.As(err, &lim):
			refused++
		default:
			t.Fatalf("attempt %d: %v", i, err)
		}
	}
	if checked != 5 || refused != n-5 {
		t.Fatalf("%d checked, %d refused; want 5 and %d", checked, refused, n-5)
	}
	if got := failures(t, d); got != 5 {
		t.Fatalf("%d failures stored, want 5", got)
	}
}

func TestPurge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newLimitedService(t, identity.Config{})
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "fay", identity.RoleMember, "fay-password")
	old, _, _, err := s.SignIn(ctx, "fay", "fay-password", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	live, _, _, err := s.SignIn(ctx, "fay", "fay-password", "192.0.2.1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Bun.ExecContext(ctx, "UPDATE sessions SET expires_at = now() - interval '1 second' WHERE id_hash = ?", identity.HashSecret(old)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if _, _, _, err := s.SignIn(ctx, "fay", "nope", "192.0.2.1"); !errors.Is(err, identity.ErrUnauthenticated) {
			t.Fatal(err)
		}
	}
	ageFailures(t, d, 15*time.Minute)
	if _, _, _, err := s.SignIn(ctx, "fay", "nope", "192.0.2.1"); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatal(err)
	}
	r, err := s.Purge(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if r.Sessions != 1 || r.SignInFailures != 2 {
		t.Fatalf("purge %+v, want 1 session and 2 failures", r)
	}
	if n := failures(t, d); n != 1 {
		t.Fatalf("%d failures left, want the recent one", n)
	}
	if _, _, err := s.SessionPrincipal(ctx, live); err != nil {
		t.Fatalf("the live session was purged: %v", err)
	}
	var sessions int
	if err := d.Bun.NewSelect().TableExpr("sessions").ColumnExpr("count(*)").Scan(ctx, &sessions); err != nil {
		t.Fatal(err)
	}
	if sessions != 1 {
		t.Fatalf("%d sessions left, want 1", sessions)
	}
}

func TestConfigValidate(t *testing.T) {
	t.Parallel()
	for name, cfg := range map[string]identity.Config{
		"window":          {SignInWindow: -time.Second},
		"per user":        {MaxFailuresPerUser: -1},
		"per pair":        {MaxFailuresPerUserAddress: -1},
		"per addr":        {MaxFailuresPerAddress: -1},
		"hashes":          {MaxConcurrentHashes: -1},
		"hash wait":       {HashWait: -1},
		"purge":           {PurgeInterval: -1},
		"hash memory":     {PasswordCost: identity.PasswordCost{MemoryKiB: 7, Iterations: 1}},
		"hash memory max": {PasswordCost: identity.PasswordCost{MemoryKiB: 1<<20 + 1, Iterations: 1}},
		"hash passes":     {PasswordCost: identity.PasswordCost{MemoryKiB: 8}},
		"hash passes max": {PasswordCost: identity.PasswordCost{MemoryKiB: 8, Iterations: 101}},
	} {
		if _, err := identity.New(nil, cfg); err == nil {
			t.Errorf("%s: a value out of bounds was accepted", name)
		}
	}
	s, err := identity.New(nil, identity.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if c := s.Config(); c.SignInWindow != 15*time.Minute || c.MaxFailuresPerUserAddress != 5 || c.MaxFailuresPerAddress != 20 ||
		c.MaxFailuresPerUser != 100 || c.MaxConcurrentHashes < 2 || c.PasswordCost != identity.DefaultPasswordCost {
		t.Fatalf("defaults %+v", c)
	}
}
