package provider

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The rate-limit headers an OpenAI-compatible provider sends with every answer.
const (
	headerLimitRequests     = "X-Ratelimit-Limit-Requests"
	headerLimitTokens       = "X-Ratelimit-Limit-Tokens"
	headerRemainingRequests = "X-Ratelimit-Remaining-Requests"
	headerRemainingTokens   = "X-Ratelimit-Remaining-Tokens"
	headerResetRequests     = "X-Ratelimit-Reset-Requests"
	headerResetTokens       = "X-Ratelimit-Reset-Tokens"
)

// ParseLimits reads the x-ratelimit-* headers of h. A header that is absent or malformed
// leaves its figure unknown; the provider's word is advice, never a reason to fail a call.
func ParseLimits(h http.Header) Limits {
	var l Limits
	l.LimitRequests, l.HasLimitRequests = headerCount(h, headerLimitRequests)
	l.LimitTokens, l.HasLimitTokens = headerCount(h, headerLimitTokens)
	l.RemainingRequests, l.HasRemainingRequests = headerCount(h, headerRemainingRequests)
	l.RemainingTokens, l.HasRemainingTokens = headerCount(h, headerRemainingTokens)
	l.ResetRequests = headerReset(h, headerResetRequests)
	l.ResetTokens = headerReset(h, headerResetTokens)
	return l
}

// headerCount parses a non-negative integer header.
func headerCount(h http.Header, name string) (int, bool) {
	v := strings.TrimSpace(h.Get(name))
	if v == "" {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// headerReset parses a reset header: a Go-style duration such as "1s", "6m0s" or "17ms" as
// OpenAI sends it, or plain seconds (possibly fractional) as some compatible servers do.
// Unknown or malformed is zero.
func headerReset(h http.Header, name string) time.Duration {
	v := strings.TrimSpace(h.Get(name))
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseFloat(v, 64); err == nil {
		if secs < 0 || secs > float64(maxRetryAfterSeconds) {
			return 0
		}
		return time.Duration(secs * float64(time.Second))
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0
	}
	return d
}
