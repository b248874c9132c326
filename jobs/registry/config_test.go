package registry

import (
	"strings"
	"testing"
	"time"

	"github.com/uptrace/bun"

	"asterion/jobs/deferred"
)

// TestConfigValidate: the zero value of every field means its default; a bad value is an
// error, never clamped.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	bdb := &bun.DB{}
	c := Config{DB: bdb}
	if err := c.validate(); err != nil {
		t.Fatalf("zero config: %v", err)
	}
	if c.Policy != deferred.DefaultPolicy() || c.Logger == nil {
		t.Fatalf("defaults not filled in: %+v", c)
	}
	for name, tc := range map[string]struct {
		cfg  Config
		want string
	}{
		"no database":      {Config{}, "DB is required"},
		"policy not valid": {Config{DB: bdb, Policy: deferred.Policy{MaxTTL: -time.Minute}}, "registry:"},
	} {
		if err := tc.cfg.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: validate() = %v, want an error naming %q", name, err, tc.want)
		}
	}
}
