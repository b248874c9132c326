package identity_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"asterion/db/dbtest"
	"asterion/identity"
)

func TestHashPasswordVerifies(t *testing.T) {
	t.Parallel()
	h, err := identity.HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	// OWASP minimum for argon2id: 19 MiB, 2 iterations, 1 lane.
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q does not carry argon2id with the OWASP parameters", h)
	}
	if strings.Contains(h, "correct horse") {
		t.Fatal("hash contains the password")
	}
	ok, err := identity.VerifyPassword("correct horse battery", h)
	if err != nil || !ok {
		t.Fatalf("right password: ok=%v err=%v", ok, err)
	}
	for _, wrong := range []string{"correct horse batterY", "correct horse battery ", "", "correct horse"} {
		ok, err := identity.VerifyPassword(wrong, h)
		if err != nil || ok {
			t.Errorf("wrong password %q: ok=%v err=%v, want false, nil", wrong, ok, err)
		}
	}
	h2, err := identity.HashPassword("correct horse battery")
	if err != nil {
		t.Fatal(err)
	}
	if h2 == h {
		t.Fatal("two hashes of one password are equal: the salt is not random")
	}
}

// A hash whose salt or key was altered is readable but no longer matches.
func TestVerifyPasswordTamperedHash(t *testing.T) {
	t.Parallel()
	h, err := identity.HashPassword("s3cret-password")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(h, "$") // "", argon2id, v=19, m=…, salt, key
	flip := func(s string) string {
		c := byte('A')
		if s[0] == 'A' {
			c = 'B'
		}
		return string(c) + s[1:]
	}
	for name, idx := range map[string]int{"salt": 4, "key": 5} {
		p := append([]string(nil), parts...)
		p[idx] = flip(p[idx])
		ok, err := identity.VerifyPassword("s3cret-password", strings.Join(p, "$"))
		if err != nil || ok {
			t.Errorf("tampered %s: ok=%v err=%v, want false, nil", name, ok, err)
		}
	}
	// Weaker parameters than stored give another key: no match.
	weaker := strings.Replace(h, "t=2", "t=1", 1)
	if ok, err := identity.VerifyPassword("s3cret-password", weaker); err != nil || ok {
		t.Errorf("tampered iterations: ok=%v err=%v, want false, nil", ok, err)
	}
}

func TestVerifyPasswordBadHash(t *testing.T) {
	t.Parallel()
	h, err := identity.HashPassword("s3cret-password")
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.Split(h, "$")
	with := func(idx int, v string) string {
		p := append([]string(nil), parts...)
		p[idx] = v
		return strings.Join(p, "$")
	}
	cases := map[string]string{
		"empty":              "",
		"plain text":         "s3cret-password",
		"bcrypt":             "$2a$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy",
		"argon2i":            with(1, "argon2i"),
		"missing part":       strings.Join(parts[:5], "$"),
		"extra part":         h + "$x",
		"version 16":         with(2, "v=16"),
		"version text":       with(2, "v=x"),
		"params text":        with(3, "m=a,t=2,p=1"),
		"salt not base64":    with(4, "!!!!"),
		"key not base64":     with(5, "!!!!"),
		"empty key":          with(5, ""),
		"zero iterations":    with(3, "m=19456,t=0,p=1"),
		"zero lanes":         with(3, "m=19456,t=2,p=0"),
		"absurd memory":      with(3, "m=4294967295,t=2,p=1"),
		"absurd iterations":  with(3, "m=19456,t=4294967295,p=1"),
		"negative parameter": with(3, "m=-1,t=2,p=1"),
	}
	for name, enc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			done := make(chan struct{})
			var ok bool
			var err error
			go func() {
				defer close(done)
				defer func() {
					if r := recover(); r != nil {
						err = errors.New("panic")
						t.Errorf("VerifyPassword panicked on %q: %v", enc, r)
					}
				}()
				ok, err = identity.VerifyPassword("s3cret-password", enc)
			}()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				t.Fatalf("VerifyPassword on %q did not return: a stored hash can make a login run for ever", enc)
			}
			if ok || !errors.Is(err, identity.ErrBadHash) {
				t.Errorf("VerifyPassword(%q) = %v, %v; want false, ErrBadHash", enc, ok, err)
			}
		})
	}
}

