package testbin_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"asterion/internal/testbin"
)

// TestAsterionBuildsOnce checks that the binary runs and that a second call returns the same
// file instead of building again.
func TestAsterionBuildsOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	first := testbin.Asterion(t)
	if second := testbin.Asterion(t); second != first {
		t.Fatalf("second call returned %s, want the first build %s", second, first)
	}
	out, err := exec.Command(first, "help").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "serve") {
		t.Fatalf("asterion help: %v\n%s", err, out)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	testbin.Cleanup()
	os.Exit(code)
}
