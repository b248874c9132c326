package delivery

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// PrivateTargetError says a webhook target is, or resolves to, an address that is not on the
// public internet (loopback, private, link-local, unspecified, shared or multicast).
type PrivateTargetError struct {
	// Host is the name or address of the URL; Addr the address it was, or resolved to.
	Host string
	Addr netip.Addr
}

func (e *PrivateTargetError) Error() string {
	if e.Host == "" || e.Host == e.Addr.String() {
		return fmt.Sprintf("%s is not a public address", e.Addr)
	}
	return fmt.Sprintf("%s resolves to %s, which is not a public address", e.Host, e.Addr)
}

// blockedPrefixes are ranges that the net/netip predicates in privateAddr do not cover.
var blockedPrefixes = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use IPv4/IPv6 translation
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // deprecated site-local
	netip.MustParsePrefix("::ffff:0:0:0/96"), // IPv4-translated
}

// PrivateAddr reports whether a is an address webhooks may not be sent to unless private
// targets are allowed: loopback, private (10/8, 172.16/12, 192.168/16, fc00::/7), link-local
// (169.254/16, fe80::/10), unspecified (0.0.0.0, ::), shared (100.64/10), multicast and
// reserved ranges. An IPv4-mapped IPv6 address is judged as its IPv4 address.
func PrivateAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
		a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() {
		return true
	}
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// CheckTarget resolves the host of a webhook URL and returns a *PrivateTargetError when any of
// its addresses is private (see PrivateAddr). It is the early check of a configured URL; each
// delivery checks again at dial time, since the name may resolve differently later.
func CheckTarget(ctx context.Context, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return fmt.Errorf("parse the webhook URL: %w", err)
	}
	host := u.Hostname()
	if a, err := netip.ParseAddr(host); err == nil {
		if PrivateAddr(a) {
			return &PrivateTargetError{Host: host, Addr: a.Unmap()}
		}
		return nil
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("resolve the webhook host %s: %w", host, err)
	}
	for _, a := range addrs {
		if PrivateAddr(a) {
			return &PrivateTargetError{Host: host, Addr: a.Unmap()}
		}
	}
	return nil
}

// guardedDialer dials only public addresses unless allowPrivate. The check runs on the address
// actually being connected to, after resolution, so a name that resolves to a public address
// when the URL is configured and to a private one later (DNS rebinding) is still refused.
func guardedDialer(allowPrivate bool, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}
	if allowPrivate {
		return d
	}
	d.Control = func(_, address string, _ syscall.RawConn) error {
		host, _, err := net.SplitHostPort(address)
		if err != nil {
			return fmt.Errorf("dial %s: %w", address, err)
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return fmt.Errorf("dial %s: not an IP address", address)
		}
		if PrivateAddr(a) {
			return &PrivateTargetError{Addr: a.Unmap()}
		}
		return nil
	}
	return d
}
