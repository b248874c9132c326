package identity_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/identity"
)

// testCost is the password cost of the package's services: the cheapest argon2id allows. The
// default's third of a second a hash under the race detector would make the sign-in tests
// spend minutes hashing; TestPasswordCost covers the cost itself.
var testCost = identity.PasswordCost{MemoryKiB: 8, Iterations: 1}

// newService returns a Service over a fresh migrated database of its own.
func newService(t *testing.T) (*identity.Service, *dbtest.DB) {
	t.Helper()
	d := dbtest.New(t)
	s, err := identity.New(d.Bun, identity.Config{PasswordCost: testCost})
	if err != nil {
		t.Fatal(err)
	}
	return s, d
}

func mustOrg(t *testing.T, s *identity.Service, name string) {
	t.Helper()
	if _, err := s.CreateOrg(context.Background(), name); err != nil {
		t.Fatalf("create org %s: %v", name, err)
	}
}

func mustUser(t *testing.T, s *identity.Service, org, name string, role identity.Role, password string) {
	t.Helper()
	if _, err := s.CreateUser(context.Background(), org, name, role, password); err != nil {
		t.Fatalf("create user %s: %v", name, err)
	}
}

func TestTokenAuthenticates(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newService(t)
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "ops", identity.RoleOperator, "")

	tok, err := s.CreateToken(ctx, "ops")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, "ast_") || strings.ContainsAny(tok, " \n") {
		t.Fatalf("token %q: want ast_ prefix and one word", tok)
	}
	p, err := s.AuthenticateToken(ctx, tok)
	if err != nil {
		t.Fatalf("authenticate fresh token: %v", err)
	}
	if p.UserName != "ops" || p.OrgName != "acme" || p.Role != identity.RoleOperator || p.UserID == 0 || p.OrgID == 0 {
		t.Fatalf("principal %+v", p)
	}

	// Only the hash is stored.
	var stored []string
	if err := d.Bun.NewSelect().TableExpr("api_tokens").Column("token_hash").Scan(ctx, &stored); err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0] == tok || strings.Contains(stored[0], tok[4:]) || stored[0] != identity.HashSecret(tok) {
		t.Fatalf("stored token column %q: want only the hash of the token", stored)
	}

	// A second token for the same user works alongside the first.
	tok2, err := s.CreateToken(ctx, "ops")
	if err != nil || tok2 == tok {
		t.Fatalf("second token %q, %v", tok2, err)
	}
	if _, err := s.AuthenticateToken(ctx, tok2); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateToken(ctx, "nobody"); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("token for unknown user: %v, want ErrNotFound", err)
	}
}

func TestWrongTokensAreUnauthenticated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newService(t)
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "bob", identity.RoleMember, "")
	tok, err := s.CreateToken(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	last := tok[len(tok)-1]
	other := byte('a')
	if last == 'a' {
		other = 'b'
	}
	for name, bad := range map[string]string{
		"empty":          "",
		"random":         identity.NewSecret("ast_"),
		"no prefix":      strings.TrimPrefix(tok, "ast_"),
		"one char off":   tok[:len(tok)-1] + string(other),
		"truncated":      tok[:len(tok)-1],
		"extended":       tok + "a",
		"upper case":     strings.ToUpper(tok),
		"hash as token":  identity.HashSecret(tok),
		"huge":           "ast_" + strings.Repeat("a", 10_000),
		"sql":            "ast_' OR '1'='1",
		"with space":     " " + tok,
		"newline inside": tok[:10] + "\n" + tok[10:],
	} {
		if _, err := s.AuthenticateToken(ctx, bad); !errors.Is(err, identity.ErrUnauthenticated) {
			t.Errorf("%s token: err %v, want ErrUnauthenticated", name, err)
		}
	}
}

func TestRevokedTokenIsUnauthenticated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newService(t)
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "bob", identity.RoleMember, "")
	keep, err := s.CreateToken(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	tok, err := s.CreateToken(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RevokeToken(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateToken(ctx, tok); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("revoked token: %v, want ErrUnauthenticated", err)
	}
	if _, err := s.AuthenticateToken(ctx, keep); err != nil {
		t.Fatalf("revoking one token broke another: %v", err)
	}
	if err := s.RevokeToken(ctx, tok); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("revoking twice: %v, want ErrNotFound", err)
	}
}

func TestDisabledUserIsUnauthenticated(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newService(t)
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "bob", identity.RoleMember, "password-1")
	tok, err := s.CreateToken(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	cookie, _, _, err := s.Login(ctx, "bob", "password-1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Bun.ExecContext(ctx, "UPDATE users SET disabled_at = now() WHERE name = 'bob'"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateToken(ctx, tok); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Errorf("token of disabled user: %v", err)
	}
	if _, _, err := s.SessionPrincipal(ctx, cookie); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Errorf("session of disabled user: %v", err)
	}
	if _, _, _, err := s.Login(ctx, "bob", "password-1"); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Errorf("login of disabled user: %v", err)
	}
}

