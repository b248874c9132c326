package views

import (
	"math"
	"strconv"
	"strings"
)

// Server-rendered SVG charts of the queue-health page: a stacked bar chart of jobs finished
// per minute and line charts of p50/p95 queue wait and run time. The geometry is computed
// here; health.templ draws it. Everything is in a fixed viewBox that scales with its box.

const (
	chartW      = 400.0
	chartH      = 170.0
	chartLeft   = 50.0
	chartRight  = 394.0
	chartTop    = 8.0
	chartBottom = 146.0
)

// chartTick is one axis label.
type chartTick struct {
	X, Y  float64
	Label string
	// Anchor is the SVG text-anchor ("end" keeps the last label inside the chart).
	Anchor string
}

// chartBar is one rectangle of a bar chart.
type chartBar struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// chartLine is one series of a line chart.
type chartLine struct {
	Label  string
	Class  string
	Points string
	// Dots are drawn when the series has a single non-empty point.
	Last string
}

// chart is one computed chart.
type chart struct {
	Bars   []chartBar
	Lines  []chartLine
	YTicks []chartTick
	XTicks []chartTick
	Empty  bool
}

func fnum(f float64) string { return strconv.FormatFloat(math.Round(f*10)/10, 'f', -1, 64) }

// niceMax rounds up to 1, 2 or 5 times a power of ten, and at least min.
func niceMax(v, min float64) float64 {
	if v < min {
		v = min
	}
	exp := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*exp {
			return m * exp
		}
	}
	return 10 * exp
}

func chartXTicks(points []SeriesPoint) []chartTick {
	n := len(points)
	if n == 0 {
		return nil
	}
	step := (chartRight - chartLeft) / float64(n)
	var out []chartTick
	for i, p := range points {
		if (n-1-i)%15 != 0 {
			continue
		}
		anchor := "middle"
		if i == n-1 {
			anchor = "end"
		}
		out = append(out, chartTick{X: chartLeft + step*(float64(i)+0.5), Y: chartBottom + 16, Label: p.At.UTC().Format("15:04"), Anchor: anchor})
	}
	return out
}

func yTicks(max float64, format func(float64) string) []chartTick {
	var out []chartTick
	for _, f := range []float64{0, 0.5, 1} {
		out = append(out, chartTick{X: chartLeft - 6, Y: chartBottom - f*(chartBottom-chartTop), Label: format(max * f)})
	}
	return out
}

// throughputChart stacks failed (rose) on other finished jobs (emerald), one bar per minute.
func throughputChart(points []SeriesPoint) chart {
	c := chart{XTicks: chartXTicks(points), Empty: true}
	var peak float64
	for _, p := range points {
		peak = math.Max(peak, float64(p.Finished))
		if p.Finished > 0 {
			c.Empty = false
		}
	}
	max := niceMax(peak, 4)
	c.YTicks = yTicks(max, func(f float64) string { return fnum(f) })
	if len(points) == 0 {
		return c
	}
	step := (chartRight - chartLeft) / float64(len(points))
	h := chartBottom - chartTop
	for i, p := range points {
		if p.Finished == 0 {
			continue
		}
		x := chartLeft + step*float64(i) + step*0.15
		w := step * 0.7
		ok := float64(p.Finished - p.Failed)
		okH := ok / max * h
		failH := float64(p.Failed) / max * h
		title := p.At.UTC().Format("15:04") + " UTC: " + i64toa(p.Finished) + " finished, " + i64toa(p.Failed) + " failed"
		if ok > 0 {
			c.Bars = append(c.Bars, chartBar{X: x, Y: chartBottom - okH, W: w, H: okH, Class: "fill-emerald-500 dark:fill-emerald-400", Title: title})
		}
		if p.Failed > 0 {
			c.Bars = append(c.Bars, chartBar{X: x, Y: chartBottom - okH - failH, W: w, H: failH, Class: "fill-rose-500 dark:fill-rose-400", Title: title})
		}
	}
	return c
}

// latencyChart draws p50 and p95 of wait (run=false) or run time (run=true), in seconds;
// minutes where nothing finished are gaps.
func latencyChart(points []SeriesPoint, run bool) chart {
	c := chart{XTicks: chartXTicks(points), Empty: true}
	get := func(p SeriesPoint) (float64, float64) {
		if run {
			return p.RunP50, p.RunP95
		}
		return p.WaitP50, p.WaitP95
	}
	var peak float64
	for _, p := range points {
		if p.Finished == 0 {
			continue
		}
		c.Empty = false
		_, p95 := get(p)
		peak = math.Max(peak, p95)
	}
	max := niceMax(peak, 1)
	c.YTicks = yTicks(max, formatSeconds)
	if len(points) == 0 {
		return c
	}
	step := (chartRight - chartLeft) / float64(len(points))
	h := chartBottom - chartTop
	series := []struct {
		label, class string
		pick         func(p SeriesPoint) float64
	}{
		{"p50", "stroke-sky-600 dark:stroke-sky-400", func(p SeriesPoint) float64 { a, _ := get(p); return a }},
		{"p95", "stroke-amber-500 dark:stroke-amber-300", func(p SeriesPoint) float64 { _, b := get(p); return b }},
	}
	for _, s := range series {
		var segs []string
		var cur []string
		last := ""
		for i, p := range points {
			if p.Finished == 0 {
				if len(cur) > 0 {
					segs = append(segs, "M"+strings.Join(cur, " L"))
					cur = nil
				}
				continue
			}
			x := chartLeft + step*(float64(i)+0.5)
			y := chartBottom - s.pick(p)/max*h
			pt := fnum(x) + "," + fnum(y)
			cur = append(cur, pt)
			last = pt
		}
		if len(cur) > 0 {
			segs = append(segs, "M"+strings.Join(cur, " L"))
		}
		c.Lines = append(c.Lines, chartLine{Label: s.label, Class: s.class, Points: strings.Join(segs, " "), Last: last})
	}
	return c
}

// lastX and lastY split a "x,y" point for a dot.
func pointX(pt string) string { x, _, _ := strings.Cut(pt, ","); return x }
func pointY(pt string) string { _, y, _ := strings.Cut(pt, ","); return y }

// seriesSummary is the text alternative of the charts.
func seriesSummary(points []SeriesPoint) string {
	var finished, failed, peak int64
	for _, p := range points {
		finished += p.Finished
		failed += p.Failed
		if p.Finished > peak {
			peak = p.Finished
		}
	}
	return i64toa(finished) + " jobs finished in the last hour (" + i64toa(failed) + " failed), at most " + i64toa(peak) + " in one minute."
}
