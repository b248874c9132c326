package admit_test

import (
	"context"
	"testing"

	"asterion/db/dbtest"
	"asterion/jobs/admit"
)

// TestJSONTextProblemMatchesWhatJSONBRefuses: every JSON the check passes is stored by
// PostgreSQL's jsonb, and every one it refuses, jsonb refuses too; asked of the real server.
func TestJSONTextProblemMatchesWhatJSONBRefuses(t *testing.T) {
	t.Parallel()
	d := dbtest.New(t)
	cases := []struct {
		raw    string
		refuse bool
	}{
		{`{"type":"json_object"}`, false},
		{`{"a":"tab\tnewline\n and \u0001"}`, false},
		{`{"a":"an escaped backslash: \\u0000"}`, false},
		{`{"a":"\\\\u0000 after two"}`, false},
		{`{"a":"\ud83d\ude00 a pair", "b":"\uD83D\uDE00"}`, false},
		{`{"a":"é ü 日本"}`, false},
		{`{"a":"\u0000"}`, true},
		{`{"a\u0000":1}`, true},
		{`{"a":["x",{"b":"\\\u0000"}]}`, true},
		{`{"a":"\ud800"}`, true},
		{`{"a":"\ud800x"}`, true},
		{`{"a":"\ud800\u0041"}`, true},
		{`{"a":"\udc00"}`, true},
		{`{"a":"\ude00\ud83d"}`, true},
		{"{\"a\":\"\xff\"}", true},
	}
	for _, c := range cases {
		msg := admit.JSONTextProblem([]byte(c.raw))
		if (msg != "") != c.refuse {
			t.Errorf("%q: problem %q, want refused %v", c.raw, msg, c.refuse)
		}
		_, err := d.Pool.Exec(context.Background(), "SELECT $1::text::jsonb", c.raw)
		if (err != nil) != c.refuse {
			t.Errorf("%q: jsonb says %v, the case says refused %v", c.raw, err, c.refuse)
		}
	}
}
