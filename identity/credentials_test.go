package identity_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"asterion/identity"
)

func TestTokenLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newService(t)
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "ops", identity.RoleOperator, "")

	forever, err := s.CreateToken(ctx, "ops")
	if err != nil {
		t.Fatal(err)
	}
	// Times the database writes lie between readings of the clock taken around the call.
	created := time.Now().Add(-time.Millisecond)
	brief, info, err := s.CreateTokenExpiring(ctx, "ops", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if info.ExpiresAt == nil || info.ExpiresAt.Before(created.Add(time.Hour)) || info.ExpiresAt.After(time.Now().Add(time.Hour+time.Millisecond)) {
		t.Fatalf("expiry %v, want an hour after the token was created (%v)", info.ExpiresAt, created)
	}
	for _, bad := range []time.Duration{-time.Second, identity.MaxTokenTTL + time.Hour} {
		if _, _, err := s.CreateTokenExpiring(ctx, "ops", bad); !errors.Is(err, identity.ErrInvalid) {
			t.Errorf("ttl %s: %v", bad, err)
		}
	}
	if _, _, err := s.CreateTokenExpiring(ctx, "nobody", time.Hour); !errors.Is(err, identity.ErrNotFound) {
		t.Errorf("unknown user: %v", err)
	}

	// Used twice in one minute: written once, to the minute.
	used := time.Now()
	for range 2 {
		if _, err := s.AuthenticateToken(ctx, brief); err != nil {
			t.Fatal(err)
		}
	}
	list, err := s.ListTokens(ctx, "ops")
	if err != nil || len(list) != 2 {
		t.Fatalf("list: %+v %v", list, err)
	}
	if list[0].ID != info.ID || list[0].LastUsedAt == nil || list[1].LastUsedAt != nil {
		t.Fatalf("list %+v: want the newest first, used; the other never used", list)
	}
	if lu := *list[0].LastUsedAt; lu.Truncate(time.Minute) != lu || lu.Before(used.Truncate(time.Minute)) || lu.After(time.Now()) {
		t.Fatalf("last used %v: want the minute of the use (%v)", lu, used)
	}
	// A last use from an earlier minute is brought forward on the next use.
	if _, err := d.Bun.ExecContext(ctx, "UPDATE api_tokens SET last_used_at = now() - interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	reused := time.Now()
	if _, err := s.AuthenticateToken(ctx, brief); err != nil {
		t.Fatal(err)
	}
	list, _ = s.ListTokens(ctx, "ops")
	if list[0].LastUsedAt.Before(reused.Truncate(time.Minute)) {
		t.Fatalf("last used not refreshed: %v", list[0].LastUsedAt)
	}

	// Expired: refused at once.
	if _, err := d.Bun.ExecContext(ctx, "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE id = ?", info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateToken(ctx, brief); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("expired token: %v", err)
	}

	// Revoked by id: refused; revoking again changes nothing; an unknown id is not found.
	if changed, err := s.RevokeTokenID(ctx, list[1].ID); err != nil || !changed {
		t.Fatalf("revoke: %v %v", changed, err)
	}
	if _, err := s.AuthenticateToken(ctx, forever); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("revoked token: %v", err)
	}
	if changed, err := s.RevokeTokenID(ctx, list[1].ID); err != nil || changed {
		t.Fatalf("revoke again: %v %v", changed, err)
	}
	if _, err := s.RevokeTokenID(ctx, 999999); !errors.Is(err, identity.ErrNotFound) {
		t.Fatalf("unknown id: %v", err)
	}
	list, _ = s.ListTokens(ctx, "ops")
	if list[1].RevokedAt == nil {
		t.Fatal("list does not show the revocation")
	}
}

