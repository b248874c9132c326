package handlers

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// TrustedProxies are the reverse proxies whose X-Forwarded-For names the client
// (ASTERION_TRUSTED_PROXIES). The zero value trusts none: the client is the TCP peer.
type TrustedProxies []netip.Prefix

// ParseTrustedProxies reads a comma-separated list of CIDRs (a bare address means that one
// address); an empty string is none.
func ParseTrustedProxies(s string) (TrustedProxies, error) {
	var out TrustedProxies
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if p, err := netip.ParsePrefix(part); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(part)
		if err != nil {
			return nil, fmt.Errorf("%q is not a CIDR such as 10.0.0.0/8 or an address", part)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}

// contains reports whether a is one of the trusted proxies.
func (t TrustedProxies) contains(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range t {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// clientAddress is the address of the client of c's request, for the limits that count per
// client (sign-in) and for the log. From a peer that is not a trusted proxy it is the peer, and
// X-Forwarded-For is ignored (anyone can send it). From a trusted proxy it is the rightmost
// address of X-Forwarded-For that is not itself a trusted proxy: each proxy appends the peer it
// saw, so the entries right of the client's are the chain of trusted proxies, and whatever
// stands left of it was written by the client and proves nothing.
//
// Fiber's own ProxyHeader reading is not used: it takes the leftmost address of the header,
// the one the client chose.
func (s *Server) clientAddress(c *fiber.Ctx) string {
	peer, ok := netip.AddrFromSlice(c.Context().RemoteIP())
	if !ok {
		return c.Context().RemoteIP().String()
	}
	return forwardedClient(peer, c.Request().Header.PeekAll(fiber.HeaderXForwardedFor), s.deps.Limits.TrustedProxies).String()
}

// forwardedClient is clientAddress for a peer and the values of its X-Forwarded-For headers
// (several headers read as one list, in order).
func forwardedClient(peer netip.Addr, values [][]byte, trusted TrustedProxies) netip.Addr {
	peer = peer.Unmap()
	if len(trusted) == 0 || !trusted.contains(peer) {
		return peer
	}
	client := peer
	for i := len(values) - 1; i >= 0; i-- {
		hops := bytes.Split(values[i], []byte(","))
		for j := len(hops) - 1; j >= 0; j-- {
			a, ok := forwardedAddr(string(bytes.TrimSpace(hops[j])))
			if !ok {
				// Nothing left of a malformed entry can be trusted: the last proxy that
				// wrote a good one is the client as far as anyone knows.
				return client
			}
			client = a
			if !trusted.contains(a) {
				return a
			}
		}
	}
	return client
}

// forwardedAddr reads one X-Forwarded-For entry: an address, or an address with a port as some
// proxies write it ("192.0.2.1:4711", "[2001:db8::1]:4711").
func forwardedAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return a.Unmap(), true
	}
	if host, _, err := net.SplitHostPort(s); err == nil {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap(), true
		}
	}
	return netip.Addr{}, false
}
