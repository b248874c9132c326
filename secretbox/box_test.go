package secretbox_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"asterion/secretbox"
)

func mustKey(t *testing.T) secretbox.Key {
	t.Helper()
	k, _, err := secretbox.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestSealOpenRoundTrip(t *testing.T) {
	t.Parallel()
	k := mustKey(t)
	plain := []byte("whsec_c2VjcmV0IHNlY3JldCBzZWNyZXQgc2VjcmV0")
	a, err := k.Seal(plain, []byte("org:1"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := k.Seal(plain, []byte("org:1"))
	if err != nil {
		t.Fatal(err)
	}
	if a == b {
		t.Fatal("two seals of one value are equal: the nonce is not random")
	}
	if strings.Contains(a, string(plain)) || !secretbox.IsSealed(a) {
		t.Fatalf("sealed value %q shows the plaintext or lacks the format", a)
	}
	for _, s := range []string{a, b} {
		got, err := k.Open(s, []byte("org:1"))
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("Open = %q, %v; want %q", got, err, plain)
		}
	}
}

func TestOpenRefusesWrongKeyTamperingAndOtherContext(t *testing.T) {
	t.Parallel()
	k := mustKey(t)
	sealed, err := k.Seal([]byte("the secret"), []byte("org:1"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mustKey(t).Open(sealed, []byte("org:1")); !errors.Is(err, secretbox.ErrOpen) {
		t.Errorf("wrong key: %v, want ErrOpen", err)
	}
	if _, err := k.Open(sealed, []byte("org:2")); !errors.Is(err, secretbox.ErrOpen) {
		t.Errorf("another row's context: %v, want ErrOpen", err)
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "sealed:v1:"))
	if err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{0, len(raw) / 2, len(raw) - 1} {
		bad := append([]byte(nil), raw...)
		bad[i] ^= 0x01
		if _, err := k.Open("sealed:v1:"+base64.StdEncoding.EncodeToString(bad), []byte("org:1")); !errors.Is(err, secretbox.ErrOpen) {
			t.Errorf("byte %d flipped: %v, want ErrOpen", i, err)
		}
	}
	for _, s := range []string{"sealed:v1:", "sealed:v1:!!!", "sealed:v1:" + base64.StdEncoding.EncodeToString(raw[:10])} {
		if _, err := k.Open(s, []byte("org:1")); !errors.Is(err, secretbox.ErrOpen) {
			t.Errorf("Open(%q): %v, want ErrOpen", s, err)
		}
	}
	if _, err := k.Open("the secret", []byte("org:1")); !errors.Is(err, secretbox.ErrNotSealed) {
		t.Errorf("plain text: %v, want ErrNotSealed", err)
	}
}

func TestParseKey(t *testing.T) {
	t.Parallel()
	k, text, err := secretbox.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	sealed, _ := k.Seal([]byte("x"), nil)
	again, err := secretbox.ParseKey(" " + text + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := again.Open(sealed, nil); err != nil || string(got) != "x" {
		t.Fatalf("the parsed key does not open what the original sealed: %q %v", got, err)
	}
	for _, bad := range []string{"", "not base64!", base64.StdEncoding.EncodeToString(make([]byte, 16)),
		base64.StdEncoding.EncodeToString(make([]byte, 33))} {
		if _, err := secretbox.ParseKey(bad); err == nil {
			t.Errorf("ParseKey(%q) accepted", bad)
		}
	}
	var zero secretbox.Key
	if _, err := zero.Seal([]byte("x"), nil); err == nil {
		t.Error("the zero key sealed")
	}
}
