package delivery_test

// An independent Standard Webhooks verifier, written from the specification
// (standardwebhooks.com, "Verifying webhooks"), not from the product's signer: every delivery a
// test receiver gets is checked with it.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// webhookTolerance is how far a webhook-timestamp may be from the receiver's clock.
const webhookTolerance = 5 * time.Minute

// signatureEntry is one space-separated "<version>,<base64 signature>" of webhook-signature.
type signatureEntry struct {
	version string
	sig     []byte
}

// parseSignatureHeader splits a webhook-signature value into its entries. Every entry must be
// "<version>,<base64>"; a v1 signature must decode to an HMAC-SHA256 (32 bytes). Entries of
// other versions are kept for the caller to skip.
func parseSignatureHeader(h string) ([]signatureEntry, error) {
	var out []signatureEntry
	for _, f := range strings.Fields(h) {
		version, enc, ok := strings.Cut(f, ",")
		if !ok || version == "" || enc == "" {
			return nil, fmt.Errorf("signature entry %q is not <version>,<signature>", f)
		}
		sig, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return nil, fmt.Errorf("signature entry %q: %w", f, err)
		}
		if version == "v1" && len(sig) != sha256.Size {
			return nil, fmt.Errorf("v1 signature of %d bytes, want %d", len(sig), sha256.Size)
		}
		out = append(out, signatureEntry{version: version, sig: sig})
	}
	if len(out) == 0 {
		return nil, errors.New("no signature")
	}
	return out, nil
}

// webhookVerifier checks deliveries signed with one secret.
type webhookVerifier struct {
	key []byte
	now func() time.Time
}

func newWebhookVerifier(secret string) (*webhookVerifier, error) {
	enc, ok := strings.CutPrefix(secret, "whsec_")
	if !ok {
		return nil, errors.New("the secret lacks the whsec_ prefix")
	}
	key, err := base64.StdEncoding.DecodeString(enc)
	if err != nil {
		return nil, fmt.Errorf("decode the secret: %w", err)
	}
	return &webhookVerifier{key: key, now: time.Now}, nil
}

var (
	errStaleTimestamp = errors.New("the timestamp is outside the tolerance")
	errNoMatch        = errors.New("no signature matches")
)

// verify checks a request's headers and raw body as the specification says: the three
// headers present, the timestamp within the tolerance, and one v1 signature equal (in constant
// time) to HMAC-SHA256(key, "<id>.<timestamp>.<body>").
func (v *webhookVerifier) verify(h http.Header, body []byte) error {
	id, ts, sigs := h.Get("webhook-id"), h.Get("webhook-timestamp"), h.Get("webhook-signature")
	if id == "" || ts == "" || sigs == "" {
		return errors.New("a webhook header is missing")
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q: %w", ts, err)
	}
	if d := v.now().Sub(time.Unix(sec, 0)); d > webhookTolerance || d < -webhookTolerance {
		return errStaleTimestamp
	}
	entries, err := parseSignatureHeader(sigs)
	if err != nil {
		return err
	}
	m := hmac.New(sha256.New, v.key)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := m.Sum(nil)
	for _, e := range entries {
		if e.version == "v1" && hmac.Equal(e.sig, want) {
			return nil
		}
	}
	return errNoMatch
}

// TestVerifierKnownVector: the verifier accepts the worked example of the Standard Webhooks
// reference libraries and rejects it when any part changes, so it is a real check of the spec.
func TestVerifierKnownVector(t *testing.T) {
	t.Parallel()
	v, err := newWebhookVerifier("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	v.now = func() time.Time { return time.Unix(1614265330, 0) }
	h := http.Header{}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("webhook-timestamp", "1614265330")
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	body := []byte(`{"test": 2432232314}`)
	if err := v.verify(h, body); err != nil {
		t.Fatalf("the specification's example does not verify: %v", err)
	}
	if err := v.verify(h, []byte(`{"test": 2432232315}`)); !errors.Is(err, errNoMatch) {
		t.Errorf("another body: %v", err)
	}
	// Several entries: an unknown version and a wrong v1 are skipped, the right one counts.
	h.Set("webhook-signature", "v2,abc= v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA= v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	if err := v.verify(h, body); err != nil {
		t.Errorf("several signatures: %v", err)
	}
	h.Set("webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	h.Set("webhook-id", "msg_other")
	if err := v.verify(h, body); !errors.Is(err, errNoMatch) {
		t.Errorf("another id: %v", err)
	}
	h.Set("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	v.now = func() time.Time { return time.Unix(1614265330, 0).Add(webhookTolerance + time.Second) }
	if err := v.verify(h, body); !errors.Is(err, errStaleTimestamp) {
		t.Errorf("a timestamp older than 5 minutes: %v", err)
	}
}

// FuzzParseSignatureHeader: any header value parses or is refused without a panic, and what
// parses re-encodes to entries the parser reads back the same.
func FuzzParseSignatureHeader(f *testing.F) {
	for _, s := range []string{"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "v1,a v2,b", "", " ", ",", "v1,",
		"v1,!!!", "v2,abc= v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", "v1,AAAA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, h string) {
		entries, err := parseSignatureHeader(h)
		if err != nil {
			return
		}
		parts := make([]string, 0, len(entries))
		for _, e := range entries {
			if e.version == "v1" && len(e.sig) != sha256.Size {
				t.Fatalf("accepted a v1 signature of %d bytes", len(e.sig))
			}
			parts = append(parts, e.version+","+base64.StdEncoding.EncodeToString(e.sig))
		}
		again, err := parseSignatureHeader(strings.Join(parts, " "))
		if err != nil || len(again) != len(entries) {
			t.Fatalf("re-encoded %q does not parse back: %v", parts, err)
		}
		for i := range again {
			if again[i].version != entries[i].version || string(again[i].sig) != string(entries[i].sig) {
				t.Fatalf("entry %d changed: %+v → %+v", i, entries[i], again[i])
			}
		}
	})
}
