package identity

import (
	"context"
	"errors"
	"testing"

	"asterion/db/dbtest"
)

// While every hash slot is taken, a sign-in answers ErrSignInBusy after the wait and is not
// counted as a failure.
func TestSignInBusy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := dbtest.New(t)
	s, err := New(d.Bun, Config{MaxConcurrentHashes: 1, HashWait: 1})
	if err != nil {
		t.Fatal(err)
	}
	s.hashSlots <- struct{}{}
	if _, _, _, err := s.SignIn(ctx, "admin", "whatever", "192.0.2.1"); !errors.Is(err, ErrSignInBusy) {
		t.Fatalf("sign-in with no free slot: %v, want ErrSignInBusy", err)
	}
	var n int
	if err := d.Bun.NewSelect().TableExpr("login_failures").ColumnExpr("count(*)").Scan(ctx, &n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("a busy answer was counted as %d failures", n)
	}
	<-s.hashSlots
	if _, _, _, err := s.SignIn(ctx, "admin", "whatever", "192.0.2.1"); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("with a free slot: %v", err)
	}
}

func TestAddressKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"192.0.2.7":            "192.0.2.7",
		"::ffff:192.0.2.7":     "192.0.2.7",
		"2001:db8:1:2:3:4:5:6": "2001:db8:1:2::/64",
		"2001:db8:1:2::9":      "2001:db8:1:2::/64",
		"fe80::1%eth0":         "fe80::/64",
		"":                     "",
		"not an address":       "not an address",
	} {
		if got := addressKey(in); got != want {
			t.Errorf("addressKey(%q) = %q, want %q", in, got, want)
		}
	}
}