func TestLoginAndSession(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newService(t)
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "alice", identity.RoleOperator, "alice-password")

	cookie, sess, p, err := s.Login(ctx, "alice", "alice-password")
	if err != nil {
		t.Fatal(err)
	}
	if cookie == "" || sess.CSRFToken == "" || sess.CSRFToken == cookie || p.UserName != "alice" || p.OrgName != "acme" || p.Role != identity.RoleOperator {
		t.Fatalf("login gave cookie %q session %+v principal %+v", cookie, sess, p)
	}
	if sess.IDHash == cookie || sess.IDHash != identity.HashSecret(cookie) {
		t.Fatal("session is not keyed by the hash of its cookie")
	}
	if left := time.Until(sess.ExpiresAt); left < identity.SessionTTL-time.Minute || left > identity.SessionTTL {
		t.Fatalf("session expires in %s, want %s", left, identity.SessionTTL)
	}
	got, csrf, err := s.SessionPrincipal(ctx, cookie)
	if err != nil || got != p || csrf != sess.CSRFToken {
		t.Fatalf("SessionPrincipal = %+v, %q, %v; want %+v, %q", got, csrf, err, p, sess.CSRFToken)
	}
	// Two sign-ins are two sessions with their own CSRF tokens.
	cookie2, sess2, _, err := s.Login(ctx, "alice", "alice-password")
	if err != nil || cookie2 == cookie || sess2.CSRFToken == sess.CSRFToken {
		t.Fatalf("second login: %q %q %v", cookie2, sess2.CSRFToken, err)
	}
	for _, bad := range []string{"", "x", cookie + "x", identity.HashSecret(cookie), strings.Repeat("a", 500)} {
		if _, _, err := s.SessionPrincipal(ctx, bad); !errors.Is(err, identity.ErrUnauthenticated) {
			t.Errorf("SessionPrincipal(%.20q): %v", bad, err)
		}
	}

	if err := s.Logout(ctx, cookie); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SessionPrincipal(ctx, cookie); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("session after logout: %v", err)
	}
	if _, _, err := s.SessionPrincipal(ctx, cookie2); err != nil {
		t.Fatalf("logging out one session ended another: %v", err)
	}

	// An expired session is no session.
	if _, err := d.Bun.ExecContext(ctx, "UPDATE sessions SET expires_at = now() - interval '1 second'"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.SessionPrincipal(ctx, cookie2); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("expired session: %v", err)
	}
}

func TestLoginFailuresAreIndistinguishable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newService(t)
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "alice", identity.RoleMember, "alice-password")
	mustUser(t, s, "acme", "script", identity.RoleMember, "") // token-only user

	_, _, _, wrongPw := s.Login(ctx, "alice", "Alice-password")
	_, _, _, unknown := s.Login(ctx, "mallory", "alice-password")
	_, _, _, noPw := s.Login(ctx, "script", "")
	_, _, _, empty := s.Login(ctx, "", "")
	for name, err := range map[string]error{"wrong password": wrongPw, "unknown user": unknown, "user without password": noPw, "empty": empty} {
		if !errors.Is(err, identity.ErrUnauthenticated) {
			t.Errorf("%s: %v, want ErrUnauthenticated", name, err)
			continue
		}
		if err.Error() != wrongPw.Error() {
			t.Errorf("%s says %q, wrong password says %q: the two must not differ", name, err, wrongPw)
		}
	}
	var n int
	if err := d.Bun.NewSelect().TableExpr("sessions").ColumnExpr("count(*)").Scan(ctx, &n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d sessions after failed logins", n)
	}
}

func TestCreateUserRules(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newService(t)
	mustOrg(t, s, "acme")
	mustOrg(t, s, "globex")
	mustUser(t, s, "acme", "alice", identity.RoleMember, "12345678") // exactly 8 is enough

	cases := []struct {
		name, org, user string
		role            identity.Role
		password        string
		want            error
	}{
		{"duplicate name", "acme", "alice", identity.RoleMember, "password-2", identity.ErrExists},
		{"duplicate name in another org", "globex", "alice", identity.RoleAdmin, "password-2", identity.ErrExists},
		{"invalid role", "acme", "bob", "root", "password-2", identity.ErrInvalid},
		{"empty role", "acme", "bob", "", "password-2", identity.ErrInvalid},
		{"short password", "acme", "bob", identity.RoleMember, "1234567", identity.ErrInvalid},
		{"empty name", "acme", "  ", identity.RoleMember, "password-2", identity.ErrInvalid},
		{"name with space", "acme", "bob smith", identity.RoleMember, "password-2", identity.ErrInvalid},
		{"long name", "acme", strings.Repeat("b", 101), identity.RoleMember, "password-2", identity.ErrInvalid},
		{"unknown org", "initech", "bob", identity.RoleMember, "password-2", identity.ErrNotFound},
	}
	for _, c := range cases {
		if _, err := s.CreateUser(ctx, c.org, c.user, c.role, c.password); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	// Nothing of the refused attempts was stored; the short password did not create bob.
	if _, _, _, err := s.Login(ctx, "bob", "1234567"); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Errorf("refused user can sign in: %v", err)
	}
	if _, _, _, err := s.Login(ctx, "alice", "12345678"); err != nil {
		t.Errorf("alice (8-character password) cannot sign in: %v", err)
	}
	if _, _, _, err := s.Login(ctx, "alice", "password-2"); err == nil {
		t.Error("the duplicate's password replaced alice's")
	}

	if _, err := s.CreateOrg(ctx, "acme"); !errors.Is(err, identity.ErrExists) {
		t.Errorf("duplicate org: %v", err)
	}
	if _, err := s.CreateOrg(ctx, " "); !errors.Is(err, identity.ErrInvalid) {
		t.Errorf("blank org: %v", err)
	}
	if _, err := s.OrgByName(ctx, "initech"); !errors.Is(err, identity.ErrNotFound) {
		t.Errorf("unknown org: %v", err)
	}
}

func TestBootstrapOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newService(t)

	generated, created, err := s.Bootstrap(ctx, "first-admin-pw")
	if err != nil || !created || generated != "" {
		t.Fatalf("first bootstrap = %q, %v, %v; want \"\", true, nil", generated, created, err)
	}
	_, _, p, err := s.Login(ctx, "admin", "first-admin-pw")
	if err != nil {
		t.Fatalf("admin cannot sign in with the given password: %v", err)
	}
	if p.OrgName != "default" || p.Role != identity.RoleAdmin {
		t.Fatalf("bootstrap principal %+v, want admin of org default", p)
	}

	generated, created, err = s.Bootstrap(ctx, "second-admin-pw")
	if err != nil || created || generated != "" {
		t.Fatalf("second bootstrap = %q, %v, %v; want nothing done", generated, created, err)
	}
	if _, _, _, err := s.Login(ctx, "admin", "second-admin-pw"); err == nil {
		t.Fatal("second bootstrap changed the admin password")
	}
	if _, _, _, err := s.Login(ctx, "admin", "first-admin-pw"); err != nil {
		t.Fatalf("first password stopped working: %v", err)
	}
	var users, orgs int
	if err := d.Bun.NewSelect().TableExpr("users").ColumnExpr("count(*)").Scan(ctx, &users); err != nil {
		t.Fatal(err)
	}
	if err := d.Bun.NewSelect().TableExpr("orgs").ColumnExpr("count(*)").Scan(ctx, &orgs); err != nil {
		t.Fatal(err)
	}
	if users != 1 || orgs != 1 {
		t.Fatalf("%d users and %d orgs after two bootstraps, want 1 and 1", users, orgs)
	}
}

func TestBootstrapGeneratesPassword(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newService(t)
	generated, created, err := s.Bootstrap(ctx, "")
	if err != nil || !created {
		t.Fatalf("bootstrap: %v, created=%v", err, created)
	}
	if len(generated) < 16 {
		t.Fatalf("generated password %q is too short", generated)
	}
	if _, _, _, err := s.Login(ctx, "admin", generated); err != nil {
		t.Fatalf("admin cannot sign in with the generated password: %v", err)
	}
	if _, _, _, err := s.Login(ctx, "admin", ""); err == nil {
		t.Fatal("admin signs in with an empty password")
	}

	// Another database gets another password.
	s2, _ := newService(t)
	generated2, _, err := s2.Bootstrap(ctx, "")
	if err != nil || generated2 == generated {
		t.Fatalf("second generated password %q (first %q), %v", generated2, generated, err)
	}
}

// Bootstrap does nothing when any user exists, even when there is no admin.
func TestBootstrapSkipsWhenUsersExist(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newService(t)
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "alice", identity.RoleMember, "")
	generated, created, err := s.Bootstrap(ctx, "admin-password")
	if err != nil || created || generated != "" {
		t.Fatalf("bootstrap with users = %q, %v, %v", generated, created, err)
	}
	if _, err := s.OrgByName(ctx, "default"); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("org default created anyway: %v", err)
	}
}

// Several processes starting at once on an empty database create one admin between them.
func TestBootstrapConcurrent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newService(t)
	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	createdBy := make([]bool, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, createdBy[i], errs[i] = s.Bootstrap(ctx, "admin-password")
		}()
	}
	wg.Wait()
	creators := 0
	for i := range n {
		if errs[i] != nil {
			t.Errorf("bootstrap %d: %v", i, errs[i])
		}
		if createdBy[i] {
			creators++
		}
	}
	var users int
	if err := d.Bun.NewSelect().TableExpr("users").ColumnExpr("count(*)").Scan(ctx, &users); err != nil {
		t.Fatal(err)
	}
	if creators != 1 || users != 1 {
		t.Fatalf("%d bootstraps say they created the admin, %d users exist; want 1 and 1", creators, users)
	}
}
