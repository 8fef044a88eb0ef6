package sim

import (
	"fmt"
	"io"
	"strings"
)

// SVG geometry: two panels stacked, each svgPanelH high.
const (
	svgW       = 800
	svgPanelH  = 260
	svgMarginL = 70
	svgMarginR = 20
	svgMarginT = 30
	svgMarginB = 40
)

// Titles of the two panels of -svg (the tests look for them).
const (
	svgTitleThroughput = "Throughput (pods/s per 1 s window)"
	svgTitleLatency    = "Attempt latency (ms per 1 s window): p50, p99"
)

// svgSeries is one line of a panel: a value per window.
type svgSeries struct {
	name, color string
	ys          []float64
}

// WriteSVG writes the time series as an SVG image with two panels over
// the same 1 s windows as -csv: throughput, and attempt latency p50/p99.
// Each series is a polyline with one point per window (and a dot per
// point, so that a one-window run still shows).
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
	var b strings.Builder
	fmt.Fprintf(&b, `<?xml version="1.0" encoding="UTF-8"?>`+"\n")
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		svgW, 2*svgPanelH, svgW, 2*svgPanelH)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", svgW, 2*svgPanelH)
	svgPanel(&b, 0, "throughput", svgTitleThroughput, xs, []svgSeries{{"pods/s", "#1f77b4", tput}})
	svgPanel(&b, svgPanelH, "latency", svgTitleLatency, xs, []svgSeries{{"p50", "#2ca02c", p50}, {"p99", "#d62728", p99}})
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// svgPanel draws one panel whose top is at y0.
func svgPanel(b *strings.Builder, y0 int, id, title string, xs []float64, series []svgSeries) {
	x0, x1 := float64(svgMarginL), float64(svgW-svgMarginR)
	top, bot := float64(y0+svgMarginT), float64(y0+svgPanelH-svgMarginB)
	xmax := 1.0
	if n := len(xs); n > 0 && xs[n-1] > 0 {
		xmax = xs[n-1]
	}
	ymax := 0.0
	for _, s := range series {
		for _, y := range s.ys {
			ymax = max(ymax, y)
		}
	}
	if ymax <= 0 {
		ymax = 1
	}
	ymax *= 1.05
	px := func(x float64) float64 { return x0 + x/xmax*(x1-x0) }
	py := func(y float64) float64 { return bot - y/ymax*(bot-top) }
	fmt.Fprintf(b, `<g id="%s">`+"\n", id)
	fmt.Fprintf(b, `<text class="title" x="%d" y="%d" font-size="14" font-weight="bold">%s</text>`+"\n", svgMarginL, y0+svgMarginT-10, xmlEscape(title))
	fmt.Fprintf(b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="none" stroke="#888"/>`+"\n", x0, top, x1-x0, bot-top)
	// Axis labels: 0 and the maximum on each axis, and the axis names.
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">0</text>`+"\n", x0-4, bot)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-4, top+10, svgNum(ymax))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">0</text>`+"\n", x0, bot+14)
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", x1, bot+14, svgNum(xmax))
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">time (s)</text>`+"\n", (x0+x1)/2, bot+28)
	for i, s := range series {
		pts := make([]string, len(s.ys))
		for j, y := range s.ys {
			pts[j] = fmt.Sprintf("%.1f,%.1f", px(xs[j]), py(y))
		}
		fmt.Fprintf(b, `<polyline class="series" data-name="%s" fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`+"\n", xmlEscape(s.name), s.color, strings.Join(pts, " "))
		for j, y := range s.ys {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>`+"\n", px(xs[j]), py(y), s.color)
		}
		// Legend, top right.
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="end" fill="%s">%s</text>`+"\n", x1-4, top+14+float64(i)*14, s.color, xmlEscape(s.name))
	}
	b.WriteString("</g>\n")
}

// svgNum formats an axis value compactly.
func svgNum(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 1:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

var xmlEscaper = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;")

func xmlEscape(s string) string { return xmlEscaper.Replace(s) }
