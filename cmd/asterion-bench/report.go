package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// side is one target's figures.
type side struct {
	Closed50  result       `json:"closed_50_clients"`
	Closed200 result       `json:"closed_200_clients"`
	Open      result       `json:"open_loop"`
	Pickup    pickupResult `json:"pickup"`
	E2E       e2eResult    `json:"end_to_end"`
	// The Asterion-only phases; nil on the baseline side and when not run.
	Streams    *streamsResult    `json:"streams,omitempty"`
	Dashboards *dashboardsResult `json:"dashboards,omitempty"`
	Pages      *pagesResult      `json:"pages,omitempty"`
	Growth     *growthResult     `json:"growth,omitempty"`
	Mission    *missionResult    `json:"mission,omitempty"`
	Chunks     *chunksResult     `json:"chunks,omitempty"`
	Inflight   *inflightResult   `json:"inflight,omitempty"`
	Governed   *governedResult   `json:"governed,omitempty"`
	Fairness   *fairnessResult   `json:"fairness,omitempty"`
	FrontDoor  *frontDoorResult  `json:"frontdoor,omitempty"`
	Batch      *batchResult      `json:"batch,omitempty"`
	// DBCost is what the end-to-end phase's jobs cost the database, per job.
	DBCost *dbCostResult `json:"db_cost,omitempty"`
	// Floor is what a job's records cost the database with nothing else written.
	Floor *floorResult `json:"floor,omitempty"`
}

type report struct {
	Machine   string    `json:"machine"`
	StartedAt time.Time `json:"started_at"`
	Asterion  side      `json:"asterion"`
	Baseline  side      `json:"baseline"`
	// Database says which PostgreSQL the figures were measured against.
	Database string `json:"database"`
	// Budget is the daily token budget of the Asterion side's org (0: none).
	Budget int64 `json:"budget,omitempty"`
}

func ratio(a, b float64) string {
	if b == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2f×", a/b)
}

// shapingFlagsChanged names the flags of fs, set off their defaults, that change what a run
// measures: every flag but where the binaries, the databases and the report are. A run with
// any of them (fewer sides or phases, shorter phases, other sizes, -no-worker, a budget) is
// an investigation, not the suite, and must never replace BENCHMARKS.md.
func shapingFlagsChanged(fs *flag.FlagSet) []string {
	var changed []string
	fs.VisitAll(func(f *flag.Flag) {
		switch f.Name {
		case "bin", "admin-url", "out", "db-prefix":
			return
		}
		if f.Value.String() != f.DefValue {
			changed = append(changed, "-"+f.Name+"="+f.Value.String())
		}
	})
	return changed
}

// write writes the report to path and bench.json beside it, but only for a full run (every
// shaping flag of the command line at its default); a narrowed run prints its rows instead.
func (r report) write(path string) error { return r.writeIfFull(path, flag.CommandLine) }

// writeIfFull is write with the command line's flags given.
func (r report) writeIfFull(path string, fs *flag.FlagSet) error {
	if changed := shapingFlagsChanged(fs); len(changed) > 0 {
		fmt.Fprintf(os.Stderr, "a narrowed run (%s) writes no report; its figures:\n", strings.Join(changed, " "))
		printOnlyRows(r.Asterion)
		return nil
	}
	text := r.render()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		return err
	}
	js, _ := json.MarshalIndent(r, "", "  ")
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "bench.json"), append(js, '\n'), 0o644); err != nil {
		return err
	}
	fmt.Print(text)
	return nil
}

