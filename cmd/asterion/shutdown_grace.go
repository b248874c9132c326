package main

import (
	"fmt"
	"time"
)

// defaultShutdownGrace is how long a stopping process lets its running calls finish before it
// hands them back queued (README "Guarantees": what a deploy may cost).
const defaultShutdownGrace = 30 * time.Second

// maxShutdownGrace bounds ASTERION_SHUTDOWN_GRACE: a deploy waits for it.
const maxShutdownGrace = time.Hour

// shutdownGrace reads ASTERION_SHUTDOWN_GRACE: a duration from 0 (cut the calls at once) to an
// hour, default 30s. A bad value is added to errs and the result is negative.
func shutdownGrace(getenv env, errs []error) (time.Duration, []error) {
	v := getenv("ASTERION_SHUTDOWN_GRACE")
	if v == "" {
		return defaultShutdownGrace, errs
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 || d > maxShutdownGrace {
		return -1, append(errs, fmt.Errorf("ASTERION_SHUTDOWN_GRACE: want a duration from 0s to 1h like 30s, got %q", v))
	}
	return d, errs
}
