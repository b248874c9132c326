package main

import (
	"fmt"
	"strings"
)

// The report rows of the Asterion-only phases: no baseline, so the baseline and ratio cells
// stay empty.

// sizeLabel writes a count the short way: 1000 → 1k, 1000000 → 1M.
func sizeLabel(n int) string {
	switch {
	case n >= 1000000 && n%1000000 == 0:
		return fmt.Sprintf("%dM", n/1000000)
	case n >= 1000 && n%1000 == 0:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// joinEach formats f(i) for i < n, joined by " / ".
func joinEach(n int, f func(i int) string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = f(i)
	}
	return strings.Join(parts, " / ")
}

// asterionRows writes the rows of every Asterion-only phase that ran.
func asterionRows(a side, row func(fig, av, bv, rt, target, how string)) {
	only := func(fig, av, target, how string) { row(fig, av, "", "", target, how) }
	if s := a.Streams; s != nil {
		o, b := s.Open, s.Big
		only(fmt.Sprintf("SSE delivery p50, %d mission streams", s.Streams), fmt.Sprintf("%.1f ms", o.Delivery.P50ms), "",
			fmt.Sprintf("%d prompts 100 ms apart, submitted by the streams' own user; every job.state_changed (queued, running, succeeded) of them on every stream: receive time − the event's `updated_at` (the start of the transaction that made the change; server and load generator share one clock), %d (stream, event) pairs", o.Prompts, o.Delivery.N))
		only(fmt.Sprintf("SSE delivery p99, %d mission streams", s.Streams), fmt.Sprintf("%.1f ms", o.Delivery.P99ms), "≤ 50 ms",
			fmt.Sprintf("same; %d missed; the first stream to get an event got it after %.1f ms (p50) / %.1f ms (p99), the last %.1f ms (p99) after the first; CPU during the round: server %.1f s, load generator %.1f s",
				o.Missed, o.First.P50ms, o.First.P99ms, o.Spread.P99ms, o.ServerCPUms/1000, o.BenchCPUms/1000))
		only(fmt.Sprintf("SSE delivery p99, %d mission streams", s.StreamsBig), fmt.Sprintf("%.1f ms", b.Delivery.P99ms), "",
			fmt.Sprintf("the same round with %d streams open: p50 %.1f ms, %d pairs, %d missed", s.StreamsBig, b.Delivery.P50ms, b.Delivery.N, b.Missed))
		only(fmt.Sprintf("server RSS with %s streams", sizeLabel(s.StreamsBig)), fmt.Sprintf("%.0f MiB", float64(s.RSSBigKiB)/1024), "",
			fmt.Sprintf("VmRSS of the `asterion serve` process (/proc/<pid>/status): %.0f MiB before any stream was opened, %.0f MiB with %d open after a round of events", float64(s.RSSBeforeKiB)/1024, float64(s.RSSBigKiB)/1024, s.StreamsBig))
		only("server memory per open stream", fmt.Sprintf("%.0f KiB", s.PerStreamKiB), "",
			fmt.Sprintf("(RSS with %d streams − RSS before) / %d", s.StreamsBig, s.StreamsBig))
	}
	if d := a.Dashboards; d != nil {
		only(fmt.Sprintf("dashboard update p99, %d dashboards", d.Dashboards), fmt.Sprintf("%.1f ms", d.Delivery.P99ms), "≤ 100 ms",
			fmt.Sprintf("%d `/admin/deferred-operations/events` streams of an admin signed in through the login form (session cookie); %d prompts 250 ms apart; every changed row (pending, running, completed) on every stream: receive time − the `at` of that status in the operation's history (the changing transaction's start); %d pairs, p50 %.1f ms, %d missed; the first dashboard to get a change got it after %.1f ms (p50) / %.1f ms (p99), the last %.1f ms (p99) after the first",
				d.Dashboards, d.Prompts, d.Delivery.N, d.Delivery.P50ms, d.Missed, d.First.P50ms, d.First.P99ms, d.Spread.P99ms))
	}
	if p := a.Pages; p != nil && len(p.Sizes) > 0 {
		sizes := joinEach(len(p.Sizes), func(i int) string { return sizeLabel(p.Sizes[i].Seeded) })
		last := p.Sizes[len(p.Sizes)-1]
		only(fmt.Sprintf("seeding to %s rows", sizeLabel(last.Seeded)), fmt.Sprintf("%.0f s", last.SeedSeconds), "< 2 min",
			fmt.Sprintf("the last step (%s → %s finished prompts, each with its job, operation and two history entries) into the running server's database: one INSERT … SELECT generate_series per table, the four at once, triggers off (counters written in bulk), asynchronous commit, then counter compaction; steps took %s s, each followed by VACUUM (ANALYZE) (%s s)",
				sizeLabel(p.Sizes[max(len(p.Sizes)-2, 0)].Seeded), sizeLabel(last.Seeded),
				joinEach(len(p.Sizes), func(i int) string { return fmt.Sprintf("%.0f", p.Sizes[i].SeedSeconds) }),
				joinEach(len(p.Sizes), func(i int) string { return fmt.Sprintf("%.0f", p.Sizes[i].VacuumSeconds) })))
		for k, pt := range last.Pages {
			at := func(i int) pageTiming {
				if k < len(p.Sizes[i].Pages) {
					return p.Sizes[i].Pages[k]
				}
				return pageTiming{}
			}
			errs := 0
			for i := range p.Sizes {
				errs += at(i).Errors
			}
			how := fmt.Sprintf("`%s`; %s requests in a row per size; p50 %s ms", pt.Example,
				joinEach(len(p.Sizes), func(i int) string { return fmt.Sprint(at(i).N) }),
				joinEach(len(p.Sizes), func(i int) string { return fmt.Sprintf("%.1f", at(i).P50ms) }))
			if errs > 0 {
				how += fmt.Sprintf("; %d answers not 200", errs)
			}
			if pt.Capped {
				how += fmt.Sprintf(" (stopped after %.0f s at the largest size)", pageTimeCap.Seconds())
			}
			if k == 0 {
				how += fmt.Sprintf("; sizes are seeded finished prompts (90 %% succeeded, 6 %% failed, 4 %% cancelled; every twentieth in a small org), plus %d in an old org whose rows are all older than the rest; %s jobs in all at the largest; time from request to last byte on a keep-alive loopback connection; admin by session cookie, operator by API token", benchOldRows, sizeLabel(int(last.Jobs/1000)*1000))
			}
			only(fmt.Sprintf("%s p95 at %s rows", pt.Name, sizes),
				joinEach(len(p.Sizes), func(i int) string { return fmt.Sprintf("%.1f", at(i).P95ms) })+" ms", "≤ 50 ms at 1M", how)
		}
	}
	if m := a.Mission; m != nil {
		missionRows(m, only)
	}
	if c := a.Chunks; c != nil {
		chunksRows(c, only)
	}
	if f := a.Inflight; f != nil {
		inflightRows(f, only)
	}
	if g := a.Governed; g != nil {
		governedRows(g, only)
	}
	if f := a.FrontDoor; f != nil {
		frontDoorRows(f, only)
	}
	if b := a.Batch; b != nil {
		batchRows(b, only)
	}
	if f := a.Fairness; f != nil {
		fairnessRows(f, only)
	}
	if g := a.Growth; g != nil && len(g.Steps) > 0 {
		n := len(g.Steps)
		sizes := joinEach(n, func(i int) string { return sizeLabel(g.Steps[i].Size) })
		only(fmt.Sprintf("submit p99 with %s queued", sizes), joinEach(n, func(i int) string { return fmt.Sprintf("%.1f", g.Steps[i].Submit.P99ms) })+" ms",
			"flat as the backlog grows",
			fmt.Sprintf("a second `asterion serve --no-worker` on a database of its own, so no worker drains the backlog; backlog (%s at the start) seeded as real River vehicles (River's InsertManyFast, as Submit enqueues) with their prompts, queued jobs, pending operations and history; closed loop of 50 clients for %.0f s per size; p50 %s ms; the loop's own submits join the backlog (%s after)",
				joinEach(n, func(i int) string { return fmt.Sprint(g.Steps[i].Backlog) }), g.Steps[0].Submit.Seconds,
				joinEach(n, func(i int) string { return fmt.Sprintf("%.1f", g.Steps[i].Submit.P50ms) }),
				joinEach(n, func(i int) string { return fmt.Sprint(g.Steps[i].BacklogAfterSubmit) })))
		only(fmt.Sprintf("submit throughput with %s queued", sizes), joinEach(n, func(i int) string { return fmt.Sprintf("%.0f", g.Steps[i].Submit.Throughput) })+"/s",
			"flat as the backlog grows", "same closed loops")
		only(fmt.Sprintf("worker jobs/s with %s queued", sizes), joinEach(n, func(i int) string { return fmt.Sprintf("%.0f", g.Steps[i].DrainPerSec) })+"/s",
			"flat as the backlog grows",
			fmt.Sprintf("then one `asterion run-worker` process (10 workers, sim latency 0) on that database: jobs finished in %.0f s, from one second after its first finished job; backlog left %s",
				g.Steps[0].DrainSeconds, joinEach(n, func(i int) string { return fmt.Sprint(g.Steps[i].BacklogAfterDrain) })))
		if drainCosts(g) {
			only(fmt.Sprintf("statement time per drained job with %s queued", sizes),
				joinEach(n, func(i int) string { return fmt.Sprintf("%.2f", g.Steps[i].DrainCost.Life.Ms) })+" ms",
				"flat as the backlog grows",
				fmt.Sprintf("pg_stat_statements over the same window, every statement but the bench's own probes, divided by the jobs finished; %s statements a job",
					joinEach(n, func(i int) string { return fmt.Sprintf("%.1f", g.Steps[i].DrainCost.Life.Statements) })))
		}
	}
}

// drainCosts says whether every step of the growth phase measured its statements.
func drainCosts(g *growthResult) bool {
	for _, st := range g.Steps {
		if st.DrainCost == nil {
			return false
		}
	}
	return true
}
