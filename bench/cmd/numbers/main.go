// Command numbers writes the headline table that README.md ("Numbers") and
// docs/BENCHMARKS.md share, and the what-if table (forks against Cluster
// Autoscaler's snapshot stores), from committed raw `go test -bench` output.
// Every row names the raw file its figures come from; nothing is typed by
// hand. bench/run.sh calls it; figures are formatted exactly as cmd/plot
// formats them in BENCHMARKS.md's chart tables, so one measure reads the same
// in every document.
//
//	go run ./cmd/numbers -table headline -raw ../docs/bench/raw-2026-11-24.txt \
//	    [-raw50k FILE] [-whatif5k FILE -whatif50k FILE] -rel ..
//	go run ./cmd/numbers -table whatif -whatif5k FILE -whatif50k FILE -rel ../docs
//
// -table headline writes the rows against upstream, then the what-if rows
// (README's table); -table upstream the first part alone (BENCHMARKS.md,
// which has the whole what-if table from -table whatif).
//
// -raw is the run's raw file (cmd/plot's input). -raw50k supplies the
// 50,000-node rows when -raw has none (a run without BENCH_50K=1); rows whose
// source is missing say so instead of showing a figure. -rel is the
// directory of the document the table goes into: links are relative to it.
//
// Medians are over all repetitions in the file, as cmd/plot and benchstat
// take them. A what-if ratio is CA delta's time / ours within each round
// (one process holding every store), then the median over rounds, as in
// docs/whatif-vs-ca.md.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/schedcache/schedcache/bench/internal/rawbench"
)

type data = rawbench.Data

// storeElem finds the store=... element of a what-if benchmark's name.
var storeElem = regexp.MustCompile(`/store=([^/]+)`)

// has reports whether d holds any result of key.
func has(d data, key string) bool { _, ok := d[key]; return ok }

// ratio is cmd/plot's "schedcache / upstream" cell.
func ratio(num, den float64) string {
	if math.IsNaN(num) || math.IsNaN(den) || den == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.3gx", num/den)
}

// scaleRatio is cmd/plot's 50k / 5k cell.
func scaleRatio(k50, k5 float64) string {
	if math.IsNaN(k50) || math.IsNaN(k5) || k5 == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", k50/k5)
}

// share is cmd/plot's "writer rate with R readers / its rate with none" cell.
func share(v, base float64) string {
	if math.IsNaN(v) || math.IsNaN(base) || base == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*v/base)
}

// source is one raw file: its data and its link from the target document.
type source struct {
	d    data
	link string // markdown link, or "" when the file is missing
	path string
}

func load(path, rel string) (source, error) {
	s := source{d: data{}, path: path}
	if path == "" {
		return s, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return s, err
	}
	defer f.Close()
	if err := rawbench.Parse(f, s.d); err != nil {
		return s, err
	}
	s.link = link(path, rel)
	return s, nil
}

// link is a markdown link to path from directory rel.
func link(path, rel string) string {
	target := path
	if abs, err := filepath.Abs(path); err == nil {
		if r, err := filepath.Abs(rel); err == nil {
			if p, err := filepath.Rel(r, abs); err == nil {
				target = p
			}
		}
	}
	return fmt.Sprintf("[%s](%s)", filepath.Base(path), filepath.ToSlash(target))
}

// cycleMeasure is the label of BenchmarkCycle's row: AssumePod, AddPod and
// RemovePod of one pod (upstream v1.37 has no FinishBinding, so the cycle
// calls it on neither cache).
const cycleMeasure = "one synchronous Assume+Add+Remove cycle, each call publishing a snapshot"

// w5Upstream is W5's upstream figure: the benchmark runs on schedcache
// only.
const w5Upstream = "n/a (upstream v1.37 has no assumed-pod expiry)"

// row is one line of the headline table. A row whose figure is "" is
// written as missing with the reason in src.
type row struct {
	measure, figure, src string
}

