package identity

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Defaults of Config: the sign-in limits that keep password guessing slow and bounded.
const (
	DefaultSignInWindow              = 15 * time.Minute
	DefaultMaxFailuresPerUserAddress = 5
	DefaultMaxFailuresPerAddress     = 20
	DefaultMaxFailuresPerUser        = 100
	DefaultHashWait                  = time.Second
	DefaultPurgeInterval             = 5 * time.Minute
)

// Config tunes the sign-in limits and the credential housekeeping. The zero value of each field
// means its default; a negative value is an error.
type Config struct {
	// SignInWindow is how far back failed sign-ins count (default 15 minutes).
	SignInWindow time.Duration
	// MaxFailuresPerUserAddress is how many failed sign-ins of one user name from one client
	// address inside the window are allowed before further attempts of that name from that
	// address are refused (default 5). A guesser at one address locks the name out there only.
	MaxFailuresPerUserAddress int
	// MaxFailuresPerAddress is how many failed sign-ins from one client address, whatever the
	// names, are allowed before every attempt from it is refused (default 20).
	MaxFailuresPerAddress int
	// MaxFailuresPerUser is how many failed sign-ins of one user name, from all addresses, are
	// allowed before every attempt of that name is refused (default 100): a guesser spread
	// over many addresses is stopped too, at a count no single address reaches.
	MaxFailuresPerUser int
	// MaxConcurrentHashes bounds the password hashes (19 MiB each) this process runs at once
	// (default 2 × GOMAXPROCS).
	MaxConcurrentHashes int
	// HashWait is how long a sign-in waits for a free hash slot before it is answered "busy"
	// (default 1 s): a short queue absorbs a burst of people without letting a flood pile up.
	HashWait time.Duration
	// PurgeInterval is how often RunMaintenance deletes expired sessions and old failures
	// (default 5 minutes).
	PurgeInterval time.Duration
	// PasswordCost is the cost of the password hashes written (default DefaultPasswordCost).
	// Only tests lower it: under the race detector one hash at the default takes about a third
	// of a second of a core, and a suite that signs many users in spends minutes on it.
	PasswordCost PasswordCost
}

func (c Config) withDefaults() Config {
	if c.SignInWindow == 0 {
		c.SignInWindow = DefaultSignInWindow
	}
	if c.MaxFailuresPerUserAddress == 0 {
		c.MaxFailuresPerUserAddress = DefaultMaxFailuresPerUserAddress
	}
	if c.MaxFailuresPerUser == 0 {
		c.MaxFailuresPerUser = DefaultMaxFailuresPerUser
	}
	if c.MaxFailuresPerAddress == 0 {
		c.MaxFailuresPerAddress = DefaultMaxFailuresPerAddress
	}
	if c.MaxConcurrentHashes == 0 {
		c.MaxConcurrentHashes = 2 * runtime.GOMAXPROCS(0)
	}
	if c.HashWait == 0 {
		c.HashWait = DefaultHashWait
	}
	if c.PurgeInterval == 0 {
		c.PurgeInterval = DefaultPurgeInterval
	}
	if c.PasswordCost == (PasswordCost{}) {
		c.PasswordCost = DefaultPasswordCost
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.SignInWindow < 0 {
		errs = append(errs, fmt.Errorf("sign-in window %s is negative", c.SignInWindow))
	}
	if c.MaxFailuresPerUser < 0 {
		errs = append(errs, fmt.Errorf("max failures per user %d is negative", c.MaxFailuresPerUser))
	}
	if c.MaxFailuresPerUserAddress < 0 {
		errs = append(errs, fmt.Errorf("max failures per user and address %d is negative", c.MaxFailuresPerUserAddress))
	}
	if c.MaxFailuresPerAddress < 0 {
		errs = append(errs, fmt.Errorf("max failures per address %d is negative", c.MaxFailuresPerAddress))
	}
	if c.MaxConcurrentHashes < 0 {
		errs = append(errs, fmt.Errorf("max concurrent hashes %d is negative", c.MaxConcurrentHashes))
	}
	if c.HashWait < 0 {
		errs = append(errs, fmt.Errorf("hash wait %s is negative", c.HashWait))
	}
	if c.PurgeInterval < 0 {
		errs = append(errs, fmt.Errorf("purge interval %s is negative", c.PurgeInterval))
	}
	if c.PasswordCost != (PasswordCost{}) {
		if err := c.PasswordCost.validate(); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("identity config: %w", err)
	}
	return nil
}
