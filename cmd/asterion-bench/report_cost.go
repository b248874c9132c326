package main

import (
	"fmt"
	"regexp"
	"strings"
)

// The report rows of what a job costs the database, beside the baseline's.

// stepRule puts the statements whose text matches re in a step of a job's life.
type stepRule struct {
	step string
	re   *regexp.Regexp
}

// classifyBy returns the step of the first rule a statement matches, "other" when none does.
func classifyBy(rules []stepRule) func(string) string {
	return func(q string) string {
		for _, r := range rules {
			if r.re.MatchString(q) {
				return r.step
			}
		}
		return "other"
	}
}

// asterionStep and baselineStep say which step of a job's life (submit, claim, finish) a
// statement of each side belongs to.
var (
	asterionStep = classifyBy(asterionRules)
	baselineStep = classifyBy(baselineRules)
)

// asterionRules tell Asterion's statements apart by the tables and clauses that mark each
// step: the submit's batch writes the job row and its River vehicle, the claim moves the job to
// running (and its operation, with the claim's relaxed commit), and the finish writes the
// response, the usage and the operation's terminal audit. The event sequencer, River's
// maintenance and the servers' periodic reads fall in "other".
var asterionRules = []stepRule{
	{"finish", regexp.MustCompile(`INSERT INTO sa_ledger|INSERT INTO sa_attempt|INSERT INTO sa_audit|JobSetStateIfRunningMany|INSERT INTO sa_job_output|AS v\(job_id uuid, attempt smallint, seq`)},
	{"claim", regexp.MustCompile(`JobGetAvailable|asterion_governor_reserve|SELECT operator_paused, .* FROM sa_governor WHERE model|WITH RECURSIVE x AS MATERIALIZED|claimed_at = now\(\)|asterion_budget_start_hold|asterion_budget_start_giveback|^WITH b0 AS \(UPDATE sa_operation .* SELECT set_config\(|FROM sa_budget_running AS r|FROM sa_job_count WHERE org_id`)},
	{"submit", regexp.MustCompile(`INSERT INTO sa_job \(|JobInsertFastMany|FROM api_tokens|UPDATE api_tokens|sa_idempotency \(|UPDATE sa_org_budget|FROM sa_org_budget AS b|asterion_budget_hold|asterion_budget_take`)},
}

// baselineRules are the bare-River side's: its one submit transaction, River's fetch and its
// completer.
var baselineRules = []stepRule{
	{"finish", regexp.MustCompile(`JobSetStateIfRunningMany`)},
	{"claim", regexp.MustCompile(`JobGetAvailable`)},
	{"submit", regexp.MustCompile(`INSERT INTO bench_|JobInsertFastMany`)},
}

// costSteps are the steps a report row shows, in a job's order.
var costSteps = []string{"submit", "claim", "finish", "other"}

// costRows writes the rows of the database's cost per job.
func costRows(database string, a, b side, row func(fig, av, bv, rt, target, how string)) {
	defer floorRows(database, a.Floor, row)
	ac, bc := a.DBCost, b.DBCost
	if ac == nil && bc == nil {
		return
	}
	get := func(c *dbCostResult, f func(*dbCostResult) float64) (string, float64) {
		if c == nil {
			return "", 0
		}
		v := f(c)
		return fmt.Sprintf("%.2f", v), v
	}
	pair := func(fig, unit, target, how string, f func(*dbCostResult) float64) {
		as, av := get(ac, f)
		bs, bv := get(bc, f)
		rt := ""
		if ac != nil && bc != nil {
			rt = ratio(av, bv)
		}
		if as != "" {
			as += unit
		}
		if bs != "" {
			bs += unit
		}
		row(fig, as, bs, rt, target, how)
	}
	jobs := 0
	if ac != nil {
		jobs = ac.Jobs
	}
	how := fmt.Sprintf("pg_stat_statements (top-level statements of the servers' roles) and pg_stat_user_tables, read before and after the end-to-end phase (%d jobs) on %s, divided by the jobs", jobs, database)
	pair("database statement time per job", " ms", "≤ 2.0 ms", how, func(c *dbCostResult) float64 { return c.Life.Ms })
	pair("database statements per job", "", "", "same; every statement of the phase, the servers' periodic work included", func(c *dbCostResult) float64 { return c.Life.Statements })
	for _, step := range costSteps {
		pair("statement time per job: "+step, " ms", "", stepHow(ac, step), func(c *dbCostResult) float64 { return c.Steps[step].Ms })
		pair("statements per job: "+step, "", "", "same", func(c *dbCostResult) float64 { return c.Steps[step].Statements })
	}
	pair("index entries written per job", "", "", "Σ over tables of (rows inserted + updates not HOT) × the table's indexes that are not partial; "+tablesHow(ac), func(c *dbCostResult) float64 { return c.IndexEntries })
	pair("index entries at most written per job into partial indexes", "", "", "the same rows × the partial indexes (each row whose new version matches the predicate writes one)", func(c *dbCostResult) float64 { return c.PartialEntries })
}

