package main

import (
	"strings"
	"testing"
	"time"

	"asterion/jobs/governor"
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

// TestProviderMaxPauseSetting: ASTERION_PROVIDER_MAX_PAUSE takes a positive duration up to a
// day; the default is the governor's; anything else is refused in one line naming the variable.
func TestProviderMaxPauseSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		value   string
		want    time.Duration
		refused bool
	}{
		{"", governor.DefaultMaxPause, false},
		{"30s", 30 * time.Second, false},
		{"24h", 24 * time.Hour, false},
		{"0", 0, true},
		{"0s", 0, true},
		{"-5m", 0, true},
		{"25h", 0, true},
		{"300", 0, true},
		{"forever", 0, true},
		{"9000000000h", 0, true},
	} {
		c := &cli{getenv: func(k string) string {
			if k == "ASTERION_PROVIDER_MAX_PAUSE" {
				return tc.value
			}
			return ""
		}}
		st, err := c.jobsSettings()
		switch {
		case tc.refused && (err == nil || !strings.Contains(err.Error(), "ASTERION_PROVIDER_MAX_PAUSE") || strings.Contains(err.Error(), "\n")):
			t.Errorf("%q: error %v; want one line naming ASTERION_PROVIDER_MAX_PAUSE", tc.value, err)
		case !tc.refused && err != nil:
			t.Errorf("%q: %v", tc.value, err)
		case !tc.refused && st.maxPause != tc.want:
			t.Errorf("%q: max pause %s, want %s", tc.value, st.maxPause, tc.want)
		}
		if got := st.governorConfig(&conn{}).MaxPause; !tc.refused && got != tc.want {
			t.Errorf("%q: the governor is given %s, want %s", tc.value, got, tc.want)
		}
	}
}
