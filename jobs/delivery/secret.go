package delivery

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"

	"asterion/secretbox"
)

// SecretPrefix starts every webhook secret (Standard Webhooks).
const SecretPrefix = "whsec_"

// secretBytes is how many random bytes a generated secret carries; MinSecretBytes is the
// fewest a given one may.
const (
	secretBytes    = 32
	MinSecretBytes = 24
)

// ErrSecretFormat means a webhook secret is not whsec_ followed by standard base64 of at least
// MinSecretBytes bytes.
var ErrSecretFormat = fmt.Errorf("a webhook secret is %s followed by base64 of at least %d bytes", SecretPrefix, MinSecretBytes)

// NewSecret generates a webhook secret: whsec_ and the base64 of fresh random bytes.
func NewSecret() (string, error) {
	raw := make([]byte, secretBytes)
	if _, err := rand.Read(raw); err != nil {
		return "", fmt.Errorf("generate a webhook secret: %w", err)
	}
	return SecretPrefix + base64.StdEncoding.EncodeToString(raw), nil
}

// ParseSecret checks a webhook secret's form and returns its signing key (the decoded bytes
// after whsec_).
func ParseSecret(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, SecretPrefix)
	if !ok {
		return nil, ErrSecretFormat
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(key) < MinSecretBytes {
		return nil, ErrSecretFormat
	}
	return key, nil
}

// Sign returns the webhook-signature value of one attempt: "v1," and the base64 HMAC-SHA256,
// under key, of "<id>.<timestamp>.<body>".
func Sign(key []byte, id string, timestamp int64, body []byte) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(id + "." + strconv.FormatInt(timestamp, 10) + "."))
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// secretContext binds a sealed secret to its org, so a value copied into another org's row does
// not open there.
func secretContext(orgID int64) []byte {
	return []byte("orgs.webhook_secret:" + strconv.FormatInt(orgID, 10))
}

// SealSecret checks secret's form and seals it with k for the orgs row of orgID: the value
// stored in orgs.webhook_secret.
func SealSecret(k secretbox.Key, orgID int64, secret string) (string, error) {
	if _, err := ParseSecret(secret); err != nil {
		return "", err
	}
	sealed, err := k.Seal([]byte(secret), secretContext(orgID))
	if err != nil {
		return "", fmt.Errorf("seal the webhook secret of org %d: %w", orgID, err)
	}
	return sealed, nil
}

// OpenSecret opens a stored webhook secret of the org orgID with k and returns the secret. A
// plain-text value is refused (secretbox.ErrNotSealed), as is one that does not open
// (secretbox.ErrOpen) or is not a valid secret.
func OpenSecret(k secretbox.Key, orgID int64, stored string) (string, error) {
	plain, err := k.Open(stored, secretContext(orgID))
	if err != nil {
		return "", fmt.Errorf("open the webhook secret of org %d: %w", orgID, err)
	}
	if _, err := ParseSecret(string(plain)); err != nil {
		return "", fmt.Errorf("open the webhook secret of org %d: %w", orgID, err)
	}
	return string(plain), nil
}
