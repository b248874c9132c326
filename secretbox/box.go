// Package secretbox seals small secrets at rest (an org's webhook secret, say) with the
// server's secret key, using AES-256-GCM with a random nonce per value. A sealed value is
// text: a version prefix and the base64 of nonce and ciphertext, so it fits a text column.
// Opening with the wrong key, or a value altered at rest, is an error, never a wrong
// plaintext.
package secretbox

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the length of a secret key in bytes (AES-256).
const KeySize = 32

// sealedPrefix marks a sealed value and names its format, so a later format can coexist.
const sealedPrefix = "sealed:v1:"

var (
	// ErrNotSealed means a value is not in the sealed format (a plain-text secret, say).
	ErrNotSealed = errors.New("secretbox: the value is not sealed")
	// ErrOpen means a sealed value does not open with the key: the key is wrong or the value
	// was altered.
	ErrOpen = errors.New("secretbox: the value does not open with this key (wrong key, or the value was altered)")
)

// Key is a secret key ready to seal and open values. The zero Key is unusable.
type Key struct {
	aead cipher.AEAD
}

// NewKey makes a key from KeySize random bytes and returns it with its base64 text (the form
// ParseKey reads).
func NewKey() (Key, string, error) {
	raw := make([]byte, KeySize)
	if _, err := rand.Read(raw); err != nil {
		return Key{}, "", fmt.Errorf("generate a secret key: %w", err)
	}
	k, err := keyFrom(raw)
	return k, base64.StdEncoding.EncodeToString(raw), err
}

// ParseKey reads a key written as standard base64 of KeySize bytes (surrounding white space
// is ignored).
func ParseKey(text string) (Key, error) {
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(text))
	if err != nil || len(raw) != KeySize {
		return Key{}, fmt.Errorf("secretbox: a secret key is base64 of %d bytes", KeySize)
	}
	return keyFrom(raw)
}

func keyFrom(raw []byte) (Key, error) {
	block, err := aes.NewCipher(raw)
	if err != nil {
		return Key{}, fmt.Errorf("secretbox: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return Key{}, fmt.Errorf("secretbox: %w", err)
	}
	return Key{aead: aead}, nil
}

// Seal encrypts plain under k, binding it to context (authenticated, not encrypted: the row
// the value belongs to, so a sealed value copied to another row does not open there).
func (k Key) Seal(plain, context []byte) (string, error) {
	if k.aead == nil {
		return "", errors.New("secretbox: seal with the zero key")
	}
	nonce := make([]byte, k.aead.NonceSize(), k.aead.NonceSize()+len(plain)+k.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("secretbox: make a nonce: %w", err)
	}
	return sealedPrefix + base64.StdEncoding.EncodeToString(k.aead.Seal(nonce, nonce, plain, context)), nil
}

// Open decrypts a value Seal made under k with the same context. It returns ErrNotSealed for
// a value not in the sealed format and ErrOpen for a wrong key, context or altered value.
func (k Key) Open(sealed string, context []byte) ([]byte, error) {
	if k.aead == nil {
		return nil, errors.New("secretbox: open with the zero key")
	}
	rest, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return nil, ErrNotSealed
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil || len(raw) < k.aead.NonceSize()+k.aead.Overhead() {
		return nil, ErrOpen
	}
	n := k.aead.NonceSize()
	plain, err := k.aead.Open(nil, raw[:n], raw[n:], context)
	if err != nil {
		return nil, ErrOpen
	}
	return plain, nil
}

// IsSealed says whether s is in the sealed format (it may still not open).
func IsSealed(s string) bool { return strings.HasPrefix(s, sealedPrefix) }
