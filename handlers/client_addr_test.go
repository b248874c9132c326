package handlers

import (
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"asterion/db/dbtest"
	"asterion/identity"
)

func TestForwardedClient(t *testing.T) {
	t.Parallel()
	trusted, err := ParseTrustedProxies("10.0.0.0/8, 2001:db8:ffff::/48")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, peer string
		xff        []string
		trusted    TrustedProxies
		want       string
	}{
		{"untrusted peer: header ignored", "198.51.100.9", []string{"192.0.2.1"}, trusted, "198.51.100.9"},
		{"no proxies configured", "10.0.0.1", []string{"192.0.2.1"}, nil, "10.0.0.1"},
		{"trusted peer, one hop", "10.0.0.1", []string{"192.0.2.1"}, trusted, "192.0.2.1"},
		{"the client's own claim left of it is skipped", "10.0.0.1", []string{"203.0.113.5, 192.0.2.1"}, trusted, "192.0.2.1"},
		{"a chain of trusted proxies", "10.0.0.1", []string{"192.0.2.1, 10.1.1.1,10.2.2.2"}, trusted, "192.0.2.1"},
		{"several headers are one list", "10.0.0.1", []string{"203.0.113.5", "192.0.2.1, 10.1.1.1"}, trusted, "192.0.2.1"},
		{"with a port", "10.0.0.1", []string{"[2001:db8::7]:4711"}, trusted, "2001:db8::7"},
		{"a malformed entry stops the walk", "10.0.0.1", []string{"192.0.2.1, junk, 10.3.3.3"}, trusted, "10.3.3.3"},
		{"no header from a trusted peer", "10.0.0.1", nil, trusted, "10.0.0.1"},
		{"every hop trusted", "10.0.0.1", []string{"10.9.9.9"}, trusted, "10.9.9.9"},
		{"mapped IPv4 peer", "::ffff:10.0.0.1", []string{"192.0.2.1"}, trusted, "192.0.2.1"},
	} {
		var values [][]byte
		for _, v := range c.xff {
			values = append(values, []byte(v))
		}
		if got := forwardedClient(netip.MustParseAddr(c.peer), values, c.trusted); got.String() != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// liveLogin posts the sign-in form to f as a browser at the given X-Forwarded-For (none when
// empty) and returns the answer.
func liveLogin(t *testing.T, f *liveServer, name, password, xff string) liveResp {
	t.Helper()
	form := f.do(t, "GET", "/login", "", nil)
	var csrfCookie string
	for _, c := range form.Cookies() {
		if c.Name == loginCSRF {
			csrfCookie = c.Value
		}
	}
	body := url.Values{csrfField: {hiddenCSRF(t, string(form.Body))}, "username": {name}, "password": {password}}.Encode()
	req, err := http.NewRequest("POST", f.Base+"/login", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Cookie", loginCSRF+"="+csrfCookie)
	if xff != "" {
		req.Header.Set("X-Forwarded-For", xff)
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer client.CloseIdleConnections()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return liveResp{Response: resp, Body: raw}
}

// Behind a trusted proxy, the sign-in limits count the client X-Forwarded-For names: five
// failures for admin from one client do not lock admin out from another, and the sixth from
// the first is refused with Retry-After and the page saying when. A client's own claim left of
// the proxy's entry changes nothing. From a peer that is not a trusted proxy the header is
// ignored: every attempt counts against the peer.
func TestSignInLimitsBehindAProxy(t *testing.T) {
	t.Parallel()
	t.Run("trusted proxy", func(t *testing.T) {
		t.Parallel()
		f := startLiveServerWith(t, liveServerConfig{HoldWorkers: true, Deps: func(_ *dbtest.DB, d *Deps) {
			d.Limits.TrustedProxies = TrustedProxies{netip.MustParsePrefix("127.0.0.0/8")}
		}})
		pw := "admin-password-1"
		if _, err := f.IDs.CreateOrg(t.Context(), "acme"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.IDs.CreateUser(t.Context(), "acme", "admin", identity.RoleAdmin, pw); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			// The guesser claims to be someone else; the proxy appends what it saw.
			if r := liveLogin(t, f, "admin", "wrong-"+strconv.Itoa(i), "192.0.2.200, 203.0.113.5"); r.StatusCode != http.StatusUnauthorized {
				t.Fatalf("failure %d: %d", i+1, r.StatusCode)
			}
		}
		r := liveLogin(t, f, "admin", pw, "203.0.113.5")
		if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
			t.Fatalf("the right password from the guessing client: %d (Retry-After %q), want 429 with Retry-After",
				r.StatusCode, r.Header.Get("Retry-After"))
		}
		if m := loginErrorRE.FindStringSubmatch(string(r.Body)); m == nil || !strings.Contains(m[1], "Try again at") {
			t.Errorf("the refusal page does not say when to try again")
		}
		if r := liveLogin(t, f, "admin", pw, "198.51.100.10"); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("admin from another client behind the proxy: %d, want 303 (signed in)", r.StatusCode)
		}
		if r := liveLogin(t, f, "admin", pw, "192.0.2.200"); r.StatusCode != http.StatusSeeOther {
			t.Fatalf("admin from the address the guesser claimed: %d, want 303 (the claim did not count)", r.StatusCode)
		}
	})
	t.Run("untrusted peer", func(t *testing.T) {
		t.Parallel()
		f := startLiveServerWith(t, liveServerConfig{HoldWorkers: true})
		pw := "admin-password-2"
		if _, err := f.IDs.CreateOrg(t.Context(), "acme"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.IDs.CreateUser(t.Context(), "acme", "admin", identity.RoleAdmin, pw); err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if r := liveLogin(t, f, "admin", "wrong-"+strconv.Itoa(i), "203.0.113."+strconv.Itoa(i+1)); r.StatusCode != http.StatusUnauthorized {
				t.Fatalf("failure %d: %d", i+1, r.StatusCode)
			}
		}
		if r := liveLogin(t, f, "admin", pw, "198.51.100.10"); r.StatusCode != http.StatusTooManyRequests {
			t.Fatalf("with X-Forwarded-For from an untrusted peer: %d, want 429 (the header is ignored)", r.StatusCode)
		}
	})
}
