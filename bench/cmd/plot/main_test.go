package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/schedcache/schedcache/bench/internal/rawbench"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// parse keeps only impl= benchmarks, strips -GOMAXPROCS, and keeps every
// repetition; value is the median.
func TestParseAndMedian(t *testing.T) {
	raw := `goos: linux
cpu: AMD EPYC
BenchmarkW2/impl=schedcache/nodes=5k-2   	 1000	 2000 ns/op	 500000 events/s
BenchmarkW2/impl=schedcache/nodes=5k-2   	 1000	 4000 ns/op	 250000 events/s
BenchmarkW2/impl=schedcache/nodes=5k-2   	 1000	 3000 ns/op	 300000 events/s
BenchmarkW2/impl=upstream/nodes=5k-2     	 1000	 9000 ns/op	 111111 events/s
BenchmarkOther-2                          	 1000	 1 ns/op
PASS
`
	d := data{}
	if err := rawbench.Parse(strings.NewReader(raw), d); err != nil {
		t.Fatal(err)
	}
	if len(d) != 1 {
		t.Fatalf("want one key, got %v", d)
	}
	if got := d.Value("BenchmarkW2/nodes=5k", "schedcache", "events/s"); got != 300000 {
		t.Fatalf("median events/s = %v, want 300000", got)
	}
	if got := d.Value("BenchmarkW2/nodes=5k", "upstream", "ns/op"); got != 9000 {
		t.Fatalf("upstream ns/op = %v, want 9000", got)
	}
}

// shareTable divides each writer's rate with R readers by its own rate with
// none, for both caches and for the cache-less writer; without
// BenchmarkW1CPUShare lines it writes nothing.
func TestShareTable(t *testing.T) {
	raw := `BenchmarkW1/impl=schedcache/nodes=5k/readers=0-2 	 100	 1 ns/op	 1000 writer-events/s
BenchmarkW1/impl=schedcache/nodes=5k/readers=4-2 	 100	 1 ns/op	 500 writer-events/s
BenchmarkW1/impl=upstream/nodes=5k/readers=0-2 	 100	 1 ns/op	 2000 writer-events/s
BenchmarkW1/impl=upstream/nodes=5k/readers=4-2 	 100	 1 ns/op	 20 writer-events/s
`
	d := data{}
	if err := rawbench.Parse(strings.NewReader(raw), d); err != nil {
		t.Fatal(err)
	}
	if got := shareTable(d, "5k"); got != "" {
		t.Fatalf("without W1CPUShare lines: got %q, want nothing", got)
	}
	more := `BenchmarkW1CPUShare/impl=none/nodes=5k/readers=0-2 	 100	 1 ns/op	 400 writer-units/s
BenchmarkW1CPUShare/impl=none/nodes=5k/readers=4-2 	 100	 1 ns/op	 180 writer-units/s
`
	if err := rawbench.Parse(strings.NewReader(more), d); err != nil {
		t.Fatal(err)
	}
	got := shareTable(d, "5k")
	if !strings.Contains(got, "| R=4 | 1% | 50% | 45% |") {
		t.Fatalf("R=4 row missing or wrong:\n%s", got)
	}
	if !strings.Contains(got, "| R=16 | n/a | n/a | n/a |") {
		t.Fatalf("R=16 row should be n/a without data:\n%s", got)
	}
}

// floorTable puts upstream's W1 reader p99.9 / 100 beside the floor runs.
func TestFloorTable(t *testing.T) {
	raw := `BenchmarkW1/impl=upstream/nodes=5k/readers=4-2 	 100	 1 ns/op	 82000 reader-p99.9-ns
BenchmarkW1/impl=schedcache/nodes=5k/readers=4-2 	 100	 1 ns/op	 40000 reader-p99.9-ns
`
	d := data{}
	if err := rawbench.Parse(strings.NewReader(raw), d); err != nil {
		t.Fatal(err)
	}
	if got := floorTable(d, "5k"); got != "" {
		t.Fatalf("without floor lines: got %q, want nothing", got)
	}
	more := `BenchmarkW1ReadFloor/impl=floor/nodes=5k/variant=plain-slice/readers=4-2 	 100	 1 ns/op	 536 reader-p99.9-ns
BenchmarkW1ReadFloor/impl=floor/nodes=5k/variant=nodeinfo-slice/readers=4-2 	 100	 1 ns/op	 1712 reader-p99.9-ns
BenchmarkW1ReadFloor/impl=floor/nodes=5k/variant=snapshot/readers=4-2 	 100	 1 ns/op	 6464 reader-p99.9-ns
`
	if err := rawbench.Parse(strings.NewReader(more), d); err != nil {
		t.Fatal(err)
	}
	got := floorTable(d, "5k")
	want := "| R=4 | " + rawbench.FmtDur(820) + " | " + rawbench.FmtDur(40000) + " | " + rawbench.FmtDur(6464) + " | " + rawbench.FmtDur(1712) + " | " + rawbench.FmtDur(536) + " |"
	if !strings.Contains(got, want) {
		t.Fatalf("R=4 row: want %q in\n%s", want, got)
	}
}

// scaleTable puts each implementation's and the floor's 5k and 50k medians
// side by side with their ratio and difference.
func TestScaleTable(t *testing.T) {
	raw := `BenchmarkW1/impl=upstream/nodes=5k/readers=0-2 	 100	 6000 ns/op
BenchmarkW1/impl=upstream/nodes=50k/readers=0-2 	 100	 9000 ns/op
BenchmarkW1/impl=schedcache/nodes=5k/readers=0-2 	 100	 8000 ns/op
BenchmarkW1/impl=schedcache/nodes=50k/readers=0-2 	 100	 12000 ns/op
BenchmarkW2/impl=schedcache/nodes=5k-2 	 100	 3000 ns/op
BenchmarkW2/impl=upstream/nodes=5k-2 	 100	 9000 ns/op
BenchmarkW2/impl=upstream/nodes=50k-2 	 100	 7500 ns/op
`
	d := data{}
	if err := rawbench.Parse(strings.NewReader(raw), d); err != nil {
		t.Fatal(err)
	}
	if got := scaleTable(d); got != "" {
		t.Fatalf("without floor lines: got %q, want nothing", got)
	}
	more := `BenchmarkScaleFloor/impl=floor/workload=W1/nodes=5k-2 	 100	 1600 ns/op
BenchmarkScaleFloor/impl=floor/workload=W1/nodes=5k-2 	 100	 1800 ns/op
BenchmarkScaleFloor/impl=floor/workload=W1/nodes=5k-2 	 100	 9999 ns/op
BenchmarkScaleFloor/impl=floor/workload=W1/nodes=50k-2 	 100	 2400 ns/op
`
	if err := rawbench.Parse(strings.NewReader(more), d); err != nil {
		t.Fatal(err)
	}
	got := scaleTable(d)
	for _, want := range []string{
		"| W1 writer, no readers | upstream | 6µs | 9µs | 1.50x | 3µs |",
		"| W1 writer, no readers | schedcache | 8µs | 12µs | 1.50x | 4µs |",
		"| W1 writer, no readers | floor | 1.8µs | 2.4µs | 1.33x | 600ns |", // median of three at 5k
		"| W2 informer churn | schedcache | 3µs | n/a | n/a | n/a |",
		"| W2 informer churn | upstream | 9µs | 7.5µs | 0.83x | -1.5µs |", // a faster 50k
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("missing %q in\n%s", want, got)
		}
	}
}
