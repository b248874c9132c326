package delivery

import (
	"strings"
	"testing"
	"time"

	"asterion/jobs"
	"asterion/secretbox"
)

// TestConfigValidate: the zero value of every field means its default; a bad value is an
// error, never clamped.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	svc := &jobs.Service{}
	keys := secretbox.NewSource("", "")
	c := Config{Jobs: svc, SecretKey: keys}
	if err := c.validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	if c.Timeout != 10*time.Second || c.MaxAttempts != 8 || c.BackoffBase != time.Second || c.BackoffMax != time.Minute ||
		c.Lease != 40*time.Second || c.RecoverEvery != 30*time.Second {
		t.Fatalf("defaults not filled in: %+v", c)
	}
	long := Config{Jobs: svc, SecretKey: keys, BackoffBase: 2 * time.Minute}
	if err := long.validate(); err != nil || long.BackoffMax != 2*time.Minute {
		t.Fatalf("a base above the default cap: BackoffMax %s, %v; want the base", long.BackoffMax, err)
	}
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"no jobs":              {Config{SecretKey: keys}, "Jobs is required"},
		"no secret key":        {Config{Jobs: svc}, "SecretKey is required"},
		"negative timeout":     {Config{Jobs: svc, SecretKey: keys, Timeout: -time.Second}, "Timeout"},
		"negative attempts":    {Config{Jobs: svc, SecretKey: keys, MaxAttempts: -1}, "MaxAttempts"},
		"cap below base":       {Config{Jobs: svc, SecretKey: keys, BackoffBase: time.Minute, BackoffMax: time.Second}, "BackoffMax"},
		"lease within timeout": {Config{Jobs: svc, SecretKey: keys, Timeout: time.Minute, Lease: time.Minute}, "Lease"},
	} {
		if err := tc.cfg.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: validate() = %v, want an error naming %q", name, err, tc.want)
		}
	}
	if got := (Config{BackoffBase: time.Second, BackoffMax: 5 * time.Second}).Backoff(4); got != 5*time.Second {
		t.Errorf("Backoff(4) = %s, want the 5 s cap", got)
	}
}
