package sim

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// SVG geometry: a header with the run's title and configuration, then two
// panels stacked, each svgPanelH high.
const (
	svgW       = 800
	svgHeaderH = 64
	svgPanelH  = 260
	svgMarginL = 70
	svgMarginR = 20
	svgMarginT = 30
	svgMarginB = 40
)

// Titles of the two panels of -svg (the tests look for them).
const (
	svgTitleThroughput = "Throughput (pods/s per 1 s window)"
	svgTitleLatency    = "Attempt latency per 1 s window (log scale): p50, p99"
)

// svgSeries is one line of a panel: a value per window.
type svgSeries struct {
	name, color string
	ys          []float64
}

// svgAxis is a panel's y axis: linear from 0, or logarithmic (decades).
type svgAxis struct {
	log    bool
	lo, hi float64              // the axis' range (lo > 0 when log)
	label  func(float64) string // a tick's label
}

// WriteSVG writes the time series as an SVG image: a title with the run's
// configuration and outcome, then two panels over the same 1 s windows as
// -csv, with gridlines: throughput (linear), and attempt latency p50/p99
// on a logarithmic axis, so that a p50 of microseconds shows under a p99
// of tens of milliseconds. Each series is a polyline with one point per
// window (and a dot per point, so that a one-window run still shows); a
// window with no pod scheduled has no latency point.
func (r *Report) WriteSVG(w io.Writer) error {
	xs := make([]float64, len(r.Series))
	tput := make([]float64, len(r.Series))
	p50 := make([]float64, len(r.Series))
	p99 := make([]float64, len(r.Series))
	for i, s := range r.Series {
		xs[i] = s.Seconds
		tput[i] = s.PodsPerSec
		p50[i] = ms(s.P50)
		p99[i] = ms(s.P99)
	}
	h := svgHeaderH + 2*svgPanelH
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgW, h, svgW, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, h)
	for i, line := range r.svgHeader() {
		size, weight := 11, "normal"
		if i == 0 {
			size, weight = 15, "bold"
		}
		fmt.Fprintf(&b, `<text class="header" x="10" y="%d" font-size="%d" font-weight="%s">%s</text>`+"\n", 18+i*16, size, weight, xmlEscape(line))
	}
	svgPanel(&b, svgHeaderH, "throughput", svgTitleThroughput, xs, []svgSeries{{"pods/s", "#1f77b4", tput}}, linearAxis(tput))
	svgPanel(&b, svgHeaderH+svgPanelH, "latency", svgTitleLatency, xs, []svgSeries{{"p50", "#2ca02c", p50}, {"p99", "#d62728", p99}}, logAxis(p50, p99))
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// svgHeader is the plot's title, configuration and outcome, one line each.
func (r *Report) svgHeader() []string {
	c := r.Config
	title := fmt.Sprintf("schedcache loadgen: %d nodes, %d pods at start, seed %d", c.Nodes, r.InitialPods, c.Seed)
	if c.Scenario != "" {
		title += ", scenario " + c.Scenario
	}
	mode := "real time"
	if c.Deterministic {
		mode = fmt.Sprintf("deterministic (virtual time, decision %v)", c.DecisionTime)
	}
	arrivals := "closed-loop arrivals"
	switch c.Arrival {
	case arrPoisson:
		arrivals = fmt.Sprintf("poisson arrivals %g pods/s", c.Rate)
	case arrBurst:
		arrivals = fmt.Sprintf("bursts of %d every %v", c.BurstSize, c.BurstInterval)
	}
	picker := r.Picker
	if picker == "" {
		picker = LeastAllocated{}.Name()
	}
	cfgLine := fmt.Sprintf("%d schedulers, sample %d, picker %s, %s, %s, %d shards, GOMAXPROCS=%d, %s/%s",
		c.Schedulers, c.Sample, picker, arrivals, mode, r.Shards, runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH)
	outcome := fmt.Sprintf("%d pods scheduled in %v (%.0f pods/s), stopped by %s; attempt latency p50 %v, p99 %v",
		r.Scheduled, r.Elapsed.Round(time.Millisecond), r.PodsPerSec, r.Stopped, r.Attempt.P50, r.Attempt.P99)
	return []string{title, cfgLine, outcome}
}

// linearAxis is a linear axis from 0 to a round value above ys' maximum.
func linearAxis(ys []float64) svgAxis {
	hi := 0.0
	for _, y := range ys {
		hi = max(hi, y)
	}
	if hi <= 0 {
		hi = 1
	}
	step := niceStep(hi / 5)
	return svgAxis{lo: 0, hi: math.Ceil(hi*1.05/step) * step, label: svgNum}
}

