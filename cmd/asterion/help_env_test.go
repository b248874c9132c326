package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"asterion/config"
)

// TestHelpEnvPrintsTheTable runs `asterion help env` and finds every variable of the table,
// with its default, in what it prints.
func TestHelpEnvPrintsTheTable(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	getenv := func(string) string { return "" }
	if err := run(context.Background(), []string{"help", "env"}, getenv, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("help env: %v", err)
	}
	text := out.String()
	for _, name := range []string{"DATABASE_URL", "ASTERION_SHUTDOWN_GRACE", "ASTERION_WORKERS", "ASTERION_SECRET_KEY"} {
		v, ok := config.Lookup(name)
		if !ok {
			t.Fatalf("%s missing from the table", name)
		}
		if !strings.Contains(text, "\n  "+v.Name+"\n") {
			t.Errorf("help env does not list %s:\n%s", name, text)
		}
	}
	if !strings.Contains(text, "default: 30s") {
		t.Errorf("help env does not print the defaults:\n%s", text)
	}
	err := run(context.Background(), []string{"help", "env", "extra"}, getenv, strings.NewReader(""), &out, &errOut)
	if exitCode(err) != 2 {
		t.Errorf("help env extra: error %v, want a usage error (exit 2)", err)
	}
}
