package main

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var updateReport = flag.Bool("update-report", false, "rewrite BENCHMARKS.md from bench.json")

// benchFlags is a flag set shaped like the command's, for the report's rule.
func benchFlags() *flag.FlagSet {
	fs := flag.NewFlagSet("asterion-bench", flag.ContinueOnError)
	fs.String("bin", "bin/asterion", "")
	fs.String("out", "BENCHMARKS.md", "")
	fs.String("db-prefix", "asterion_bench", "")
	fs.String("sides", allSides, "")
	fs.String("phases", allPhases, "")
	fs.Bool("no-worker", false, "")
	fs.Duration("closed", 10*time.Second, "")
	fs.Float64("load-scale", 1, "")
	return fs
}

// TestNarrowedRunKeepsTheReport checks the report's rule: a run with fewer sides or phases,
// shorter phases or a smaller scale leaves BENCHMARKS.md and bench.json as they were, and a
// full run (only the paths changed) writes both.
func TestNarrowedRunKeepsTheReport(t *testing.T) {
	t.Parallel()
	rep := report{Machine: "test machine", StartedAt: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)}
	for _, args := range [][]string{
		{"-phases", "open"},
		{"-sides", "asterion"},
		{"-phases", "closed50,closed200,open,pickup,e2e"},
		{"-no-worker", "-phases", "open"},
		{"-closed", "1s"},
		{"-load-scale", "0.2"},
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, "BENCHMARKS.md")
		if err := os.WriteFile(path, []byte("the last full run\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		fs := benchFlags()
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if err := rep.writeIfFull(path, fs); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if b, _ := os.ReadFile(path); string(b) != "the last full run\n" {
			t.Errorf("%v: a narrowed run rewrote BENCHMARKS.md", args)
		}
		if _, err := os.Stat(filepath.Join(dir, "bench.json")); err == nil {
			t.Errorf("%v: a narrowed run wrote bench.json", args)
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "BENCHMARKS.md")
	fs := benchFlags()
	if err := fs.Parse([]string{"-bin", "/tmp/asterion", "-out", path, "-db-prefix", "other", "-phases", allPhases}); err != nil {
		t.Fatal(err)
	}
	if err := rep.writeIfFull(path, fs); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != rep.render() {
		t.Errorf("a full run did not write its report (%v)", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "bench.json")); err != nil {
		t.Errorf("a full run did not write bench.json: %v", err)
	}
}

// TestCommittedReportIsTheLastRun checks that BENCHMARKS.md is exactly what the report
// renders from bench.json, the figures of the last full run: nothing hand-written sits in it
// (investigations live in docs/perf/). -update-report rewrites it from bench.json.
func TestCommittedReportIsTheLastRun(t *testing.T) {
	t.Parallel()
	js, err := os.ReadFile("../../bench.json")
	if err != nil {
		t.Fatalf("read bench.json: %v", err)
	}
	var rep report
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatalf("decode bench.json: %v", err)
	}
	want := rep.render()
	if *updateReport {
		if err := os.WriteFile("../../BENCHMARKS.md", []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile("../../BENCHMARKS.md")
	if err != nil {
		t.Fatalf("read BENCHMARKS.md: %v", err)
	}
	if string(got) != want {
		g, w := strings.Split(string(got), "\n"), strings.Split(want, "\n")
		for i := range max(len(g), len(w)) {
			if i >= len(g) || i >= len(w) || g[i] != w[i] {
				t.Fatalf("BENCHMARKS.md differs from what bench.json renders at line %d (go test ./cmd/asterion-bench -run TestCommittedReportIsTheLastRun -update-report rewrites it)", i+1)
			}
		}
	}
}
