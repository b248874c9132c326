package provider

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DirectivePrefix starts every sim directive. A directive runs from the
// prefix to the next white space, and may appear anywhere in a prompt, even
// in the middle of a word.
const DirectivePrefix = "#sim:"

// maxRetryAfterSeconds is the largest Retry-After, in seconds, that still fits a
// time.Duration.
const maxRetryAfterSeconds = math.MaxInt64 / int64(time.Second)

// MaxSimRetryAfter is the longest Retry-After a #sim:retry_after may ask for: any member may
// write the directive, and the pause it causes holds every org's calls to the model, so a
// larger value counts as this.
const MaxSimRetryAfter = 60 * time.Second

// MaxSimTokens is the longest answer #sim:tokens may ask for, in words.
const MaxSimTokens = 100000

// maxDirectiveEcho bounds how much of a bad directive an error quotes.
const maxDirectiveEcho = 80

// Directives are the "#sim:" directives found in a prompt. Only the sim
// provider reads them; every other provider sends the text unchanged.
type Directives struct {
	// Latency is the exact time to wait before answering, from
	// #sim:latency=<Go duration>; meaningful when HasLatency is true.
	Latency    time.Duration
	HasLatency bool
	// FailKind is the kind to fail with, from #sim:fail=<kind>[:<N>], or ""
	// when the prompt does not ask to fail.
	FailKind ErrorKind
	// FailAttempts is N of #sim:fail=<kind>:<N>: fail attempts 1..N. Zero
	// means every attempt.
	FailAttempts int
	// RetryAfter is the Retry-After of a rate_limit failure, from
	// #sim:retry_after=<seconds>; meaningful when HasRetryAfter is true.
	RetryAfter    time.Duration
	HasRetryAfter bool
	// Hang is set by #sim:hang: never answer until the context is done.
	Hang bool
	// Tokens is the answer's length in words, from #sim:tokens=<N>; zero means the default
	// answer.
	Tokens int
	// Prompt is the text with every directive removed and runs of white
	// space collapsed to single spaces.
	Prompt string
}

// ParseDirectives finds the "#sim:" directives in text:
//
//	#sim:latency=<Go duration>        answer after exactly that long (>= 0)
//	#sim:fail=<error_kind>            fail every attempt with that kind
//	#sim:fail=<error_kind>:<N>        fail attempts 1..N (N >= 1)
//	#sim:retry_after=<seconds>        Retry-After of a rate_limit failure (at most MaxSimRetryAfter)
//	#sim:hang                         never answer until cancelled or timed out
//	#sim:tokens=<N>                   answer with N words (1 <= N <= MaxSimTokens)
//
// The error kinds are those of Kinds. A directive that is malformed (an
// unknown name or kind, a bad or negative duration, N < 1, a value where
// none belongs) or given twice is an error that quotes the directive. A
// #sim:retry_after without #sim:fail=rate_limit is accepted and has no
// effect; one above MaxSimRetryAfter, however many digits it has, counts as
// MaxSimRetryAfter.
func ParseDirectives(text string) (Directives, error) {
	var d Directives
	seen := make(map[string]bool, 4)
	kept := make([]string, 0, 16)
	for _, field := range strings.Fields(text) {
		i := strings.Index(field, DirectivePrefix)
		if i < 0 {
			kept = append(kept, field)
			continue
		}
		if i > 0 {
			kept = append(kept, field[:i])
		}
		raw := field[i:]
		name, value, hasValue := strings.Cut(raw[len(DirectivePrefix):], "=")
		if seen[name] {
			return Directives{}, directiveError(raw, "given more than once")
		}
		seen[name] = true
		if err := d.apply(name, value, hasValue); err != nil {
			return Directives{}, directiveError(raw, err.Error())
		}
	}
	d.Prompt = strings.Join(kept, " ")
	return d, nil
}