// logAxis is a logarithmic axis over whole decades holding the positive
// values of the series (in ms) inside them, labelled as durations.
func logAxis(series ...[]float64) svgAxis {
	lo, hi := math.Inf(1), 0.0
	for _, ys := range series {
		for _, y := range ys {
			if y > 0 {
				lo, hi = min(lo, y), max(hi, y)
			}
		}
	}
	if hi == 0 {
		lo, hi = 0.001, 1 // nothing to plot: 1 µs to 1 ms
	}
	// Whole decades strictly around the values: none lies on the frame.
	lo, hi = math.Pow(10, math.Floor(math.Log10(lo*0.999))), math.Pow(10, math.Ceil(math.Log10(hi*1.001)))
	if hi <= lo {
		hi = lo * 10
	}
	return svgAxis{log: true, lo: lo, hi: hi, label: func(v float64) string {
		return time.Duration(math.Round(v * 1e6)).String()
	}}
}

// niceStep is the 1, 2 or 5 times a power of ten at or above x.
func niceStep(x float64) float64 {
	if x <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= x {
			return m * p
		}
	}
	return 10 * p
}

// ticks are the axis' gridlines: major ones labelled (every decade of a
// log axis, every step of a linear one) and minor ones (2…9 within each
// decade of a log axis).
func (a svgAxis) ticks() (major, minor []float64) {
	if !a.log {
		step := niceStep(a.hi / 5)
		for i := 0.0; i*step <= a.hi*(1+1e-9); i++ {
			major = append(major, i*step)
		}
		return major, nil
	}
	for d := a.lo; d <= a.hi*(1+1e-9); d *= 10 {
		major = append(major, d)
		for m := 2.0; m < 10 && d*m < a.hi; m++ {
			minor = append(minor, d*m)
		}
	}
	return major, minor
}

// frac is where v lies on the axis, 0 at the bottom and 1 at the top.
func (a svgAxis) frac(v float64) float64 {
	if a.log {
		return (math.Log10(v) - math.Log10(a.lo)) / (math.Log10(a.hi) - math.Log10(a.lo))
	}
	return (v - a.lo) / (a.hi - a.lo)
}

// svgPanel draws one panel whose top is at y0, its y axis ax.
func svgPanel(b *strings.Builder, y0 int, id, title string, xs []float64, series []svgSeries, ax svgAxis) {
	x0, x1 := float64(svgMarginL), float64(svgW-svgMarginR)
	top, bot := float64(y0+svgMarginT), float64(y0+svgPanelH-svgMarginB)
	xmax := 1.0
	if n := len(xs); n > 0 && xs[n-1] > 0 {
		xmax = xs[n-1]
	}
	px := func(x float64) float64 { return x0 + x/xmax*(x1-x0) }
	py := func(y float64) float64 { return bot - ax.frac(y)*(bot-top) }
	fmt.Fprintf(b, `<g id="%s">`+"\n", id)
	fmt.Fprintf(b, `<text class="title" x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", svgMarginL, y0+svgMarginT-10, xmlEscape(title))
	// Gridlines: y (labelled major, faint minor), then x (each step of
	// time, labelled).
	major, minor := ax.ticks()
	for _, v := range minor {
		fmt.Fprintf(b, `<line class="grid minor" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", x0, py(v), x1, py(v))
	}
	for _, v := range major {
		fmt.Fprintf(b, `<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ccc"/>`+"\n", x0, py(v), x1, py(v))
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-4, py(v)+4, xmlEscape(ax.label(v)))
	}
	xstep := niceStep(xmax / 10)
	for i := 0.0; i*xstep <= xmax*(1+1e-9); i++ {
		x := i * xstep
		fmt.Fprintf(b, `<line class="grid" x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ccc"/>`+"\n", px(x), top, px(x), bot)
		fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", px(x), bot+14, svgNum(x))
	}
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", x0, top, x1-x0, bot-top)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">time (s)</text>`+"\n", (x0+x1)/2, bot+28)
	for i, s := range series {
		var pts []string
		var dots []float64 // x, y pairs
		for j, y := range s.ys {
			if ax.log && y <= 0 {
				continue // no pod in the window: no latency
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px(xs[j]), py(y)))
			dots = append(dots, px(xs[j]), py(y))
		}
		fmt.Fprintf(b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", xmlEscape(s.name), s.color, strings.Join(pts, " "))
		for j := 0; j+1 < len(dots); j += 2 {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>`+"\n", dots[j], dots[j+1], s.color)
		}
		// Legend, top right.
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">%s</text>`+"\n", x1-4, top+14+float64(i)*14, s.color, xmlEscape(s.name))
	}
	b.WriteString("</g>\n")
}

// svgNum formats a tick's value compactly: 0, 0.5, 2, 250, 60000.
func svgNum(v float64) string {
	if v >= 1e5 {
		return fmt.Sprintf("%.0f", v)
	}
	return strconv.FormatFloat(v, 'g', 6, 64)
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func xmlEscape(s string) string { return xmlEscaper.Replace(s) }
