package docscheck_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"asterion/internal/docscheck"
)

const root = "../.."

// TestRelativeLinksResolve fails when a relative link of README.md or docs/ leads to no file
// of the repository, or to no heading of the document it names.
func TestRelativeLinksResolve(t *testing.T) {
	t.Parallel()
	files, err := docscheck.MarkdownFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found only %v: the check is looking in the wrong place", files)
	}
	for _, f := range files {
		broken, err := docscheck.CheckLinks(root, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range broken {
			t.Error(b)
		}
	}
}

// TestCheckLinksFindsBrokenOnes runs the link check on a small tree of its own, so that the
// check itself is seen to refuse what it must.
func TestCheckLinksFindsBrokenOnes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# A\n\n## The `serve` command\n")
	write("README.md", strings.Join([]string{
		"[ok](docs/a.md) [ok](docs/a.md#the-serve-command) [ok](https://example.com/x) [ok](#here)",
		"[gone](docs/b.md) [no heading](docs/a.md#nope) [out](../elsewhere.md) [abs](/etc/passwd)",
		"`[in code](docs/none.md)`",
		"```", "[in a block](docs/none.md)", "```",
		"# Here",
	}, "\n"))
	broken, err := docscheck.CheckLinks(dir, "README.md")
	if err != nil {
		t.Fatal(err)
	}
	var targets []string
	for _, b := range broken {
		var le *docscheck.BrokenLinkError
		if !errors.As(b, &le) {
			t.Fatalf("%v is not a BrokenLinkError", b)
		}
		targets = append(targets, le.Target)
	}
	if got, want := strings.Join(targets, " "), "docs/b.md docs/a.md#nope ../elsewhere.md /etc/passwd"; got != want {
		t.Errorf("broken links %q, want %q", got, want)
	}
}

// TestGuaranteesCiteRealTests fails when docs/guarantees.md cites a test file that does not
// exist or a test function not defined in the package the text names.
func TestGuaranteesCiteRealTests(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile(filepath.Join(root, "docs", "guarantees.md"))
	if err != nil {
		t.Fatal(err)
	}
	cites := docscheck.Citations(root, string(text))
	if len(cites) < 100 {
		t.Fatalf("read only %d citations from docs/guarantees.md: the parser lost them", len(cites))
	}
	funcs, err := docscheck.TestFuncs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range docscheck.CheckCitations(root, cites, funcs) {
		t.Error(e)
	}
}

// TestCheckCitationsFindsMissingOnes checks the citation check on a text of its own.
func TestCheckCitationsFindsMissingOnes(t *testing.T) {
	t.Parallel()
	funcs := map[string]map[string]bool{
		"jobs":     {"TestRetryProof": true, "TestFrontDoorA": true},
		"handlers": {"TestOther": true},
	}
	text := "- Retries: `jobs/retry_test.go` `TestRetryProof`, `TestOther`.\n" +
		"- Anywhere: `TestOther`, `TestFrontDoor*`, `TestNowhere`.\n" +
		"- Gone: `jobs/gone_test.go` `TestRetryProof`.\n"
	cites := docscheck.Citations(root, text)
	var got []string
	for _, e := range docscheck.CheckCitations(root, cites, funcs) {
		var me *docscheck.MissingTestError
		if !errors.As(e, &me) {
			t.Fatalf("%v is not a MissingTestError", e)
		}
		got = append(got, me.Citation.Name+"@"+me.Citation.Dir)
	}
	if g, want := strings.Join(got, " "), "TestOther@jobs TestNowhere@ TestRetryProof@jobs"; g != want {
		t.Errorf("missing %q, want %q", g, want)
	}
}
