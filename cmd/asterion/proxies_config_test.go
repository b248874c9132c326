package main

import (
	"net/netip"
	"strings"
	"testing"
)

// TestTrustedProxiesSetting: ASTERION_TRUSTED_PROXIES is a comma-separated list of CIDRs (a
// bare address is that one address), unset means none, and a bad entry is a one-line error
// naming the variable and the entry.
func TestTrustedProxiesSetting(t *testing.T) {
	t.Parallel()
	envOf := func(m map[string]string) env { return func(k string) string { return m[k] } }
	if l, err := httpLimits(envOf(nil)); err != nil || len(l.TrustedProxies) != 0 {
		t.Fatalf("unset: %+v %v, want none", l.TrustedProxies, err)
	}
	l, err := httpLimits(envOf(map[string]string{"ASTERION_TRUSTED_PROXIES": " 10.0.0.0/8, 192.0.2.7 ,2001:db8::/32"}))
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.0.2.7/32"), netip.MustParsePrefix("2001:db8::/32")}
	if len(l.TrustedProxies) != len(want) {
		t.Fatalf("got %v, want %v", l.TrustedProxies, want)
	}
	for i, p := range want {
		if l.TrustedProxies[i] != p {
			t.Errorf("entry %d: %v, want %v", i, l.TrustedProxies[i], p)
		}
	}
	for _, bad := range []string{"10.0.0.0/33", "proxy.internal", "10.0.0.0/8,,nope"} {
		_, err := httpLimits(envOf(map[string]string{"ASTERION_TRUSTED_PROXIES": bad}))
		if err == nil || !strings.Contains(err.Error(), "ASTERION_TRUSTED_PROXIES") || strings.Contains(err.Error(), "\n") {
			t.Errorf("ASTERION_TRUSTED_PROXIES=%s: %v, want a one-line error naming it", bad, err)
		}
	}
}
