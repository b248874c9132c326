package handlers

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"asterion/identity"
)

// controlTexts are prompt texts the text rules refuse (a control character other than tab
// and line ends), as JSON string bodies and as the raw text a form carries.
var controlTexts = []struct{ name, json, raw string }{
	{"NUL", `a\u0000b`, "a\x00b"},
	{"SOH", `a\u0001b`, "a\x01b"},
	{"ESC", `a\u001bb`, "a\x1bb"},
	{"vertical tab inside", `a\u000bb`, "a\vb"},
	{"unit separator", `a\u001fb`, "a\x1fb"},
	{"DEL", `a\u007fb`, "a\x7fb"},
	{"NUL at the end", `ab\u0000`, "ab\x00"},
}

// TestControlCharactersRefusedOnEveryWritePath: a prompt, a chain step or an option holding NUL,
// another C0 control character other than tab, newline and carriage return, or DEL answers 422
// naming the field, and writes nothing, on the REST submit and the chain submit; tab, newline
// and carriage return are accepted.
func TestControlCharactersRefusedOnEveryWritePath(t *testing.T) {
	t.Parallel()
	f := startLiveServer(t)
	u := f.user(t, "text-org", "text-member", identity.RoleMember)
	before := f.rowCounts(t)
	for _, tc := range controlTexts {
		for _, c := range []struct{ path, body, field string }{
			{"/sa-core/v1/prompt", `{"prompt":"` + tc.json + `"}`, "prompt"},
			{"/sa-core/v1/prompt", `{"prompt":"hi","options":{"model":"` + tc.json + `"}}`, "options.model"},
			{"/sa-core/v1/chains", `{"steps":[{"prompt":"fine"},{"prompt":"` + tc.json + `"}]}`, "steps[1].prompt"},
		} {
			r := f.do(t, "POST", c.path, u.Tok, c.body)
			p := checkProblem(t, r, http.StatusUnprocessableEntity)
			if p.Errors[c.field] == "" {
				t.Errorf("%s %s: 422 does not name %s: %s", tc.name, c.path, c.field, r.Body)
			}
		}
	}
	if after := f.rowCounts(t); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("refused submits wrote rows: before %v, after %v", before, after)
	}
	r := f.do(t, "POST", "/sa-core/v1/prompt", u.Tok, `{"prompt":"line one\n\tline two\r\nend"}`)
	if r.StatusCode != http.StatusAccepted {
		t.Fatalf("tab, newline and carriage return: %s", r)
	}
}

// TestComposeFormRefusesControlCharacters: the mission compose form answers 422 with the
// compose error for the same texts, and creates no prompt.
func TestComposeFormRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	e := newMissionEnv(t)
	b, _ := e.member(t, "acme", "tess", identity.RoleMember)
	for _, tc := range controlTexts {
		resp, body := b.htmx(t, "POST", "/mission/prompts", url.Values{"prompt": {tc.raw}, "priority": {"5"}})
		if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(body, "control characters") {
			t.Errorf("%s: %d, want 422 naming control characters:\n%s", tc.name, resp.StatusCode, body)
		}
	}
	var n int
	if err := e.db.Bun.NewSelect().Table("sa_entity").ColumnExpr("count(*)").Scan(t.Context(), &n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d entities written by refused compose submits", n)
	}
}