func TestUserLifecycle(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, _ := newService(t)
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "gil", identity.RoleMember, "old-password")
	mustUser(t, s, "acme", "hal", identity.RoleMember, "hal-password")
	tok, err := s.CreateToken(ctx, "gil")
	if err != nil {
		t.Fatal(err)
	}
	cookie, _, _, err := s.Login(ctx, "gil", "old-password")
	if err != nil {
		t.Fatal(err)
	}
	other, _, _, err := s.Login(ctx, "hal", "hal-password")
	if err != nil {
		t.Fatal(err)
	}

	ended, err := s.DisableUser(ctx, "gil")
	if err != nil || ended != 1 {
		t.Fatalf("disable: %d %v", ended, err)
	}
	if _, err := s.AuthenticateToken(ctx, tok); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("token of a disabled user: %v", err)
	}
	if _, _, err := s.SessionPrincipal(ctx, cookie); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("session of a disabled user: %v", err)
	}
	if _, _, _, err := s.Login(ctx, "gil", "old-password"); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("disabled user signs in: %v", err)
	}
	if _, err := s.DisableUser(ctx, "gil"); err != nil {
		t.Fatalf("disable twice: %v", err)
	}
	if err := s.EnableUser(ctx, "gil"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AuthenticateToken(ctx, tok); err != nil {
		t.Fatalf("token after enable: %v", err)
	}

	cookie, _, _, err = s.Login(ctx, "gil", "old-password")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPassword(ctx, "gil", "short"); !errors.Is(err, identity.ErrInvalid) {
		t.Fatalf("short password: %v", err)
	}
	if ended, err := s.SetPassword(ctx, "gil", "new-password"); err != nil || ended != 1 {
		t.Fatalf("set password: %d %v", ended, err)
	}
	if _, _, err := s.SessionPrincipal(ctx, cookie); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("session after a password change: %v", err)
	}
	if _, _, _, err := s.Login(ctx, "gil", "old-password"); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("old password: %v", err)
	}
	cookie, _, _, err = s.Login(ctx, "gil", "new-password")
	if err != nil {
		t.Fatalf("new password: %v", err)
	}

	if ended, err := s.RevokeSessions(ctx, "gil"); err != nil || ended != 1 {
		t.Fatalf("revoke sessions: %d %v", ended, err)
	}
	if _, _, err := s.SessionPrincipal(ctx, cookie); !errors.Is(err, identity.ErrUnauthenticated) {
		t.Fatalf("revoked session: %v", err)
	}
	if _, _, err := s.SessionPrincipal(ctx, other); err != nil {
		t.Fatalf("another user's session ended: %v", err)
	}
	for name, f := range map[string]func() error{
		"disable":      func() error { _, err := s.DisableUser(ctx, "nobody"); return err },
		"enable":       func() error { return s.EnableUser(ctx, "nobody") },
		"set-password": func() error { _, err := s.SetPassword(ctx, "nobody", "long-enough"); return err },
		"sessions":     func() error { _, err := s.RevokeSessions(ctx, "nobody"); return err },
		"tokens":       func() error { _, err := s.ListTokens(ctx, "nobody"); return err },
	} {
		if err := f(); !errors.Is(err, identity.ErrNotFound) {
			t.Errorf("%s of an unknown user: %v", name, err)
		}
	}
}

// TestTokenUseSkipsALockedRow: a request that finds its token's last use stale while another
// transaction holds the token's row (a concurrent request recording the same minute) is
// answered without waiting for that transaction, which is left to record the use.
func TestTokenUseSkipsALockedRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, d := newService(t)
	mustOrg(t, s, "acme")
	mustUser(t, s, "acme", "ops", identity.RoleOperator, "")
	secret, err := s.CreateToken(ctx, "ops")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := d.Bun.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, "UPDATE api_tokens SET last_used_at = now() - interval '1 hour'"); err != nil {
		t.Fatal(err)
	}
	// Waiting on the row would outlast this bound; the skip answers at once.
	waitCtx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if _, err := s.AuthenticateToken(waitCtx, secret); err != nil {
		t.Fatalf("authenticate while the token's row is locked: %v", err)
	}
}
