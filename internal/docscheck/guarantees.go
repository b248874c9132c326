package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// Citation is one test a document cites: the function (a trailing * cites every function with
// that prefix) and the package directory it is said to be in ("" when the text names none, and
// any package of the repository will do).
type Citation struct {
	Name, Dir string
	// File is the test file named beside it, if any.
	File string
}

// span is a code span of the document.
var span = regexp.MustCompile("`([^`\n]+)`")

var testName = regexp.MustCompile(`^(Test|Fuzz|Benchmark)[A-Za-z0-9_]*\*?$`)

// Citations reads the tests a Markdown text cites. Each bullet or paragraph is read in order:
// a code span that is a repository path (a _test.go file or a package directory that exists
// under root) sets the package of the test names that follow it in that bullet.
func Citations(root, text string) []Citation {
	var out []Citation
	for _, block := range blocks(text) {
		dir, file := "", ""
		for _, m := range span.FindAllStringSubmatch(block, -1) {
			s := m[1]
			switch {
			case testName.MatchString(s):
				out = append(out, Citation{Name: s, Dir: dir, File: file})
			case strings.HasSuffix(s, "_test.go"):
				dir, file = filepath.Dir(s), s
			case isPackageDir(root, s):
				dir, file = s, ""
			}
		}
	}
	return out
}

// blocks splits a Markdown text into its bullets and paragraphs.
func blocks(text string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") || strings.HasPrefix(line, "- ") {
			flush()
		}
		cur.WriteString(line + "\n")
	}
	flush()
	return out
}

// isPackageDir reports whether s names a directory of Go files under root.
func isPackageDir(root, s string) bool {
	if strings.ContainsAny(s, " .*=") {
		return false
	}
	matches, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(s), "*.go"))
	return len(matches) > 0
}

// MissingTestError is a cited test that is not defined where the document says.
type MissingTestError struct {
	Citation Citation
	Reason   string
}

func (e *MissingTestError) Error() string {
	where := "the repository"
	if e.Citation.Dir != "" {
		where = e.Citation.Dir
	}
	return fmt.Sprintf("%s (in %s): %s", e.Citation.Name, where, e.Reason)
}

var testFunc = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)[A-Za-z0-9_]*)\(`)

// TestFuncs maps each package directory under root (relative, slash-separated) to the test,
// fuzz and benchmark functions its _test.go files define, including those behind build tags.
func TestFuncs(root string) (map[string]map[string]bool, error) {
	funcs := map[string]map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "node_modules", ".data", "bin":
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if funcs[rel] == nil {
			funcs[rel] = map[string]bool{}
		}
		for _, m := range testFunc.FindAllStringSubmatch(string(b), -1) {
			funcs[rel][m[1]] = true
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the tests: %w", err)
	}
	return funcs, nil
}

// CheckCitations returns a MissingTestError for every citation whose file does not exist or
// whose function is not defined in its package (or, without one, anywhere).
func CheckCitations(root string, cites []Citation, funcs map[string]map[string]bool) []error {
	var errs []error
	for _, c := range cites {
		if c.File != "" {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(c.File))); err != nil {
				errs = append(errs, &MissingTestError{c, "the file " + c.File + " does not exist"})
				continue
			}
		}
		dirs := []string{c.Dir}
		if c.Dir == "" {
			dirs = dirs[:0]
			for d := range funcs {
				dirs = append(dirs, d)
			}
		}
		if !definedIn(c.Name, dirs, funcs) {
			errs = append(errs, &MissingTestError{c, "no such function"})
		}
	}
	return errs
}

func definedIn(name string, dirs []string, funcs map[string]map[string]bool) bool {
	prefix, wildcard := strings.CutSuffix(name, "*")
	for _, d := range dirs {
		for f := range funcs[d] {
			if f == name || (wildcard && strings.HasPrefix(f, prefix)) {
				return true
			}
		}
	}
	return false
}
