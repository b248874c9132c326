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
