package views

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// ModelFlow is one model's provider governor on the health page.
type ModelFlow struct {
	Model string
	// RPM and TPM are the limits in force (zero: none); the sources say "configured",
	// "learned" or "none".
	RPM, TPM             int
	RPMSource, TPMSource string
	// UsedCalls and UsedTokens are what finished in the last 60 seconds, in the viewer's scope.
	UsedCalls, UsedTokens int64
	// PausedUntil is set while a provider's Retry-After (or an exhausted limit) holds calls.
	PausedUntil *time.Time
	// OperatorPaused means an operator paused every call to the model; PausedRole and
	// PausedActor say who ("" when not recorded).
	OperatorPaused          bool
	PausedRole, PausedActor string
	// Calls and Limited count every call slot granted and every 429, since the model was seen.
	Calls, Limited int64
}

// OrgFlow is one org's share of the queue on the health page.
type OrgFlow struct {
	ID              int64
	Org             string
	Running, Queued int64
	Weight          int
	// Share is the org's weight over the weights of the orgs with work, for admins ("" else).
	Share  string
	Paused bool
	// PausedRole and PausedActor say who paused it ("" when not recorded); PauseHeld means
	// the viewer may not lift it (a higher role set it).
	PausedRole, PausedActor string
	PauseHeld               bool
	// BudgetTokens is zero without a budget; Used is its use in the current BudgetPeriod,
	// which ends at Resets.
	BudgetTokens int64
	BudgetPeriod string
	Used         int64
	Resets       time.Time
}

// BudgetUse is the used share of the budget, as a percentage string.
func (o OrgFlow) BudgetUse() string { return percent(o.Used, o.BudgetTokens) }

// TokenChart is tokens per minute per model over the window, one slot per minute.
type TokenChart struct {
	Minutes []time.Time
	Series  []TokenSeries
}

// TokenSeries is one model's tokens in each minute of a TokenChart.
type TokenSeries struct {
	Model  string
	Tokens []int64
}

// tokenColors are the line colours of the models, as SVG presentation attributes (the CSP
// allows those; every colour reads on light and dark backgrounds).
var tokenColors = []string{"#0284c7", "#f59e0b", "#10b981", "#f43f5e", "#8b5cf6", "#64748b"}

// tokenLine is one model's line of the tokens chart.
type tokenLine struct {
	Model, Color, Points, Last string
	Total                      int64
}

// tokenGeometry is the computed tokens chart.
type tokenGeometry struct {
	Lines  []tokenLine
	YTicks []chartTick
	XTicks []chartTick
	Empty  bool
}

func tokenColor(i int) string { return tokenColors[i%len(tokenColors)] }

// tokensChart draws one line per model; a minute without calls is zero.
func tokensChart(tc TokenChart) tokenGeometry {
	pts := make([]SeriesPoint, len(tc.Minutes))
	for i, m := range tc.Minutes {
		pts[i].At = m
	}
	g := tokenGeometry{XTicks: chartXTicks(pts), Empty: true}
	var peak int64
	for _, s := range tc.Series {
		for _, n := range s.Tokens {
			peak = max(peak, n)
			if n > 0 {
				g.Empty = false
			}
		}
	}
	top := niceMax(float64(peak), 10)
	g.YTicks = yTicks(top, compactCount)
	n := len(tc.Minutes)
	if n == 0 {
		return g
	}
	step := (chartRight - chartLeft) / float64(n)
	h := chartBottom - chartTop
	for i, s := range tc.Series {
		var b strings.Builder
		l := tokenLine{Model: s.Model, Color: tokenColor(i)}
		for j, v := range s.Tokens {
			if j >= n {
				break
			}
			l.Total += v
			pt := fnum(chartLeft+step*(float64(j)+0.5)) + "," + fnum(chartBottom-float64(v)/top*h)
			if j == 0 {
				b.WriteString("M" + pt)
			} else {
				b.WriteString(" L" + pt)
			}
			l.Last = pt
		}
		l.Points = b.String()
		g.Lines = append(g.Lines, l)
	}
	return g
}

// compactCount writes 1200 as 1.2k and 3400000 as 3.4M.
func compactCount(f float64) string {
	switch a := math.Abs(f); {
	case a >= 1e6:
		return strconv.FormatFloat(math.Round(f/1e5)/10, 'f', -1, 64) + "M"
	case a >= 1e3:
		return strconv.FormatFloat(math.Round(f/1e2)/10, 'f', -1, 64) + "k"
	}
	return fnum(f)
}

// tokensSummary is the text alternative of the tokens chart.
func tokensSummary(tc TokenChart) string {
	if len(tc.Series) == 0 {
		return "No tokens were used in the last hour."
	}
	parts := make([]string, 0, len(tc.Series))
	for _, s := range tc.Series {
		var total, peak int64
		for _, v := range s.Tokens {
			total += v
			peak = max(peak, v)
		}
		parts = append(parts, s.Model+": "+i64toa(total)+" tokens, at most "+i64toa(peak)+" in one minute")
	}
	return "Tokens per minute over the last hour. " + strings.Join(parts, "; ") + "."
}

// pausedByText says who set a pause: the role and the actor's name as the audit trail has it.
func pausedByText(role, actor string) string {
	who := "an operator"
	if role == "admin" {
		who = "an admin"
	}
	if actor != "" {
		who += " (" + actor + ")"
	}
	return "paused by " + who
}

// limitText is a limit with where it comes from.
func limitText(n int, source string) string {
	if n <= 0 {
		return "none"
	}
	return strconv.Itoa(n) + " (" + source + ")"
}

// usedText is a minute's use against a limit.
func usedText(used int64, limit int) string {
	if limit <= 0 {
		return i64toa(used)
	}
	return i64toa(used) + " / " + strconv.Itoa(limit)
}

// HealthFlow is the flow-control part of the health page.
type HealthFlow struct {
	Models []ModelFlow
	Orgs   []OrgFlow
	Tokens TokenChart
	// CanPauseModels is true for admins: the provider account is every org's.
	CanPauseModels bool
	// AccountCounts is true for admins: the calls and 429s of a model count every org's.
	AccountCounts bool
	// UsedScope says whose use the figures count: "every org" or "your org".
	UsedScope string
}

// tokenAt is s's tokens in minute i, zero past its end.
func tokenAt(s TokenSeries, i int) int64 {
	if i < len(s.Tokens) {
		return s.Tokens[i]
	}
	return 0
}
