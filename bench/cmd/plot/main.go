// Command plot reads raw `go test -bench` output of the bench module (one or
// more files, any number of -count repetitions) and writes SVG bar charts
// comparing the implementations (impl=... in the benchmark names), plus a
// markdown table of the headline figures with their ratios. Each plotted
// value is the median over the repetitions.
//
//	go run ./cmd/plot -out ../docs/bench -md summary.md raw.txt
//
// It has no dependencies outside the standard library: the SVG is written by
// hand.
package main

import (
	"flag"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/schedcache/schedcache/bench/internal/rawbench"
)

type data = rawbench.Data

// ---- charts ----

type group struct {
	Label string
	Key   string
	Unit  string
}

type chart struct {
	File     string
	Title    string
	YLabel   string
	Log      bool
	Format   func(float64) string
	Groups   []group
	Headline bool // include in the markdown summary
	Better   string
}

var impls = []string{"upstream", "schedcache"}

var colors = map[string]string{"upstream": "#d95f02", "schedcache": "#1b9e77"}

func (c chart) svg(d data) string {
	const (
		w, h                     = 960, 460
		left, right, top, bottom = 80, 20, 50, 120
	)
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	var vals [][]float64
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, g := range c.Groups {
		row := make([]float64, len(impls))
		for i, im := range impls {
			v := d.Value(g.Key, im, g.Unit)
			row[i] = v
			if !math.IsNaN(v) && (!c.Log || v > 0) {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
		vals = append(vals, row)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", w, h, w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="22" font-size="15" font-weight="bold">%s</text>`+"\n", left, html.EscapeString(c.Title))
	if math.IsInf(lo, 0) {
		fmt.Fprintf(&b, `<text x="%d" y="%d">no data</text></svg>`+"\n", left, top+40)
		return b.String()
	}
	// y mapping
	var y func(float64) float64
	var ticks []float64
	if c.Log {
		l0, l1 := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
		if l1 == l0 {
			l1++
		}
		y = func(v float64) float64 { return float64(top) + ph*(1-(math.Log10(v)-l0)/(l1-l0)) }
		for e := l0; e <= l1; e++ {
			ticks = append(ticks, math.Pow(10, e))
		}
	} else {
		top0 := niceCeil(hi)
		y = func(v float64) float64 { return float64(top) + ph*(1-v/top0) }
		for i := 0; i <= 5; i++ {
			ticks = append(ticks, top0*float64(i)/5)
		}
	}
	for _, t := range ticks {
		ty := y(t)
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", left, w-right, ty, ty)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, ty+4, html.EscapeString(c.Format(t)))
	}
	fmt.Fprintf(&b, `<text transform="translate(16,%d) rotate(-90)" text-anchor="middle">%s</text>`+"\n", top+int(ph/2), html.EscapeString(c.YLabel))
	gw := pw / float64(len(c.Groups))
	bw := gw * 0.8 / float64(len(impls))
	base := float64(top) + ph
	for gi, g := range c.Groups {
		gx := float64(left) + gw*float64(gi)
		for i, im := range impls {
			v := vals[gi][i]
			bx := gx + gw*0.1 + bw*float64(i)
			if math.IsNaN(v) || (c.Log && v <= 0) {
				fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" fill="#999">n/a</text>`+"\n", bx+bw/2, base-4)
				continue
			}
			by := y(v)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %s</title></rect>`+"\n",
				bx, by, bw, math.Max(base-by, 0.5), colors[im], html.EscapeString(g.Label), im, html.EscapeString(c.Format(v)))
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="9">%s</text>`+"\n", bx+bw/2, by-3, html.EscapeString(c.Format(v)))
		}
		lx, ly := gx+gw/2, base+14
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" transform="rotate(-30 %.1f %.1f)">%s</text>`+"\n", lx, ly, lx, ly, html.EscapeString(g.Label))
	}
	fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#333"/>`+"\n", left, w-right, base, base)
	for i, im := range impls {
		lx := w - right - 220 + i*110
		fmt.Fprintf(&b, `<rect x="%d" y="30" width="12" height="12" fill="%s"/><text x="%d" y="40">%s</text>`+"\n", lx, colors[im], lx+16, im)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	e := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= v {
			return m * e
		}
	}
	return 10 * e
}

// charts returns the charts for cluster size size ("5k", "50k").
func charts(d data, size string) []chart {
	k := func(bench, rest string) string {
		if rest == "" {
			return fmt.Sprintf("Benchmark%s/nodes=%s", bench, size)
		}
		return fmt.Sprintf("Benchmark%s/nodes=%s/%s", bench, size, rest)
	}
	var cs []chart
	var rl []group
	for _, r := range []string{"1", "4", "16"} {
		for _, q := range []string{"p50", "p99", "p99.9", "max"} {
			rl = append(rl, group{fmt.Sprintf("R=%s %s", r, q), k("W1", "readers="+r), "reader-" + q + "-ns"})
		}
	}
	cs = append(cs, chart{File: "w1-reader-latency-" + size + ".svg", Title: "W1 snapshot-read: reader latency (take snapshot + read 10 nodes), " + size + " nodes",
		YLabel: "latency (log)", Log: true, Format: rawbench.FmtDur, Groups: rl, Headline: true, Better: "lower"})
	var wt []group
	for _, r := range []string{"0", "1", "4", "16"} {
		wt = append(wt, group{"R=" + r + " readers", k("W1", "readers="+r), "writer-events/s"})
	}
	cs = append(cs, chart{File: "w1-writer-throughput-" + size + ".svg", Title: "W1 snapshot-read: writer throughput with R readers, " + size + " nodes",
		YLabel: "pod events/s (log)", Log: true, Format: rawbench.FmtRate, Groups: wt, Headline: true, Better: "higher"})
	tp := []group{
		{"W2 informer churn", k("W2", ""), "events/s"},
		{"W3 schedule S=1", k("W3", "schedulers=1"), "pods/s"},
		{"W3 schedule S=2", k("W3", "schedulers=2"), "pods/s"},
		{"W3 schedule S=4", k("W3", "schedulers=4"), "pods/s"},
		{"W4 node churn", k("W4", ""), "events/s"},
		{"W5 expiry", k("W5", "storm=on"), "expired/s"},
	}
	cs = append(cs, chart{File: "throughput-" + size + ".svg", Title: "Throughput per workload, " + size + " nodes (events, pods scheduled, pods expired per second)",
		YLabel: "per second (log)", Log: true, Format: rawbench.FmtRate, Groups: tp, Headline: true, Better: "higher"})
	lat := []group{
		{"W3 assume p50 S=1", k("W3", "schedulers=1"), "assume-p50-ns"},
		{"W3 assume p99 S=4", k("W3", "schedulers=4"), "assume-p99-ns"},
		{"W4 node add/remove+refresh", k("W4", ""), "nodeop-ns"},
		{"W4 zone move+refresh", k("W4", ""), "zonemove-ns"},
		{"W6 take", k("W6", "variant=take"), "ns/op"},
		{"W6 take+List", k("W6", "variant=take+list"), "ns/op"},
		{"W6 take+scan", k("W6", "variant=take+scan"), "ns/op"},
		{"Cycle (3 sync calls)", k("Cycle", ""), "ns/op"},
		{"W2 per event", k("W2", ""), "ns/op"},
	}
	cs = append(cs, chart{File: "latency-" + size + ".svg", Title: "Per-operation cost, " + size + " nodes",
		YLabel: "time (log)", Log: true, Format: rawbench.FmtDur, Groups: lat, Headline: true, Better: "lower"})
	var st []group
	for _, s := range []string{"off", "on"} {
		for _, q := range []string{"p50", "p99", "p99.9", "max"} {
			st = append(st, group{"storm " + s + " " + q, k("W5", "storm="+s), "w2-batch-" + q + "-ns"})
		}
	}
	cs = append(cs, chart{File: "w5-stall-" + size + ".svg", Title: "W5 expiry storm: latency of 1ms batches of W2 events until visible, " + size + " nodes",
		YLabel: "batch latency (log)", Log: true, Format: rawbench.FmtDur, Groups: st, Headline: true, Better: "lower"})
	cs = append(cs, chart{File: "memory-" + size + ".svg", Title: "Live heap of the loaded cache + one snapshot (cluster objects excluded), " + size + " nodes",
		YLabel: "MiB", Format: rawbench.FmtMiB, Groups: []group{
			{"cache + snapshot", k("Memory", ""), "live-MiB"},
			{"snapshot alone", k("Memory", ""), "snap-MiB"},
		}, Headline: true, Better: "lower"})
	// Keep only charts with some data.
	var out []chart
	for _, c := range cs {
		for _, g := range c.Groups {
			if _, ok := d[g.Key]; ok {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

func sizes(d data) []string {
	set := map[string]bool{}
	re := regexp.MustCompile(`/nodes=([^/]+)`)
	for key := range d {
		if m := re.FindStringSubmatch(key); m != nil {
			set[m[1]] = true
		}
	}
	var out []string
	for s := range set {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) < len(out[j]) || len(out[i]) == len(out[j]) && out[i] < out[j] })
	return out
}

func main() {
	outDir := flag.String("out", ".", "directory for the SVG files")
	md := flag.String("md", "", "write a markdown summary (charts and headline table) to this file")
	prefix := flag.String("prefix", "", "path prefix of the SVG files in the markdown")
	flag.Parse()
	d := data{}
	for _, path := range flag.Args() {
		f, err := os.Open(path)
		if err != nil {
			fatal(err)
		}
		if err := rawbench.Parse(f, d); err != nil {
			fatal(err)
		}
		f.Close()
	}
	if len(d) == 0 {
		fatal(fmt.Errorf("no benchmark lines with impl= found in %v", flag.Args()))
	}
	if err := os.MkdirAll(*outDir, 0o755); err != nil {
		fatal(err)
	}
	var m strings.Builder
	for _, size := range sizes(d) {
		fmt.Fprintf(&m, "### %s nodes\n\n", size)
		for _, c := range charts(d, size) {
			if err := os.WriteFile(filepath.Join(*outDir, c.File), []byte(c.svg(d)), 0o644); err != nil {
				fatal(err)
			}
			fmt.Fprintf(&m, "![%s](%s)\n\n", c.Title, *prefix+c.File)
			if !c.Headline {
				continue
			}
			fmt.Fprintf(&m, "| %s | upstream | schedcache | schedcache / upstream (%s is better) |\n|---|---:|---:|---:|\n", c.YLabel, c.Better)
			for _, g := range c.Groups {
				u, s := d.Value(g.Key, "upstream", g.Unit), d.Value(g.Key, "schedcache", g.Unit)
				if math.IsNaN(u) && math.IsNaN(s) {
					continue
				}
				ratio := "–"
				if !math.IsNaN(u) && !math.IsNaN(s) && u != 0 {
					ratio = fmt.Sprintf("%.3gx", s/u)
				}
				fmt.Fprintf(&m, "| %s | %s | %s | %s |\n", g.Label, cell(c, u), cell(c, s), ratio)
			}
			m.WriteString("\n")
			if strings.HasPrefix(c.File, "w1-writer-throughput-") {
				m.WriteString(shareTable(d, size))
			}
			if strings.HasPrefix(c.File, "w1-reader-latency-") {
				m.WriteString(floorTable(d, size))
			}
		}
	}
	m.WriteString(scaleTable(d))
	if *md != "" {
		if err := os.WriteFile(*md, []byte(m.String()), 0o644); err != nil {
			fatal(err)
		}
	} else {
		fmt.Print(m.String())
	}
}

// shareTable shows each W1 writer's rate with R readers as a share of its
// own rate with none, next to that of a writer that uses no cache
// (BenchmarkW1CPUShare): the share the machine leaves any writer.
func shareTable(d data, size string) string {
	w1 := func(r string) string { return fmt.Sprintf("BenchmarkW1/nodes=%s/readers=%s", size, r) }
	cpu := func(r string) string { return fmt.Sprintf("BenchmarkW1CPUShare/nodes=%s/readers=%s", size, r) }
	if _, ok := d[cpu("0")]; !ok {
		return ""
	}
	share := func(key func(string) string, impl, unit, r string) string {
		v, base := d.Value(key(r), impl, unit), d.Value(key("0"), impl, unit)
		if math.IsNaN(v) || math.IsNaN(base) || base == 0 {
			return "n/a"
		}
		return fmt.Sprintf("%.0f%%", 100*v/base)
	}
	var m strings.Builder
	m.WriteString("| writer rate with R readers / its rate with none | upstream | schedcache | a writer that uses no cache (W1CPUShare) |\n|---|---:|---:|---:|\n")
	for _, r := range []string{"1", "4", "16"} {
		fmt.Fprintf(&m, "| R=%s | %s | %s | %s |\n", r, share(w1, "upstream", "writer-events/s", r),
			share(w1, "schedcache", "writer-events/s", r), share(cpu, "none", "writer-units/s", r))
	}
	m.WriteString("\n")
	return m.String()
}

// floorTable sets the W1 bar for reader p99.9 (upstream's / 100) beside
// what readers get with no writer at all (BenchmarkW1ReadFloor): from
// schedcache snapshots, from the same NodeInfos in a plain slice, and from
// a plain slice of node values.
func floorTable(d data, size string) string {
	floor := func(variant, r string) string {
		return fmt.Sprintf("BenchmarkW1ReadFloor/nodes=%s/variant=%s/readers=%s", size, variant, r)
	}
	if _, ok := d[floor("plain-slice", "4")]; !ok {
		return ""
	}
	const unit = "reader-p99.9-ns"
	var m strings.Builder
	m.WriteString("| reader p99.9 | bar: upstream / 100 | schedcache (W1, with the writer) | no writer, schedcache snapshots | no writer, no cache: the NodeInfos in a plain slice | no writer, no cache: a plain slice of values |\n|---|---:|---:|---:|---:|---:|\n")
	for _, r := range []string{"1", "4", "16"} {
		w1 := fmt.Sprintf("BenchmarkW1/nodes=%s/readers=%s", size, r)
		fmt.Fprintf(&m, "| R=%s | %s | %s | %s | %s | %s |\n", r, fmtNS(d.Value(w1, "upstream", unit)/100), fmtNS(d.Value(w1, "schedcache", unit)),
			fmtNS(d.Value(floor("snapshot", r), "floor", unit)), fmtNS(d.Value(floor("nodeinfo-slice", r), "floor", unit)),
			fmtNS(d.Value(floor("plain-slice", r), "floor", unit)))
	}
	m.WriteString("\n")
	return m.String()
}

// scaleTable compares the per-event cost of W1's writer (no readers) and of
// W2 at 5,000 and 50,000 nodes for both implementations and for the floor
// (BenchmarkScaleFloor: a map-based cache doing the least any cache does
// per event). Empty unless the floor ran at both sizes.
func scaleTable(d data) string {
	if _, ok := d["BenchmarkScaleFloor/workload=W1/nodes=50k"]; !ok {
		return ""
	}
	rows := []struct {
		label, key, floorKey string // keys with %s for the size
	}{
		{"W1 writer, no readers", "BenchmarkW1/nodes=%s/readers=0", "BenchmarkScaleFloor/workload=W1/nodes=%s"},
		{"W2 informer churn", "BenchmarkW2/nodes=%s", "BenchmarkScaleFloor/workload=W2/nodes=%s"},
	}
	var m strings.Builder
	m.WriteString("### Per event at 5,000 and 50,000 nodes\n\n")
	m.WriteString("| per event (ns/op) | implementation | 5k | 50k | 50k / 5k (bar: 1.3x) | 50k - 5k |\n|---|---|---:|---:|---:|---:|\n")
	for _, r := range rows {
		for _, impl := range []string{"upstream", "schedcache", "floor"} {
			key := r.key
			if impl == "floor" {
				key = r.floorKey
			}
			a, b := d.Value(fmt.Sprintf(key, "5k"), impl, "ns/op"), d.Value(fmt.Sprintf(key, "50k"), impl, "ns/op")
			ratio, diff := "n/a", "n/a"
			if !math.IsNaN(a) && !math.IsNaN(b) && a != 0 {
				ratio = fmt.Sprintf("%.2fx", b/a)
				diff = rawbench.FmtDur(math.Abs(b - a))
				if b < a {
					diff = "-" + diff
				}
			}
			fmt.Fprintf(&m, "| %s | %s | %s | %s | %s | %s |\n", r.label, impl, fmtNS(a), fmtNS(b), ratio, diff)
		}
	}
	m.WriteString("\n")
	return m.String()
}

// fmtNS formats a duration in ns, or n/a for a missing median.
func fmtNS(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return rawbench.FmtDur(v)
}

func cell(c chart, v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return c.Format(v)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "plot:", err)
	os.Exit(1)
}
