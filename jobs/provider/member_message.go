package provider

import (
	"strconv"
	"strings"
)

// memberText is what a member is told about a failure of each kind: fixed words only, so that
// nothing the provider or the network said (its URL, resolved addresses, response bodies) can
// reach the member.
var memberText = map[ErrorKind]string{
	KindTimeout:     "the provider call timed out",
	KindRateLimit:   "the provider is limiting requests right now",
	KindProvider5xx: "the provider failed to answer",
	KindProvider4xx: "the provider refused the request",
	KindParse:       "the provider's answer could not be understood",
	KindAuth:        "the provider refused the server's credentials; an operator has to fix them",
	KindUnknown:     "the provider could not be reached or the call failed",
}

// MemberMessage describes the failure for the prompt's owner: its kind, the provider's HTTP
// status when there was one, and a fixed description of the kind. Error (with the provider's
// own message and the cause) is the detail for operators and the log.
func (e *Error) MemberMessage() string {
	var b strings.Builder
	b.WriteString("provider ")
	b.WriteString(string(e.Kind))
	if e.StatusCode != 0 {
		b.WriteString(" (HTTP ")
		b.WriteString(strconv.Itoa(e.StatusCode))
		b.WriteString(")")
	}
	b.WriteString(": ")
	if t, ok := memberText[e.Kind]; ok {
		b.WriteString(t)
	} else {
		b.WriteString(memberText[KindUnknown])
	}
	return b.String()
}
