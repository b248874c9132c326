package handlers

import (
	"context"
	"sort"
	"strconv"
	"time"

	"asterion/jobs"
	"asterion/jobs/usage"
	"asterion/views"
)

// flowWindow is how far back the tokens-per-minute chart reaches.
const flowWindow = time.Hour

// loadFlow gathers the flow-control part of the health page as v may see it: every model's
// limits and pauses (the provider account is every org's), the orgs v sees, and tokens per
// minute per model of the attempts v sees. The account's counts of calls and 429s are every
// org's traffic, so only an admin sees them.
func (s *Server) loadFlow(ctx context.Context, v jobs.Viewer, now time.Time) (views.HealthFlow, error) {
	f := views.HealthFlow{CanPauseModels: v.AllOrgs, AccountCounts: v.AllOrgs, UsedScope: "your org"}
	if v.AllOrgs {
		f.UsedScope = "every org"
	}
	fc := s.deps.Flow
	if fc == nil {
		return f, nil
	}
	minute := now.UTC().Truncate(time.Minute)
	since := minute.Add(-flowWindow + time.Minute)
	perMinute, err := fc.PerMinute(ctx, v, since)
	if err != nil {
		return f, err
	}
	f.Tokens = tokenChartOf(perMinute, since, int(flowWindow/time.Minute))
	used := map[string][2]int64{}
	for _, u := range perMinute {
		sum := used[u.Model]
		used[u.Model] = [2]int64{sum[0] + u.RecentCalls, sum[1] + u.RecentTokens}
	}
	states, err := fc.Models(ctx)
	if err != nil {
		return f, err
	}
	for _, st := range states {
		m := views.ModelFlow{Model: st.Model, RPM: st.RPM, TPM: st.TPM, RPMSource: st.RPMSource, TPMSource: st.TPMSource,
			UsedCalls: used[st.Model][0], UsedTokens: used[st.Model][1], OperatorPaused: st.OperatorPaused,
			PausedRole: st.PausedRole, PausedActor: st.PausedActor}
		if f.AccountCounts {
			m.Calls, m.Limited = st.Calls, st.Limited
		}
		if st.ProviderPaused() {
			t := st.PausedUntil.UTC()
			m.PausedUntil = &t
		}
		f.Models = append(f.Models, m)
	}
	orgs, err := fc.Orgs(ctx, v)
	if err != nil {
		return f, err
	}
	var activeWeight int
	for _, o := range orgs {
		if o.Running+o.Queued > 0 {
			activeWeight += o.Weight
		}
	}
	for _, o := range orgs {
		row := views.OrgFlow{ID: o.OrgID, Org: o.Org, Running: o.Running, Queued: o.Queued, Weight: o.Weight,
			Paused: o.Paused, PausedRole: o.PausedRole, PausedActor: o.PausedActor, PauseHeld: o.Held, BudgetTokens: o.Budget.Tokens, BudgetPeriod: string(o.Budget.Period), Used: o.Used,
			Resets: o.Resets}
		// Only an admin sees the other orgs' weights that a share is taken of.
		if v.AllOrgs && activeWeight > 0 && o.Running+o.Queued > 0 {
			row.Share = strconv.FormatFloat(100*float64(o.Weight)/float64(activeWeight), 'f', 0, 64) + " %"
		}
		f.Orgs = append(f.Orgs, row)
	}
	return f, nil
}

// tokenChartOf lays per-minute usage onto n minutes from since, one series per model (the
// busiest first), zero where a model used nothing.
func tokenChartOf(rows []usage.MinuteUsage, since time.Time, n int) views.TokenChart {
	tc := views.TokenChart{Minutes: make([]time.Time, n)}
	for i := range tc.Minutes {
		tc.Minutes[i] = since.Add(time.Duration(i) * time.Minute)
	}
	byModel := map[string][]int64{}
	totals := map[string]int64{}
	for _, r := range rows {
		i := int(r.At.Sub(since) / time.Minute)
		if i < 0 || i >= n {
			continue
		}
		s, ok := byModel[r.Model]
		if !ok {
			s = make([]int64, n)
			byModel[r.Model] = s
		}
		s[i] += r.Tokens
		totals[r.Model] += r.Tokens
	}
	for m, s := range byModel {
		tc.Series = append(tc.Series, views.TokenSeries{Model: m, Tokens: s})
	}
	sort.Slice(tc.Series, func(i, j int) bool {
		a, b := tc.Series[i].Model, tc.Series[j].Model
		if totals[a] != totals[b] {
			return totals[a] > totals[b]
		}
		return a < b
	})
	return tc
}
