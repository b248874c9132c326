package provider

import (
	"errors"
	"strings"
	"testing"
)

// TestMemberMessageCarriesNoProviderText: whatever the provider said and whatever the cause, the
// member's message is the kind, the HTTP status and fixed words; Error keeps the detail.
func TestMemberMessageCarriesNoProviderText(t *testing.T) {
	t.Parallel()
	cause := errors.New(`Post "http://10.1.2.3:8080/v1/chat/completions": dial tcp 10.1.2.3:8080: connect: connection refused`)
	for _, k := range Kinds() {
		e := &Error{Kind: k, StatusCode: 502, Message: "body said: secret at https://internal.example", Err: cause}
		got := e.MemberMessage()
		for _, leak := range []string{"10.1.2.3", "http", "internal.example", "secret", "connection refused"} {
			if strings.Contains(got, leak) {
				t.Errorf("%s: member message %q carries %q", k, got, leak)
			}
		}
		if !strings.HasPrefix(got, "provider "+string(k)+" (HTTP 502): ") || strings.TrimSpace(strings.TrimPrefix(got, "provider "+string(k)+" (HTTP 502): ")) == "" {
			t.Errorf("%s: member message %q", k, got)
		}
		if !strings.Contains(e.Error(), "10.1.2.3") || !strings.Contains(e.Error(), "secret") {
			t.Errorf("%s: Error() %q lost the detail", k, e.Error())
		}
	}
	if got := (&Error{Kind: "bogus"}).MemberMessage(); !strings.Contains(got, memberText[KindUnknown]) {
		t.Errorf("unknown kind: %q", got)
	}
}
