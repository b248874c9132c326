package provider

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ParseRetryAfter parses the value of an HTTP Retry-After header (RFC 9110,
// section 10.2.3): either whole seconds or an HTTP-date, the latter measured from
// now. A date in the past means zero. ok is false when the value is empty,
// malformed, negative or too large for a time.Duration.
func ParseRetryAfter(value string, now time.Time) (d time.Duration, ok bool) {
	value = strings.TrimSpace(value)
	if value == "" {
		return 0, false
	}
	if isDigits(value) {
		secs, err := strconv.ParseInt(value, 10, 64)
		if err != nil || secs > maxRetryAfterSeconds {
			return 0, false
		}
		return time.Duration(secs) * time.Second, true
	}
	at, err := http.ParseTime(value)
	if err != nil {
		return 0, false
	}
	return max(at.Sub(now), 0), true
}