// apply records one directive's value in d.
func (d *Directives) apply(name, value string, hasValue bool) error {
	if name == "hang" {
		if hasValue {
			return fmt.Errorf("hang takes no value")
		}
		d.Hang = true
		return nil
	}
	if !hasValue {
		switch name {
		case "latency", "fail", "retry_after", "tokens":
			return fmt.Errorf("%s needs a value (%s%s=…)", name, DirectivePrefix, name)
		}
		return fmt.Errorf("unknown directive %q (want latency, fail, retry_after, tokens or hang)", name)
	}
	switch name {
	case "latency":
		lat, err := time.ParseDuration(value)
		if err != nil {
			return fmt.Errorf("bad latency: %w", err)
		}
		if lat < 0 {
			return fmt.Errorf("latency %s is negative", lat)
		}
		d.Latency, d.HasLatency = lat, true
	case "fail":
		kindText, nText, hasN := strings.Cut(value, ":")
		kind, err := ParseErrorKind(kindText)
		if err != nil {
			return err
		}
		n := 0
		if hasN {
			n, err = strconv.Atoi(nText)
			if err != nil {
				return fmt.Errorf("bad attempt count %q: want an integer >= 1", nText)
			}
			if n < 1 {
				return fmt.Errorf("attempt count %d is less than 1", n)
			}
		}
		d.FailKind, d.FailAttempts = kind, n
	case "retry_after":
		ra, ok := simRetryAfter(value)
		if !ok {
			return fmt.Errorf("bad retry_after %q: want whole seconds >= 0", value)
		}
		d.RetryAfter, d.HasRetryAfter = ra, true
	case "tokens":
		n, err := strconv.Atoi(value)
		if err != nil || n < 1 || n > MaxSimTokens {
			return fmt.Errorf("bad tokens %q: want a whole number from 1 to %d", value, MaxSimTokens)
		}
		d.Tokens = n
	default:
		return fmt.Errorf("unknown directive %q (want latency, fail, retry_after, tokens or hang)", name)
	}
	return nil
}

// simRetryAfter reads the whole seconds of a #sim:retry_after, capped at MaxSimRetryAfter;
// a number too long for an int64 is still whole seconds, so it is capped too.
func simRetryAfter(value string) (time.Duration, bool) {
	if !isDigits(value) {
		return 0, false
	}
	secs, err := strconv.ParseInt(value, 10, 64)
	if err != nil || secs > int64(MaxSimRetryAfter/time.Second) {
		return MaxSimRetryAfter, true
	}
	return time.Duration(secs) * time.Second, true
}

// directiveError names the bad directive and the reason, both shortened
// to a readable length.
func directiveError(raw, reason string) error {
	return fmt.Errorf("invalid sim directive %q: %s", truncateUTF8(raw, maxDirectiveEcho), truncateUTF8(reason, 2*maxDirectiveEcho))
}

// FailsAttempt reports whether the directives make the given 1-based
// attempt fail. Attempts below 1 count as attempt 1.
func (d Directives) FailsAttempt(attempt int) bool {
	if d.FailKind == "" {
		return false
	}
	if attempt < 1 {
		attempt = 1
	}
	return d.FailAttempts == 0 || attempt <= d.FailAttempts
}

// String returns the directives in canonical form, separated by spaces and
// without the Prompt; ParseDirectives of the result gives d back (with an
// empty Prompt).
func (d Directives) String() string {
	parts := make([]string, 0, 4)
	if d.HasLatency {
		parts = append(parts, DirectivePrefix+"latency="+d.Latency.String())
	}
	if d.FailKind != "" {
		s := DirectivePrefix + "fail=" + string(d.FailKind)
		if d.FailAttempts > 0 {
			s += ":" + strconv.Itoa(d.FailAttempts)
		}
		parts = append(parts, s)
	}
	if d.HasRetryAfter {
		parts = append(parts, DirectivePrefix+"retry_after="+strconv.FormatInt(int64(d.RetryAfter/time.Second), 10))
	}
	if d.Hang {
		parts = append(parts, DirectivePrefix+"hang")
	}
	if d.Tokens > 0 {
		parts = append(parts, DirectivePrefix+"tokens="+strconv.Itoa(d.Tokens))
	}
	return strings.Join(parts, " ")
}

// truncateUTF8 shortens s to at most n bytes, ending in "…" when cut,
// without splitting a UTF-8 sequence.
func truncateUTF8(s string, n int) string {
	const ellipsis = "…"
	if len(s) <= n {
		return s
	}
	marker := ellipsis
	if n < len(ellipsis) {
		marker = ""
	}
	cut := n - len(marker)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + marker
}
