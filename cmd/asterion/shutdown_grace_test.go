package main

import (
	"strings"
	"testing"
	"time"
)

// TestShutdownGraceSetting: ASTERION_SHUTDOWN_GRACE takes a duration from 0s (cut at once) up to
// an hour, default 30s; anything else is refused with the variable's name.
func TestShutdownGraceSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value   string
		want    time.Duration
		refused bool
	}{
		{"", 30 * time.Second, false},
		{"0s", 0, false},
		{"1500ms", 1500 * time.Millisecond, false},
		{"1h", time.Hour, false},
		{"-1s", 0, true},
		{"2h", 0, true},
		{"30", 0, true},
		{"later", 0, true},
	} {
		c := &cli{getenv: func(k string) string {
			if k == "ASTERION_SHUTDOWN_GRACE" {
				return tc.value
			}
			return ""
		}}
		st, err := c.jobsSettings()
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "ASTERION_SHUTDOWN_GRACE")):
			t.Errorf("%q: error %v; want one naming ASTERION_SHUTDOWN_GRACE", tc.value, err)
		case !tc.refused && err != nil:
			t.Errorf("%q: %v", tc.value, err)
		case !tc.refused && st.shutdownGrace != tc.want:
			t.Errorf("%q: grace %s, want %s", tc.value, st.shutdownGrace, tc.want)
		}
	}
}
