package identity

import (
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Defaults of Config (CONTRACT.md, "Limits that protect the service").
const (
	DefaultSignInWindow          = 15 * time.Minute
	DefaultMaxFailuresPerUser    = 5
	DefaultMaxFailuresPerAddress = 20
	DefaultHashWait              = time.Second
	DefaultPurgeInterval         = 5 * time.Minute
)

// Config tunes the sign-in limits and the credential housekeeping. The zero value of each field
// means its default; a negative value is an error.
type Config struct {
	// SignInWindow is how far back failed sign-ins count (default 15 minutes).
	SignInWindow time.Duration
	// MaxFailuresPerUser is how many failed sign-ins of one user name inside the window are
	// allowed before further attempts are refused (default 5).
	MaxFailuresPerUser int
	// MaxFailuresPerAddress is the same for one client address (default 20).
	MaxFailuresPerAddress int
	// MaxConcurrentHashes bounds the password hashes (19 MiB each) this process runs at once
	// (default 2 × GOMAXPROCS).
	MaxConcurrentHashes int
	// HashWait is how long a sign-in waits for a free hash slot before it is answered "busy"
	// (default 1 s): a short queue absorbs a burst of people without letting a flood pile up.
	HashWait time.Duration
	// PurgeInterval is how often RunMaintenance deletes expired sessions and old failures
	// (default 5 minutes).
	PurgeInterval time.Duration
}

func (c Config) withDefaults() Config {
	if c.SignInWindow == 0 {
		c.SignInWindow = DefaultSignInWindow
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
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("identity config: %w", err)
	}
	return nil
}
