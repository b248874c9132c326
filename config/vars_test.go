package config_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"asterion/config"
)

// TestConfigurationDocIsGenerated fails when docs/configuration.md is not what the table
// renders: the document is generated, so a change to the table must regenerate it.
func TestConfigurationDocIsGenerated(t *testing.T) {
	t.Parallel()
	got, err := os.ReadFile("../docs/configuration.md")
	if err != nil {
		t.Fatalf("read the generated document: %v", err)
	}
	if want := config.Markdown(); string(got) != want {
		t.Errorf("docs/configuration.md differs from what config/vars.go renders; run `make docs`\n%s", firstDifference(string(got), want))
	}
}

// firstDifference names the first line where two texts differ.
func firstDifference(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(g) || i < len(w); i++ {
		var gl, wl string
		if i < len(g) {
			gl = g[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if gl != wl {
			return "line " + strconv.Itoa(i+1) + ":\n  file:  " + gl + "\n  table: " + wl
		}
	}
	return ""
}

var asterionVar = regexp.MustCompile(`\bASTERION_[A-Z][A-Z0-9_]*[A-Z0-9]\b`)

// varsInCode returns every ASTERION_ variable named in the module's non-test Go files, with
// one file that names it.
func varsInCode(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".data", "bin", "testdata":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, name := range asterionVar.FindAllString(string(b), -1) {
			if _, ok := found[name]; !ok {
				found[name] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the source tree: %v", err)
	}
	return found
}

// TestEveryVariableIsInTheTable fails when non-test code names an ASTERION_ variable the
// table lacks, or the table lists an ASTERION_ variable no code reads any more.
func TestEveryVariableIsInTheTable(t *testing.T) {
	t.Parallel()
	inCode := varsInCode(t)
	if len(inCode) < 20 {
		t.Fatalf("found only %d ASTERION_ variables in the source tree: the walk is looking in the wrong place", len(inCode))
	}
	var missing []string
	for name, path := range inCode {
		if _, ok := config.Lookup(name); !ok {
			missing = append(missing, name+" (named in "+path+")")
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s is not in config/vars.go: add it to the table and run `make docs`", m)
	}
	for _, g := range config.Groups {
		for _, v := range g.Vars {
			if strings.HasPrefix(v.Name, "ASTERION_") && inCode[v.Name] == "" {
				t.Errorf("%s is in config/vars.go but no non-test code names it: remove it", v.Name)
			}
		}
	}
}

// TestTableIsWellFormed checks that every variable appears once with a default and a meaning.
func TestTableIsWellFormed(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for _, g := range config.Groups {
		if g.Title == "" || len(g.Vars) == 0 {
			t.Errorf("group %q: want a title and at least one variable", g.Title)
		}
		for _, v := range g.Vars {
			if seen[v.Name] {
				t.Errorf("%s appears twice", v.Name)
			}
			seen[v.Name] = true
			if v.Default == "" || v.Meaning == "" {
				t.Errorf("%s: want a default and a meaning", v.Name)
			}
			if strings.Contains(v.Default+v.Meaning, "\n") {
				t.Errorf("%s: a newline would break the table row", v.Name)
			}
		}
	}
}

// TestTextListsEveryVariable checks that `asterion help env` output names every variable.
func TestTextListsEveryVariable(t *testing.T) {
	t.Parallel()
	text := config.Text()
	for _, g := range config.Groups {
		for _, v := range g.Vars {
			if !strings.Contains(text, "\n  "+v.Name+"\n") {
				t.Errorf("help env text lacks %s", v.Name)
			}
		}
	}
	for _, line := range strings.Split(text, "\n") {
		if len(line) > 120 {
			t.Errorf("line longer than 120 columns: %q", line)
		}
	}
}
