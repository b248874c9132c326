package deferred

import (
	"testing"
	"time"
)

func TestFormatTime(t *testing.T) {
	loc := time.FixedZone("X", 2*3600)
	cases := []struct {
		in   time.Time
		want string
	}{
		{time.Date(2026, 5, 18, 10, 0, 0, 0, time.UTC), "2026-05-18T10:00:00.000000Z"},
		{time.Date(2026, 5, 18, 12, 0, 0, 123456789, loc), "2026-05-18T10:00:00.123456Z"},
		{time.Date(2026, 5, 18, 10, 0, 0, 999999999, time.UTC), "2026-05-18T10:00:00.999999Z"},
	}
	for _, c := range cases {
		if got := FormatTime(c.in); got != c.want {
			t.Errorf("FormatTime(%v) = %s, want %s", c.in, got, c.want)
		}
		back, err := parseTime(FormatTime(c.in))
		if err != nil || !back.Equal(NormalizeTime(c.in)) {
			t.Errorf("parse(FormatTime(%v)) = %v, %v; want %v", c.in, back, err, NormalizeTime(c.in))
		}
	}
	if err := checkTime(time.Time{}); err == nil {
		t.Error("checkTime accepts the zero time")
	}
	if err := checkTime(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)); err == nil {
		t.Error("checkTime accepts year 10000")
	}
}