func headline(run, big source) []row {
	const k5 = "nodes=5k"
	w := func(name string) string { return "Benchmark" + name }
	up, sc := "upstream", "schedcache"
	v := func(s source, key, impl, unit string) float64 { return s.d.Value(w(key), impl, unit) }
	// vs is a row's usual figure: "ratio[ the cost] (ours vs upstream)".
	vs := func(s source, key, unit, what string, format func(float64) string) string {
		ours, theirs := v(s, key, sc, unit), v(s, key, up, unit)
		return fmt.Sprintf("%s%s (%s vs %s)", ratio(ours, theirs), what, format(ours), format(theirs))
	}
	var rows []row
	add := func(s source, measure, figure string) {
		if s.link == "" {
			figure = ""
		}
		rows = append(rows, row{measure, figure, s.link})
	}

	take, list := "W6/"+k5+"/variant=take", "W6/"+k5+"/variant=take+list"
	add(run, "first full snapshot of the loaded cluster (W6): take; take + List",
		fmt.Sprintf("%s vs %s; %s vs %s", rawbench.FmtDur(v(run, take, sc, "ns/op")), rawbench.FmtDur(v(run, take, up, "ns/op")),
			rawbench.FmtDur(v(run, list, sc, "ns/op")), rawbench.FmtDur(v(run, list, up, "ns/op"))))
	w3 := "W3/" + k5 + "/schedulers=4"
	add(run, "scheduled pods/s, 4 schedulers on snapshots (W3)",
		vs(run, w3, "pods/s", "", rawbench.FmtRate))
	w4 := "W4/" + k5
	add(run, "node add/remove including list maintenance (W4)",
		vs(run, w4, "nodeop-ns", " the cost", rawbench.FmtDur))
	for _, r := range []string{"1", "4", "16"} {
		key := "W1/" + k5 + "/readers=" + r
		measure := "snapshot reader p99.9 while a writer churns, " + r + " readers (W1)"
		if r == "1" {
			measure = "snapshot reader p99.9 while a writer churns, 1 reader (W1)"
		}
		add(run, measure, vs(run, key, "reader-p99.9-ns", "", rawbench.FmtDur))
	}
	r4, r0 := "W1/"+k5+"/readers=4", "W1/"+k5+"/readers=0"
	add(run, "writer events/s with 4 snapshot readers (W1)",
		vs(run, r4, "writer-events/s", "", rawbench.FmtRate))
	cpu4, cpu0 := "W1CPUShare/"+k5+"/readers=4", "W1CPUShare/"+k5+"/readers=0"
	add(run, "W1 writer's rate with 4 readers, as a share of its rate with none",
		fmt.Sprintf("%s (upstream %s; a writer that uses no cache %s)",
			share(v(run, r4, sc, "writer-events/s"), v(run, r0, sc, "writer-events/s")),
			share(v(run, r4, up, "writer-events/s"), v(run, r0, up, "writer-events/s")),
			share(v(run, cpu4, "none", "writer-units/s"), v(run, cpu0, "none", "writer-units/s"))))
	// W5 runs on schedcache only (BenchmarkW5 skips impl=upstream): its
	// upstream part is the reason, whatever the raw file holds (a run
	// against an older upstream had figures for it).
	on, off := "W5/"+k5+"/storm=on", "W5/"+k5+"/storm=off"
	add(run, "other operations' p99 during a 10,000-pod expiry storm, vs without (W5)",
		fmt.Sprintf("%s (%s vs %s); upstream: %s", ratio(v(run, on, sc, "w2-batch-p99-ns"), v(run, off, sc, "w2-batch-p99-ns")),
			rawbench.FmtDur(v(run, on, sc, "w2-batch-p99-ns")), rawbench.FmtDur(v(run, off, sc, "w2-batch-p99-ns")),
			w5Upstream))
	mem := "Memory/" + k5
	add(run, "live heap of the loaded cache plus one snapshot",
		vs(run, mem, "live-MiB", "", rawbench.FmtMiB))
	w2 := "W2/" + k5
	add(run, "informer events/s (W2)",
		vs(run, w2, "events/s", "", rawbench.FmtRate))
	cyc := "Cycle/" + k5
	add(run, cycleMeasure,
		vs(run, cyc, "ns/op", "", rawbench.FmtDur))

	// 50,000 nodes: from the run when it has them, else from big.
	const k50 = "nodes=50k"
	b := run
	if !has(run.d, w("W2/"+k50)) {
		b = big
	}
	w2b := "W2/" + k50
	add(b, "50,000 nodes (1.5 million pods): informer events/s (W2)",
		vs(b, w2b, "events/s", "", rawbench.FmtRate))
	w4b := "W4/" + k50
	add(b, "50,000 nodes: node add/remove including list maintenance (W4)",
		vs(b, w4b, "nodeop-ns", " the cost", rawbench.FmtDur))
	r4b := "W1/" + k50 + "/readers=4"
	add(b, "50,000 nodes: writer events/s with 4 snapshot readers (W1)",
		vs(b, r4b, "writer-events/s", "", rawbench.FmtRate))
	for _, s := range []struct{ label, key, floor string }{
		{"W1 writer, no readers", "W1/nodes=%s/readers=0", "ScaleFloor/workload=W1/nodes=%s"},
		{"W2", "W2/nodes=%s", "ScaleFloor/workload=W2/nodes=%s"},
	} {
		g := func(key, impl string) string {
			return scaleRatio(v(b, fmt.Sprintf(key, "50k"), impl, "ns/op"), v(b, fmt.Sprintf(key, "5k"), impl, "ns/op"))
		}
		add(b, "50,000 nodes: per-event cost / its cost at 5,000, "+s.label,
			fmt.Sprintf("%s (upstream %s; a map-based cache doing the least per event %s)",
				g(s.key, sc), g(s.key, up), g(s.floor, "floor")))
	}

	return rows
}