// floorRows writes the rows of the floor phase: what the records of a job cost the database
// when nothing but them is written, beside which the end-to-end phase's cost reads.
func floorRows(database string, f *floorResult, row func(fig, av, bv, rt, target, how string)) {
	if f == nil {
		return
	}
	left := ""
	if len(f.Without) > 0 {
		left = " (this run left out: " + strings.Join(f.Without, ", ") + ")"
	}
	how := fmt.Sprintf("the floor%s: the records every answered prompt leaves (prompt, operation and its three history entries, River job, job, three change-feed events numbered by the server's sequencer, output chunk, response, edge, ledger, attempt, audit), each step of the job's life one statement of its own implicit transaction with every value known, nothing else (no budget, governor, fair share, lock or read); %d jobs through %d connections in a fresh database of Asterion's schema on %s, measured as the end-to-end phase is", left, f.Jobs, f.Workers, database)
	row("floor: jobs/s of a job's records alone", fmt.Sprintf("%.0f/s", f.JobsPerSec), "", "", "", how)
	if f.Cost == nil {
		return
	}
	row("floor: statement time per job of a job's records alone", fmt.Sprintf("%.2f ms", f.Cost.Life.Ms), "", "", "",
		fmt.Sprintf("same; %.2f statements a job (submit %.2f ms, claim %.2f ms, finish %.2f ms, the sequencer and the rest %.2f ms)",
			f.Cost.Life.Statements, f.Cost.Steps["submit"].Ms, f.Cost.Steps["claim"].Ms, f.Cost.Steps["finish"].Ms, f.Cost.Steps["other"].Ms))
	row("floor: index entries written per job", fmt.Sprintf("%.2f", f.Cost.IndexEntries), "", "", "",
		fmt.Sprintf("same count as the end-to-end row; ≤ %.2f more into partial indexes", f.Cost.PartialEntries))
}

// stepHow lists the costliest statements of step, for the row's last column.
func stepHow(c *dbCostResult, step string) string {
	if c == nil {
		return ""
	}
	var parts []string
	for _, s := range c.Statements {
		if s.Step != step || len(parts) >= 6 || s.Ms < 0.005 {
			continue
		}
		parts = append(parts, fmt.Sprintf("`%s` %.2f× %.3f ms", mdCell(s.Query, 90), s.Calls, s.Ms))
	}
	if len(parts) == 0 {
		return "Asterion: none"
	}
	return "Asterion's costliest (calls per job, ms per job): " + strings.Join(parts, "; ")
}

// tablesHow lists the tables that took the most index entries.
func tablesHow(c *dbCostResult) string {
	if c == nil {
		return ""
	}
	var parts []string
	for i, t := range c.Tables {
		if i >= 8 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.1f + ≤ %.1f partial (%.1f rows)", t.Table, t.IndexEntries, t.PartialEntries, t.Rows))
	}
	return "Asterion per job: " + strings.Join(parts, ", ")
}

// mdCell shortens s to n runes and keeps it from breaking a table cell.
func mdCell(s string, n int) string {
	s = strings.ReplaceAll(s, "|", "\\|")
	s = strings.ReplaceAll(s, "`", "'")
	if r := []rune(s); len(r) > n {
		s = string(r[:n]) + "…"
	}
	return s
}

// printCostRows prints the cost rows of a narrowed run, which writes no report, and every
// statement of the Asterion side's phase.
func printCostRows(a, b side) {
	var sb strings.Builder
	costRows("the database of this run", a, b, func(fig, av, bv, rt, target, how string) {
		fmt.Fprintf(&sb, "| %s | %s | %s | %s | %s | %s |\n", fig, av, bv, rt, target, how)
	})
	if sb.Len() == 0 {
		return
	}
	fmt.Print("| figure | asterion | baseline | ratio | target | how measured |\n|---|---|---|---|---|---|\n" + sb.String())
	for _, s := range []struct {
		name string
		c    *dbCostResult
	}{{"asterion", a.DBCost}, {"baseline", b.DBCost}} {
		if s.c == nil {
			continue
		}
		fmt.Printf("\n%s statements per job (step, calls, ms, mean ms, text):\n", s.name)
		for _, st := range s.c.Statements {
			fmt.Printf("%-7s %6.3f %7.4f %7.4f %s\n", st.Step, st.Calls, st.Ms, st.MeanMs, st.Query)
		}
		fmt.Printf("%s tables per job (index entries, rows):\n", s.name)
		for _, t := range s.c.Tables {
			fmt.Printf("  %-28s %6.2f + ≤ %6.2f partial %6.2f rows\n", t.Table, t.IndexEntries, t.PartialEntries, t.Rows)
		}
	}
}
