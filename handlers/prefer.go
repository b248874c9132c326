package handlers

import (
	"strconv"
	"strings"
)

// MaxPreferWait is the longest Prefer: wait a request may ask for (1..60 seconds).
const MaxPreferWait = 60

// parsePreferWait reads the wait preference of a Prefer header (RFC 7240): the seconds of the
// first wait=N among its comma-separated preferences, 0 when there is none or it is not a whole
// number from 1 to 60 (an unusable preference is ignored, as RFC 7240 asks). Parameters after
// a semicolon and other preferences, such as respond-async, are ignored.
func parsePreferWait(values []string) int {
	for _, v := range values {
		for _, pref := range strings.Split(v, ",") {
			pref, _, _ = strings.Cut(pref, ";")
			name, value, ok := strings.Cut(strings.TrimSpace(pref), "=")
			if !ok || !strings.EqualFold(strings.TrimSpace(name), "wait") {
				continue
			}
			value = strings.Trim(strings.TrimSpace(value), `"`)
			if len(value) == 0 || len(value) > 2 {
				return 0
			}
			n, err := strconv.Atoi(value)
			if err != nil || n < 1 || n > MaxPreferWait {
				return 0
			}
			return n
		}
	}
	return 0
}