// whatifHeadline is the what-if part of the headline table: CA delta's
// time / ours (wall), at 5,000 and 50,000 nodes.
func whatifHeadline(wi whatif) [][4]string {
	var out [][4]string
	src := joinLinks(wi.k5.link, wi.k50.link)
	for _, b := range whatifRows {
		if !b.headline {
			continue
		}
		c5, c50 := "not measured", "not measured"
		if wi.k5.link != "" {
			c5 = wi.cell(wi.k5, b.name).wall
		}
		if wi.k50.link != "" {
			c50 = wi.cell(wi.k50, b.name).wall
		}
		if src == "" {
			src = "(no raw file with these benchmarks)"
		}
		out = append(out, [4]string{b.label, c5, c50, src})
	}
	return out
}

func joinLinks(ls ...string) string {
	var out []string
	for _, l := range ls {
		if l != "" {
			out = append(out, l)
		}
	}
	return strings.Join(out, ", ")
}

func writeHeadline(w io.Writer, rows []row, wi [][4]string) {
	fmt.Fprintln(w, "| measure | schedcache vs upstream (medians) | raw file |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, r := range rows {
		fig, src := r.figure, r.src
		if fig == "" {
			fig = "not measured"
			if src == "" {
				src = "(no raw file with these benchmarks)"
			}
		}
		fmt.Fprintf(w, "| %s | %s | %s |\n", r.measure, fig, src)
	}
	if len(wi) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| what-if fork, CA delta store's time / ours (< 1: ours is slower) | 5,000 nodes | 50,000 nodes | raw files |")
	fmt.Fprintln(w, "|---|---:|---:|---|")
	for _, r := range wi {
		fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r[0], r[1], r[2], r[3])
	}
}

// ---- what-if ----

// rounds[i][bench][store][unit] of a what-if raw file; a round starts at a
// "# round" line (one process holding every store).
type rounds []map[string]map[string]map[string]float64

type whatifFile struct {
	r    rounds
	link string
}

func parseRounds(r io.Reader) (rounds, error) {
	var out rounds
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "# round") {
			out = append(out, map[string]map[string]map[string]float64{})
			continue
		}
		name, pairs, ok := rawbench.Fields(line)
		if !ok {
			continue
		}
		m := storeElem.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		if len(out) == 0 {
			out = append(out, map[string]map[string]map[string]float64{})
		}
		bench := strings.TrimPrefix(name, "Benchmark")
		bench = bench[:strings.Index(bench, "/")]
		cur := out[len(out)-1]
		if cur[bench] == nil {
			cur[bench] = map[string]map[string]float64{}
		}
		if cur[bench][m[1]] == nil {
			cur[bench][m[1]] = map[string]float64{}
		}
		for _, p := range pairs {
			if v, err := strconv.ParseFloat(p[0], 64); err == nil {
				cur[bench][m[1]][p[1]] = v
			}
		}
	}
	return out, sc.Err()
}

func loadWhatif(path, rel string) (whatifFile, error) {
	if path == "" {
		return whatifFile{}, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return whatifFile{}, err
	}
	defer f.Close()
	r, err := parseRounds(f)
	if err != nil {
		return whatifFile{}, err
	}
	return whatifFile{r: r, link: link(path, rel)}, nil
}

// The timed region's wall time (docs/whatif-vs-ca.md, section 3) and CPU time.
const (
	wallUnit = "region-ns/op"
	cpuUnit  = "cpu-ns/op"
)

// median of store's unit over the rounds.
func (f whatifFile) med(bench, store, unit string) float64 {
	var xs []float64
	for _, r := range f.r {
		if v, ok := r[bench][store][unit]; ok {
			xs = append(xs, v)
		}
	}
	return rawbench.Median(xs)
}

// ratio of CA delta's unit to store's within each round, median over rounds.
func (f whatifFile) ratio(bench, store, unit string) float64 {
	var xs []float64
	for _, r := range f.r {
		ca, okc := r[bench]["ca-delta"][unit]
		us, oku := r[bench][store][unit]
		if okc && oku && us > 0 {
			xs = append(xs, ca/us)
		}
	}
	return rawbench.Median(xs)
}

