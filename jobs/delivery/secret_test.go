package delivery_test

import (
	"context"
	"errors"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/jobs/delivery"
	"asterion/jobs/jobstest"
	"asterion/secretbox"
)

func TestSecretFormat(t *testing.T) {
	t.Parallel()
	a, err := delivery.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := delivery.NewSecret()
	if a == b || !strings.HasPrefix(a, "whsec_") {
		t.Fatalf("secrets %q %q: want distinct whsec_ values", a, b)
	}
	key, err := delivery.ParseSecret(a)
	if err != nil || len(key) < 24 {
		t.Fatalf("ParseSecret(new secret) = %d bytes, %v", len(key), err)
	}
	for _, bad := range []string{"", "whsec_", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "whsec_not base64!",
		"whsec_c2hvcnQ=" /* 5 bytes */, "whsec_" + strings.Repeat("A", 28) /* 21 bytes */} {
		if _, err := delivery.ParseSecret(bad); !errors.Is(err, delivery.ErrSecretFormat) {
			t.Errorf("ParseSecret(%q) = %v, want ErrSecretFormat", bad, err)
		}
	}
	// The signature verifies with the test's own verifier.
	v, err := newWebhookVerifier(a)
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	ts := time.Now().Unix()
	h.Set("webhook-id", "d-1")
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", delivery.Sign(key, "d-1", ts, []byte(`{"x":1}`)))
	if err := v.verify(h, []byte(`{"x":1}`)); err != nil {
		t.Fatalf("Sign's output does not verify: %v", err)
	}
}

func TestSealedSecretOpensOnlyForItsOrgAndKey(t *testing.T) {
	t.Parallel()
	k, _, _ := secretbox.NewKey()
	other, _, _ := secretbox.NewKey()
	secret, _ := delivery.NewSecret()
	sealed, err := delivery.SealSecret(k, 7, secret)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(sealed, strings.TrimPrefix(secret, "whsec_")) {
		t.Fatal("the sealed value shows the secret")
	}
	if got, err := delivery.OpenSecret(k, 7, sealed); err != nil || got != secret {
		t.Fatalf("OpenSecret = %q, %v", got, err)
	}
	if _, err := delivery.OpenSecret(k, 8, sealed); !errors.Is(err, secretbox.ErrOpen) {
		t.Errorf("another org's row: %v, want ErrOpen", err)
	}
	if _, err := delivery.OpenSecret(other, 7, sealed); !errors.Is(err, secretbox.ErrOpen) {
		t.Errorf("another key: %v, want ErrOpen", err)
	}
	if _, err := delivery.OpenSecret(k, 7, secret); !errors.Is(err, secretbox.ErrNotSealed) {
		t.Errorf("a plain-text value: %v, want ErrNotSealed", err)
	}
	if _, err := delivery.SealSecret(k, 7, "s3cret"); !errors.Is(err, delivery.ErrSecretFormat) {
		t.Errorf("sealing a malformed secret: %v", err)
	}
}

func TestPrivateAddr(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"127.0.0.1", "127.1.2.3", "10.0.0.1", "172.16.5.4", "192.168.1.1", "169.254.169.254",
		"0.0.0.0", "100.64.0.1", "224.0.0.1", "255.255.255.255", "::1", "::", "fc00::1", "fd12:3456::1", "fe80::1",
		"::ffff:127.0.0.1", "::ffff:10.0.0.1", "ff02::1"} {
		if !delivery.PrivateAddr(netip.MustParseAddr(s)) {
			t.Errorf("%s is not refused", s)
		}
	}
	for _, s := range []string{"8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "172.32.0.1", "100.128.0.1"} {
		if delivery.PrivateAddr(netip.MustParseAddr(s)) {
			t.Errorf("%s is refused", s)
		}
	}
}

func TestCheckTarget(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, u := range []string{"http://127.0.0.1:9/x", "http://localhost:8080/", "https://[::1]/hook", "http://169.254.169.254/latest",
		"http://[::ffff:192.168.0.1]/", "http://0.0.0.0:80/"} {
		var pe *delivery.PrivateTargetError
		if err := delivery.CheckTarget(ctx, u); !errors.As(err, &pe) {
			t.Errorf("CheckTarget(%s) = %v, want a PrivateTargetError", u, err)
		}
	}
	if err := delivery.CheckTarget(ctx, "https://93.184.216.34/hook"); err != nil {
		t.Errorf("a public address is refused: %v", err)
	}
}

// TestDeliveryToPrivateTargetRefusedAtDial: with private targets not allowed, a webhook whose
// name resolves to 127.0.0.1 fails without a connection: the receiver sees no request.
func TestDeliveryToPrivateTargetRefusedAtDial(t *testing.T) {
	t.Parallel()
	cfg := fastDelivery(100 * time.Millisecond)
	cfg.AllowPrivate = false
	e := newEnv(t, jobstest.InstantSim(), cfg)
	rc := newHookReceiver(t, nil)
	u, err := url.Parse(rc.srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	e.setWebhook("http://localhost:"+u.Port()+"/hook", rc.secret)
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	sub := e.Submit("deliver me inside")
	e.WaitState(sub.JobID, jobs.StateSucceeded, 10*time.Second)
	d := e.waitDelivery(sub.JobID, 15*time.Second, delivery.Failed)
	if d.Attempts != 1 || strv(d.ErrorKind) != "target_private" || !strings.Contains(strv(d.LastError), "not a public address") ||
		d.LastStatusCode != nil {
		t.Fatalf("delivery %+v (%s): want one attempt failing target_private", d, strv(d.LastError))
	}
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
	if st := e.statusJSON(e.Op, d.OperationID); st["status"] != "failed" {
		t.Errorf("operation status %v", st)
	}
}

// TestDeliveryWithUnopenableSecretFailsUnsent: a secret that does not open with the server's
// key, or one stored in plain text, fails the delivery before anything is sent, never a
// delivery with a wrong signature.
func TestDeliveryWithUnopenableSecretFailsUnsent(t *testing.T) {
	t.Parallel()
	wrong, _, _ := secretbox.NewKey()
	cfg := fastDelivery(100 * time.Millisecond)
	cfg.SecretKey = secretbox.Static(wrong)
	e := newEnv(t, jobstest.InstantSim(), cfg)
	rc := newHookReceiver(t, nil)
	e.setWebhook(rc.srv.URL, rc.secret) // sealed with testKey, not the service's key
	jobstest.StartRuntime(t, e.D.Pool, e.S, 2)
	sub := e.Submit("sealed with another key")
	d := e.waitDelivery(sub.JobID, 15*time.Second, delivery.Failed)
	if strv(d.ErrorKind) != "webhook_secret" || !strings.Contains(strv(d.LastError), "does not open") {
		t.Fatalf("delivery %+v (%s): want webhook_secret", d, strv(d.LastError))
	}
	if _, err := e.D.Bun.ExecContext(context.Background(), "UPDATE orgs SET webhook_secret = ? WHERE id = ?", rc.secret, e.O); err != nil {
		t.Fatal(err)
	}
	sub = e.Submit("stored in plain text")
	d = e.waitDelivery(sub.JobID, 15*time.Second, delivery.Failed)
	if strv(d.ErrorKind) != "webhook_secret" || !strings.Contains(strv(d.LastError), "not sealed") {
		t.Fatalf("delivery %+v (%s): want webhook_secret, not sealed", d, strv(d.LastError))
	}
	if n := len(rc.requests()); n != 0 {
		t.Fatalf("the receiver got %d requests", n)
	}
}
