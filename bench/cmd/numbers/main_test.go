package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func write(t *testing.T, dir, name, text string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The headline rows take the run's medians, link the run's file relative to
// the document, take the 50k rows from the other file when the run has
// none, and say "not measured" where no file has them.
func TestHeadlineSources(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "bench"), 0o755); err != nil {
		t.Fatal(err)
	}
	run := write(t, dir, "bench/raw-run.txt", `BenchmarkW3/impl=upstream/nodes=5k/schedulers=4-2 	 10	 1 ns/op	 1000 pods/s
BenchmarkW3/impl=schedcache/nodes=5k/schedulers=4-2 	 10	 1 ns/op	 50000 pods/s
BenchmarkW3/impl=schedcache/nodes=5k/schedulers=4-2 	 10	 1 ns/op	 56000 pods/s
BenchmarkW3/impl=schedcache/nodes=5k/schedulers=4-2 	 10	 1 ns/op	 90000 pods/s
`)
	big := write(t, dir, "bench/raw-big.txt", `BenchmarkW2/impl=upstream/nodes=50k-2 	 10	 7000 ns/op	 140000 events/s
BenchmarkW2/impl=schedcache/nodes=50k-2 	 10	 2000 ns/op	 420000 events/s
`)
	rs, err := load(run, dir)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := load(big, dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	writeHeadline(&b, headline(rs, bs), whatifHeadline(whatif{}))
	out := b.String()
	for _, want := range []string{
		"| scheduled pods/s, 4 schedulers on snapshots (W3) | 56x (56k/s vs 1k/s) | [raw-run.txt](bench/raw-run.txt) |",
		"| 50,000 nodes (1.5 million pods): informer events/s (W2) | 3x (420k/s vs 140k/s) | [raw-big.txt](bench/raw-big.txt) |",
		"| Fork + Revert | not measured | not measured | (no raw file with these benchmarks) |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing row %q in\n%s", want, out)
		}
	}
	// Without the 50k file its rows have no source.
	b.Reset()
	writeHeadline(&b, headline(rs, source{d: data{}}), nil)
	if want := "| 50,000 nodes (1.5 million pods): informer events/s (W2) | not measured | (no raw file with these benchmarks) |"; !strings.Contains(b.String(), want) {
		t.Errorf("missing row %q in\n%s", want, b.String())
	}
}

// A what-if ratio is CA delta / ours within a round, then the median over
// rounds (not the ratio of the medians).
func TestWhatifRatioPerRound(t *testing.T) {
	raw := `# round 1
BenchmarkForkRevert/nodes=5000/store=ca-delta-2 	 100	 400 ns/op	 400 cpu-ns/op	 400 region-ns/op
BenchmarkForkRevert/nodes=5000/store=ours-2     	 100	 10 ns/op	 10 cpu-ns/op	 10 region-ns/op
PASS
# round 2
BenchmarkForkRevert/nodes=5000/store=ca-delta-2 	 100	 600 ns/op	 600 cpu-ns/op	 600 region-ns/op
BenchmarkForkRevert/nodes=5000/store=ours-2     	 100	 30 ns/op	 30 cpu-ns/op	 30 region-ns/op
PASS
# round 3
BenchmarkForkRevert/nodes=5000/store=ca-delta-2 	 100	 500 ns/op	 500 cpu-ns/op	 500 region-ns/op
BenchmarkForkRevert/nodes=5000/store=ours-2     	 100	 20 ns/op	 20 cpu-ns/op	 20 region-ns/op
PASS
`
	r, err := parseRounds(strings.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	f := whatifFile{r: r}
	// Per round 40, 20, 25: median 25; the medians' ratio would be 500/20.
	if got := f.ratio("ForkRevert", "ours", wallUnit); got != 25 {
		t.Fatalf("ratio = %v, want 25", got)
	}
	if got := f.med("ForkRevert", "ca-delta", wallUnit); got != 500 {
		t.Fatalf("median = %v, want 500", got)
	}
}

func TestFmtX(t *testing.T) {
	for _, c := range []struct {
		r    float64
		want string
	}{{38.9, "39x"}, {19.24, "19.2x"}, {4.0, "4.0x"}, {1 / 1.32, "1/1.3"}} {
		if got := fmtX(c.r); got != c.want {
			t.Errorf("fmtX(%v) = %q, want %q", c.r, got, c.want)
		}
	}
}

// W5 runs on schedcache only: its row gives schedcache's storm=on/off ratio
// and says why upstream has none, whether or not the raw file holds
// upstream figures (a run against an older upstream did). The Cycle row
// names the calls BenchmarkCycle makes.
func TestW5AndCycleRows(t *testing.T) {
	dir := t.TempDir()
	ours := `BenchmarkW5/impl=schedcache/nodes=5k/storm=on-2 	 1	 2000000000 ns/op	 2000000 w2-batch-p99-ns
BenchmarkW5/impl=schedcache/nodes=5k/storm=off-2 	 1	 2000000000 ns/op	 1000000 w2-batch-p99-ns
BenchmarkCycle/impl=upstream/nodes=5k-2 	 1000	 10000 ns/op
BenchmarkCycle/impl=schedcache/nodes=5k-2 	 1000	 5000 ns/op
`
	older := ours + `BenchmarkW5/impl=upstream/nodes=5k/storm=on-2 	 1	 2000000000 ns/op	 30000000 w2-batch-p99-ns
BenchmarkW5/impl=upstream/nodes=5k/storm=off-2 	 1	 2000000000 ns/op	 1000000 w2-batch-p99-ns
`
	for name, text := range map[string]string{"ours-only": ours, "with-upstream": older} {
		s, err := load(write(t, dir, name+".txt", text), dir)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		writeHeadline(&b, headline(s, source{d: data{}}), nil)
		out := b.String()
		for _, want := range []string{
			"| other operations' p99 during a 10,000-pod expiry storm, vs without (W5) | 2x (2ms vs 1ms); upstream: n/a (upstream v1.37 has no assumed-pod expiry) |",
			"| one synchronous Assume+Add+Remove cycle, each call publishing a snapshot | 0.5x (5µs vs 10µs) |",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("%s: missing row %q in\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "FinishBinding") || strings.Contains(out, "30x") {
			t.Errorf("%s: FinishBinding or upstream's W5 figure in\n%s", name, out)
		}
	}
}
