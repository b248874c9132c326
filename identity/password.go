package identity

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/crypto/argon2"
)

// Argon2id parameters every hash shares: one lane, a 32-byte key and a 16-byte salt.
const (
	argonThreads = 1
	argonKeyLen  = 32
	argonSaltLen = 16
)

// PasswordCost is the argon2id cost of the password hashes a Service writes. A hash records
// its own cost, so hashes of any cost verify whatever the Service's is.
type PasswordCost struct {
	// MemoryKiB is the memory one hash fills, in KiB (at least 8).
	MemoryKiB uint32
	// Iterations is the passes over that memory (1 to 100).
	Iterations uint32
}

// DefaultPasswordCost is the OWASP minimum for argon2id: 19 MiB, 2 iterations, 1 lane.
var DefaultPasswordCost = PasswordCost{MemoryKiB: 19 * 1024, Iterations: 2}

// validate says what is wrong with c, in the bounds VerifyPassword accepts.
func (c PasswordCost) validate() error {
	if c.MemoryKiB < 8 || c.MemoryKiB > 1<<20 {
		return fmt.Errorf("password hash memory %d KiB is outside [8, %d]", c.MemoryKiB, 1<<20)
	}
	if c.Iterations < 1 || c.Iterations > 100 {
		return fmt.Errorf("password hash iterations %d are outside [1, 100]", c.Iterations)
	}
	return nil
}

// Hash returns the PHC-encoded argon2id hash of password at cost c.
func (c PasswordCost) Hash(password string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("read salt: %w", err)
	}
	key := argon2.IDKey([]byte(password), salt, c.Iterations, c.MemoryKiB, argonThreads, argonKeyLen)
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, c.MemoryKiB, c.Iterations, argonThreads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(key)), nil
}

// ErrBadHash reports a stored password hash that cannot be read.
var ErrBadHash = errors.New("unreadable password hash")

// HashPassword returns the PHC-encoded argon2id hash of password at DefaultPasswordCost.
func HashPassword(password string) (string, error) {
	return DefaultPasswordCost.Hash(password)
}

// VerifyPassword reports whether password matches the encoded hash, in constant time.
func VerifyPassword(password, encoded string) (bool, error) {
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[1] != "argon2id" {
		return false, ErrBadHash
	}
	var version int
	if _, err := fmt.Sscanf(parts[2], "v=%d", &version); err != nil || version != argon2.Version {
		return false, ErrBadHash
	}
	var mem, iters uint32
	var threads uint8
	if _, err := fmt.Sscanf(parts[3], "m=%d,t=%d,p=%d", &mem, &iters, &threads); err != nil {
		return false, ErrBadHash
	}
	// argon2 panics on zero iterations or lanes, and a corrupt hash must not make one sign-in
	// allocate terabytes or run for hours.
	if iters < 1 || iters > 100 || threads < 1 || mem > 1<<20 {
		return false, ErrBadHash
	}
	salt, err := base64.RawStdEncoding.DecodeString(parts[4])
	if err != nil {
		return false, ErrBadHash
	}
	want, err := base64.RawStdEncoding.DecodeString(parts[5])
	if err != nil || len(want) == 0 {
		return false, ErrBadHash
	}
	got := argon2.IDKey([]byte(password), salt, iters, mem, threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// dummyPassword is what a sign-in of a name with no password is verified against, at the
// Service's cost, so that it takes as long as one with a wrong password.
const dummyPassword = "asterion-dummy-password"
