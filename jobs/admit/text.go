package admit

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// MaxPromptChars is the most characters a prompt's text may hold after trimming.
const MaxPromptChars = 32768

// ControlCharProblem says what is wrong with text holding NUL, another C0 control character
// other than tab, newline and carriage return, or DEL (PostgreSQL text cannot hold NUL, and the
// others are never prompt text), or returns "".
func ControlCharProblem(text string) string {
	for _, r := range text {
		if r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f {
			return fmt.Sprintf("must not contain control characters (found U+%04X); tab, newline and carriage return are allowed", r)
		}
	}
	return ""
}

// TextProblem says what is wrong with a prompt's text under the text rules (valid UTF-8, no
// control characters, not blank, at most MaxPromptChars characters once trimmed), or "".
func TextProblem(text string) string {
	if !utf8.ValidString(text) {
		return "must be valid UTF-8"
	}
	if msg := ControlCharProblem(text); msg != "" {
		return msg
	}
	switch n := utf8.RuneCountInString(strings.TrimSpace(text)); {
	case n == 0:
		return "is required and must not be blank"
	case n > MaxPromptChars:
		return fmt.Sprintf("must be at most %d characters, got %d", MaxPromptChars, n)
	}
	return ""
}

// JSONTextProblem says what PostgreSQL's jsonb would refuse in raw, JSON kept as the client
// wrote it (an option passed on to the provider as it came): bytes that are not UTF-8, the
// escape \u0000 (jsonb strings are text, which cannot hold NUL), or a \u escape of half a
// surrogate pair. It returns "" when there is none; whether raw is JSON at all is the caller's
// check.
func JSONTextProblem(raw []byte) string {
	if !utf8.Valid(raw) {
		return "must be valid UTF-8"
	}
	for i := 0; i < len(raw); i++ {
		if raw[i] != '\\' {
			continue
		}
		// Outside strings valid JSON has no backslash; inside, the escaped byte is skipped
		// with it, so an escaped backslash before "u0000" is not read as an escape.
		i++
		if i >= len(raw) || raw[i] != 'u' {
			continue
		}
		r, ok := hexEscape(raw, i+1)
		if !ok {
			continue
		}
		i += 4
		switch {
		case r == 0:
			return `must not contain \u0000 (NUL) in its strings`
		case r >= 0xdc00 && r <= 0xdfff:
			return fmt.Sprintf(`must not contain \u%04x without a high surrogate before it`, r)
		case r >= 0xd800 && r <= 0xdbff:
			low, ok := rune(0), i+2 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u'
			if ok {
				low, ok = hexEscape(raw, i+3)
			}
			if !ok || low < 0xdc00 || low > 0xdfff {
				return fmt.Sprintf(`must not contain \u%04x without a low surrogate after it`, r)
			}
			i += 6
		}
	}
	return ""
}

// hexEscape reads the four hex digits of a \u escape at raw[at:].
func hexEscape(raw []byte, at int) (rune, bool) {
	if at+4 > len(raw) {
		return 0, false
	}
	var r rune
	for _, c := range raw[at : at+4] {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return 0, false
		}
	}
	return r, true
}