// fmtX writes a "CA's time / ours" ratio: whole numbers from 20x, one
// decimal below, and 1/x where ours is the slower.
func fmtX(r float64) string {
	switch {
	case math.IsNaN(r):
		return "n/a"
	case r < 1:
		return fmt.Sprintf("1/%.1f", 1/r)
	case r >= 20:
		return fmt.Sprintf("%.0fx", r)
	}
	return fmt.Sprintf("%.1fx", r)
}

type whatif struct{ k5, k50 whatifFile }

type whatifRow struct {
	name, label string
	headline    bool // also a row of the headline table
	info        bool // show ours-info's ratio
	target      bool // issue 18's target (10x) applies: ratio in bold
}

var whatifRows = []whatifRow{
	{"ForkRevert", "Fork + Revert", true, false, true},
	{"Fork100AddsRevert", "Fork + 100 pod adds + Revert", true, true, true},
	{"Fork100AddsCommit", "Fork + 100 pod adds + Commit", true, true, true},
	{"Fork100AddsGetRevert", "Fork + 100 pod adds + read the 100 nodes + Revert", true, true, false},
	{"ForkAddNodeRevert", "CA's own loop: Fork, add a node, Fork, add a node, Revert, Revert", true, false, false},
	{"PodChurnInFork", "one pod add and removal in an open fork", false, false, false},
}

type whatifCell struct{ times, wall, cpu string }

func (w whatif) cell(f whatifFile, bench string) whatifCell {
	var c whatifCell
	var ts []string
	for _, s := range []string{"ours", "ours-info", "ca-delta", "ca-basic"} {
		ts = append(ts, rawbench.FmtDur(f.med(bench, s, wallUnit)))
	}
	c.times = strings.Join(ts, " / ")
	c.wall = fmtX(f.ratio(bench, "ours", wallUnit))
	c.cpu = fmtX(f.ratio(bench, "ours", cpuUnit))
	return c
}

func writeWhatif(out io.Writer, w whatif) {
	fmt.Fprintln(out, "| Benchmark | 5k: ours / ours-info / CA delta / CA basic | 5k: delta ÷ ours | 50k: ours / ours-info / CA delta / CA basic | 50k: delta ÷ ours |")
	fmt.Fprintln(out, "|---|---|---|---|---|")
	for _, b := range whatifRows {
		fmt.Fprintf(out, "| %s |", b.name)
		for _, f := range []whatifFile{w.k5, w.k50} {
			c := w.cell(f, b.name)
			full := fmt.Sprintf("%s (%s)", c.wall, c.cpu)
			if b.target {
				full = fmt.Sprintf("**%s** (%s)", c.wall, c.cpu)
			}
			if b.info {
				full += "; ours-info " + fmtX(f.ratio(b.name, "ours-info", wallUnit))
			}
			fmt.Fprintf(out, " %s | %s |", c.times, full)
		}
		fmt.Fprintln(out)
	}
}

func main() {
	table := flag.String("table", "headline", "headline (against upstream, then the what-if rows), upstream (the first part alone) or whatif (the what-if table)")
	raw := flag.String("raw", "", "raw output of the run (bench/run.sh's raw-DATE.txt)")
	raw50k := flag.String("raw50k", "", "raw file for the 50,000-node rows when -raw has none")
	wi5 := flag.String("whatif5k", "", "raw output of the what-if harness at 5,000 nodes")
	wi50 := flag.String("whatif50k", "", "raw output of the what-if harness at 50,000 nodes")
	rel := flag.String("rel", ".", "directory of the document the table goes into (links are relative to it)")
	flag.Parse()
	var w whatif
	var err error
	if w.k5, err = loadWhatif(*wi5, *rel); err != nil {
		fatal(err)
	}
	if w.k50, err = loadWhatif(*wi50, *rel); err != nil {
		fatal(err)
	}
	switch *table {
	case "whatif":
		if w.k5.link == "" || w.k50.link == "" {
			fatal(fmt.Errorf("-table whatif needs -whatif5k and -whatif50k"))
		}
		writeWhatif(os.Stdout, w)
	case "headline", "upstream":
		run, err := load(*raw, *rel)
		if err != nil {
			fatal(err)
		}
		if run.link == "" || len(run.d) == 0 {
			fatal(fmt.Errorf("-raw %q: no benchmark results", *raw))
		}
		big, err := load(*raw50k, *rel)
		if err != nil {
			fatal(err)
		}
		var wi [][4]string
		if *table == "headline" {
			wi = whatifHeadline(w)
		}
		writeHeadline(os.Stdout, headline(run, big), wi)
	default:
		fatal(fmt.Errorf("-table %q: want headline, upstream or whatif", *table))
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "numbers:", err)
	os.Exit(1)
}
