package main

import (
	"fmt"
	"time"

	"asterion/identity"
)

// identityConfig reads the sign-in settings of the environment: ASTERION_LOGIN_WINDOW (a
// duration, default 15m) is how far back failed sign-ins count.
func (c *cli) identityConfig() (identity.Config, error) {
	var cfg identity.Config
	if v := c.getenv("ASTERION_LOGIN_WINDOW"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return cfg, fmt.Errorf("ASTERION_LOGIN_WINDOW: want a positive duration like 15m, got %q", v)
		}
		cfg.SignInWindow = d
	}
	return cfg, nil
}