func TestRoleAllows(t *testing.T) {
	t.Parallel()
	roles := []identity.Role{identity.RoleMember, identity.RoleOperator, identity.RoleAdmin}
	want := map[[2]identity.Role]bool{
		{identity.RoleMember, identity.RoleMember}:     true,
		{identity.RoleMember, identity.RoleOperator}:   false,
		{identity.RoleMember, identity.RoleAdmin}:      false,
		{identity.RoleOperator, identity.RoleMember}:   true,
		{identity.RoleOperator, identity.RoleOperator}: true,
		{identity.RoleOperator, identity.RoleAdmin}:    false,
		{identity.RoleAdmin, identity.RoleMember}:      true,
		{identity.RoleAdmin, identity.RoleOperator}:    true,
		{identity.RoleAdmin, identity.RoleAdmin}:       true,
	}
	for _, have := range roles {
		for _, need := range roles {
			if got := have.Allows(need); got != want[[2]identity.Role{have, need}] {
				t.Errorf("%s.Allows(%s) = %v, want %v", have, need, got, !got)
			}
		}
	}
	// Unknown roles fail closed both ways: an unknown role may do nothing, and nothing grants a
	// requirement nobody can name.
	for _, bogus := range []identity.Role{"", "root", "Admin", "superuser"} {
		for _, r := range roles {
			if bogus.Allows(r) {
				t.Errorf("unknown role %q allows %s", bogus, r)
			}
			if r.Allows(bogus) {
				t.Errorf("%s allows unknown requirement %q", r, bogus)
			}
		}
	}
}

func TestParseRole(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"member", "operator", "admin"} {
		r, err := identity.ParseRole(s)
		if err != nil || string(r) != s {
			t.Errorf("ParseRole(%q) = %q, %v", s, r, err)
		}
	}
	for _, s := range []string{"", "Admin", "root", " admin", "members"} {
		if _, err := identity.ParseRole(s); err == nil {
			t.Errorf("ParseRole(%q) accepted", s)
		}
	}
}

func TestPrincipalScopes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		role         identity.Role
		allOrgs, org bool
	}{
		{identity.RoleMember, false, false},
		{identity.RoleOperator, false, true},
		{identity.RoleAdmin, true, true},
		{"", false, false},
	}
	for _, c := range cases {
		p := identity.Principal{Role: c.role}
		if p.SeesAllOrgs() != c.allOrgs || p.SeesOrg() != c.org {
			t.Errorf("%q: SeesAllOrgs=%v SeesOrg=%v, want %v %v", c.role, p.SeesAllOrgs(), p.SeesOrg(), c.allOrgs, c.org)
		}
	}
}

func TestSecrets(t *testing.T) {
	t.Parallel()
	a, b := identity.NewSecret("ast_"), identity.NewSecret("ast_")
	if a == b {
		t.Fatal("two secrets are equal")
	}
	if !strings.HasPrefix(a, "ast_") || len(a) < len("ast_")+50 {
		t.Fatalf("secret %q: want the prefix and at least 256 bits of base32", a)
	}
	if again := identity.HashSecret(a); identity.HashSecret(a) == identity.HashSecret(b) || again != identity.HashSecret(a) {
		t.Fatal("HashSecret is not a deterministic function of its input")
	}
	if strings.Contains(identity.HashSecret(a), a[4:]) {
		t.Fatal("hash contains the secret")
	}
}

// TestPasswordCost: a Service writes its users' hashes at its configured cost, and they sign
// in; a Service of another cost signs the same users in (a hash carries its cost), and a name
// with no password is verified against a hash of the Service's own cost and refused.
func TestPasswordCost(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	cheap, err := identity.New(d.Bun, identity.Config{PasswordCost: identity.PasswordCost{MemoryKiB: 64, Iterations: 3}})
	if err != nil {
		t.Fatal(err)
	}
	mustOrg(t, cheap, "acme")
	mustUser(t, cheap, "acme", "ada", identity.RoleMember, "ada-long-password")
	var hash string
	if err := d.Bun.NewSelect().TableExpr("users").Column("password_hash").Where("name = 'ada'").Scan(ctx, &hash); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=64,t=3,p=1$") {
		t.Errorf("hash %q, want argon2id at 64 KiB and 3 passes", hash)
	}
	if _, err := cheap.SetPassword(ctx, "ada", "ada-new-long-password"); err != nil {
		t.Fatal(err)
	}
	if err := d.Bun.NewSelect().TableExpr("users").Column("password_hash").Where("name = 'ada'").Scan(ctx, &hash); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(hash, "$argon2id$v=19$m=64,t=3,p=1$") {
		t.Errorf("hash after a new password %q, want argon2id at 64 KiB and 3 passes", hash)
	}
	for name, s := range map[string]*identity.Service{"the cheap service": cheap, "a default service": identity.NewService(d.Bun)} {
		if _, _, _, err := s.SignIn(ctx, "ada", "ada-new-long-password", "192.0.2.1"); err != nil {
			t.Errorf("%s: sign-in with the right password: %v", name, err)
		}
		if _, _, _, err := s.SignIn(ctx, "nobody", "ada-new-long-password", "192.0.2.2"); !errors.Is(err, identity.ErrUnauthenticated) {
			t.Errorf("%s: sign-in of an unknown name: %v, want unauthenticated", name, err)
		}
	}
}
