package deferred

import (
	"fmt"
	"time"
)

// TimeFormat is the layout of every time this package writes: RFC 3339 with
// exactly six fractional digits, always in UTC (so the zone is written "Z").
// Six digits match the microsecond precision of PostgreSQL timestamps, so a
// time read back from the database formats to the same text.
const TimeFormat = "2006-01-02T15:04:05.000000Z07:00"

// FormatTime writes t in TimeFormat after converting it to UTC. Digits below
// the microsecond are dropped, not rounded.
func FormatTime(t time.Time) string { return t.UTC().Format(TimeFormat) }

// NormalizeTime returns t in UTC truncated to the microsecond, without a
// monotonic clock reading: the value that FormatTime and a parse of its
// output agree on.
func NormalizeTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// parseTime reads an RFC 3339 time and returns it normalized.
func parseTime(s string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, err
	}
	return NormalizeTime(t), nil
}

// checkTime refuses the zero time and years that RFC 3339 cannot write in
// four digits.
func checkTime(t time.Time) error {
	if t.IsZero() {
		return fmt.Errorf("is zero")
	}
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return fmt.Errorf("year %d outside 0001..9999", y)
	}
	return nil
}