// render is BENCHMARKS.md for the run r: the same bytes from the same figures, so the
// committed file can be checked against the committed bench.json.
func (r report) render() string {
	a, b := r.Asterion, r.Baseline
	var sb strings.Builder
	fmt.Fprintf(&sb, "# Benchmarks\n\nProduced by `make bench` (`go run ./cmd/asterion-bench`) on %s, %s.\n", r.Machine, r.StartedAt.Format(time.RFC3339))
	sb.WriteString("The real `asterion serve` (sim provider at 0 latency, 10 workers) and a bare-River baseline (one transaction: prompt row, job row, River job on riverpgxv5; no-op workers) run as separate processes on the same PostgreSQL; the load generator is a third process on the same 2-core machine. Absolute numbers drift on a shared machine; the ratios are the figures to compare. Rows without a baseline come from the Asterion-only phases (live streams, dashboards, a standing backlog, pages as the database grows), whose load generator shares the same two cores.\n\n")
	if r.Budget > 0 {
		fmt.Fprintf(&sb, "Every feature is on: the Asterion side's org has a daily token budget of %d, never reached, so every submit and every start reserves against it.\n\n", r.Budget)
	}
	sb.WriteString("| figure | asterion | baseline | ratio | target | how measured |\n|---|---|---|---|---|---|\n")
	row := func(fig, av, bv, rt, target, how string) {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s |\n", fig, av, bv, rt, target, how)
	}
	row("submit throughput, 50 clients", fmt.Sprintf("%.0f/s", a.Closed50.Throughput), fmt.Sprintf("%.0f/s", b.Closed50.Throughput),
		ratio(a.Closed50.Throughput, b.Closed50.Throughput), "≥ 0.7×", fmt.Sprintf("closed loop, %.0f s", a.Closed50.Seconds))
	row("submit throughput, 200 clients", fmt.Sprintf("%.0f/s", a.Closed200.Throughput), fmt.Sprintf("%.0f/s", b.Closed200.Throughput),
		ratio(a.Closed200.Throughput, b.Closed200.Throughput), "≥ 0.7×", fmt.Sprintf("closed loop, %.0f s", a.Closed200.Seconds))
	row("submit p50 at fixed rate", fmt.Sprintf("%.1f ms", a.Open.P50ms), fmt.Sprintf("%.1f ms", b.Open.P50ms), ratio(a.Open.P50ms, b.Open.P50ms), "", fmt.Sprintf("open loop, %d requests", a.Open.Requests))
	row("submit p99 at fixed rate", fmt.Sprintf("%.1f ms", a.Open.P99ms), fmt.Sprintf("%.1f ms", b.Open.P99ms), ratio(a.Open.P99ms, b.Open.P99ms),
		"≤ 1.5× and < 50 ms", fmt.Sprintf("open loop %.0f/s offered for %.0f s, latency from the scheduled send time", float64(a.Open.Requests)/a.Open.Seconds, a.Open.Seconds))
	row("submit errors at fixed rate", fmt.Sprint(a.Open.Errors), fmt.Sprint(b.Open.Errors), "", "0", "non-202 answers in the open loop")
	row("pickup queued → running p50", fmt.Sprintf("%.1f ms", a.Pickup.P50ms), fmt.Sprintf("%.1f ms", b.Pickup.P50ms), ratio(a.Pickup.P50ms, b.Pickup.P50ms),
		"≤ 20 ms", fmt.Sprintf("%d prompts 30 ms apart to idle workers; claimed_at − created_at (baseline: attempted_at − created_at)", a.Pickup.Jobs))
	row("pickup queued → running p95", fmt.Sprintf("%.1f ms", a.Pickup.P95ms), fmt.Sprintf("%.1f ms", b.Pickup.P95ms), ratio(a.Pickup.P95ms, b.Pickup.P95ms), "", "same")
	row("end-to-end jobs/s", fmt.Sprintf("%.0f/s", a.E2E.JobsPerSec), fmt.Sprintf("%.0f/s", b.E2E.JobsPerSec), ratio(a.E2E.JobsPerSec, b.E2E.JobsPerSec),
		"the ratio", fmt.Sprintf("%d jobs submitted by 50 clients until all finished, sim latency 0", a.E2E.Jobs))
	asterionRows(a, row)
	costRows(r.Database, a, b, row)
	return sb.String()
}

// printOnlyRows prints the report rows of the Asterion-only phases a narrowed run measured,
// which writes no report, so that its figures can be read in the report's own words.
func printOnlyRows(a side) {
	var sb strings.Builder
	asterionRows(a, func(fig, av, _, _, target, how string) {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s |\n", fig, av, target, how)
	})
	if sb.Len() > 0 {
		fmt.Print("| figure | asterion | target | how measured |\n|---|---|---|---|\n" + sb.String())
	}
}
