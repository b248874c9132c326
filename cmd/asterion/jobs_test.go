package main

import (
	"strings"
	"testing"
	"time"

	"asterion/jobs/intake"
)

// TestIntakeYieldSetting: ASTERION_INTAKE_YIELD takes 0 (never yield) up to one minute; the
// default is intake.DefaultYield; anything else is refused with the variable's name.
func TestIntakeYieldSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value   string
		want    time.Duration
		refused bool
	}{
		{"", intake.DefaultYield, false},
		{"0", 0, false},
		{"250ms", 250 * time.Millisecond, false},
		{"1m", time.Minute, false},
		{"-1ms", 0, true},
		{"2m", 0, true},
		{"soon", 0, true},
		{"100", 0, true},
	} {
		c := &cli{getenv: func(k string) string {
			if k == "ASTERION_INTAKE_YIELD" {
				return tc.value
			}
			return ""
		}}
		st, err := c.jobsSettings()
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "ASTERION_INTAKE_YIELD")):
			t.Errorf("%q: error %v; want one naming ASTERION_INTAKE_YIELD", tc.value, err)
		case !tc.refused && err != nil:
			t.Errorf("%q: %v", tc.value, err)
		case !tc.refused && st.intakeYield != tc.want:
			t.Errorf("%q: intake yield %s, want %s", tc.value, st.intakeYield, tc.want)
		}
	}
}
