package main

import (
	"context"
	"strings"
	"testing"
)

// TestPromptRunRefusesControlCharacters: `asterion prompt run` with a control character in the
// text fails (exit 1) with one line naming the rule, like the API's 422, and writes no prompt.
func TestPromptRunRefusesControlCharacters(t *testing.T) {
	t.Parallel()
	s := startServer(t, nil)
	env := map[string]string{"DATABASE_URL": s.DatabaseURL}
	for _, text := range []string{"a\x01b", "a\x1bb", "a\x7fb"} {
		r := runBinary(t, env, "", "prompt", "run", text)
		if line := wantFailure(t, r, 1); !strings.Contains(line, "control characters") {
			t.Errorf("prompt run %q: %q does not name the rule", text, line)
		}
	}
	var n int
	if err := s.DB.Bun.QueryRowContext(context.Background(), "SELECT count(*) FROM sa_entity").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("%d entities written by refused prompt runs", n)
	}
}
