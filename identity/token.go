package identity

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"strings"
)

// tokenPrefix marks Asterion API tokens so they are recognisable in a leaked secret scan.
const tokenPrefix = "ast_"

// NewSecret returns a random URL-safe secret of 32 bytes of entropy with the given prefix.
func NewSecret(prefix string) string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("crypto/rand failed: " + err.Error()) // the system is unusable without randomness
	}
	return prefix + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// HashSecret returns the hex SHA-256 of a high-entropy secret; a slow hash adds nothing there.
func HashSecret(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(sum[:])
}
