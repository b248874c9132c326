// Package docscheck checks the repository's Markdown against the repository itself: that
// every relative link of README.md and docs/ leads to a file (and heading) that exists, and
// that every test docs/guarantees.md cites is defined where it says. Its tests run the checks
// on the real tree, so a renamed file or test fails `make test`.
package docscheck

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// link is a Markdown inline link: [text](target).
var link = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// fence is a fenced code block, whose text is not Markdown.
var fence = regexp.MustCompile("(?ms)^```.*?^```")

// inlineCode is a code span, whose text is not Markdown either.
var inlineCode = regexp.MustCompile("`[^`\n]*`")

// BrokenLinkError is a relative link that leads nowhere.
type BrokenLinkError struct {
	File, Target, Reason string
}

func (e *BrokenLinkError) Error() string {
	return fmt.Sprintf("%s: link %q: %s", e.File, e.Target, e.Reason)
}

// MarkdownFiles returns README.md and every .md file under docs/ of the repository at root,
// as paths relative to root.
func MarkdownFiles(root string) ([]string, error) {
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			files = append(files, rel)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list the docs: %w", err)
	}
	return files, nil
}

// prose is a Markdown text without its code blocks and code spans.
func prose(text string) string {
	return inlineCode.ReplaceAllString(fence.ReplaceAllString(text, ""), "")
}

// CheckLinks returns a BrokenLinkError for every relative link of file (relative to root)
// whose target is not a file or directory inside root, or whose #fragment names no heading of
// the Markdown file it points at. Links with a scheme (https:, mailto:) are not followed.
func CheckLinks(root, file string) ([]error, error) {
	b, err := os.ReadFile(filepath.Join(root, file))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", file, err)
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", root, err)
	}
	var broken []error
	for _, m := range link.FindAllStringSubmatch(prose(string(b)), -1) {
		target := m[1]
		if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
			continue
		}
		path, frag, _ := strings.Cut(target, "#")
		dest := filepath.Join(root, file)
		if path != "" {
			if strings.HasPrefix(path, "/") {
				broken = append(broken, &BrokenLinkError{file, target, "an absolute path; write it relative to the file"})
				continue
			}
			dest = filepath.Join(filepath.Dir(filepath.Join(root, file)), filepath.FromSlash(path))
		}
		absDest, err := filepath.Abs(dest)
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", dest, err)
		}
		if absDest != absRoot && !strings.HasPrefix(absDest, absRoot+string(filepath.Separator)) {
			broken = append(broken, &BrokenLinkError{file, target, "leads outside the repository"})
			continue
		}
		if _, err := os.Stat(dest); err != nil {
			broken = append(broken, &BrokenLinkError{file, target, "no such file in the repository"})
			continue
		}
		if frag == "" || !strings.HasSuffix(dest, ".md") {
			continue
		}
		anchors, err := headingAnchors(dest)
		if err != nil {
			return nil, err
		}
		if !anchors[frag] {
			broken = append(broken, &BrokenLinkError{file, target, "no heading with that anchor"})
		}
	}
	return broken, nil
}

var heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)

// headingAnchors returns the anchors GitHub gives the headings of a Markdown file.
func headingAnchors(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	anchors := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(string(b), ""), -1) {
		a := Anchor(m[1])
		if n := seen[a]; n > 0 {
			anchors[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors, nil
}

// Anchor is GitHub's anchor of a heading: lower case, code marks and punctuation dropped,
// spaces made hyphens.
func Anchor(title string) string {
	var sb strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			sb.WriteRune('-')
		case r == '-' || r == '_' || (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r > 127:
			sb.WriteRune(r)
		}
	}
	return sb.String()
}
