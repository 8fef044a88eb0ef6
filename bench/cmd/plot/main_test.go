package main

import (
	"strings"
	"testing"

	"go.uber.org/goleak"
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
	if err := parse(strings.NewReader(raw), d); err != nil {
		t.Fatal(err)
	}
	if len(d) != 1 {
		t.Fatalf("want one key, got %v", d)
	}
	if got := d.value("BenchmarkW2/nodes=5k", "schedcache", "events/s"); got != 300000 {
		t.Fatalf("median events/s = %v, want 300000", got)
	}
	if got := d.value("BenchmarkW2/nodes=5k", "upstream", "ns/op"); got != 9000 {
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
	if err := parse(strings.NewReader(raw), d); err != nil {
		t.Fatal(err)
	}
	if got := shareTable(d, "5k"); got != "" {
		t.Fatalf("without W1CPUShare lines: got %q, want nothing", got)
	}
	more := `BenchmarkW1CPUShare/impl=none/nodes=5k/readers=0-2 	 100	 1 ns/op	 400 writer-units/s
BenchmarkW1CPUShare/impl=none/nodes=5k/readers=4-2 	 100	 1 ns/op	 180 writer-units/s
`
	if err := parse(strings.NewReader(more), d); err != nil {
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
	if err := parse(strings.NewReader(raw), d); err != nil {
		t.Fatal(err)
	}
	if got := floorTable(d, "5k"); got != "" {
		t.Fatalf("without floor lines: got %q, want nothing", got)
	}
	more := `BenchmarkW1ReadFloor/impl=floor/nodes=5k/variant=plain-slice/readers=4-2 	 100	 1 ns/op	 536 reader-p99.9-ns
BenchmarkW1ReadFloor/impl=floor/nodes=5k/variant=snapshot/readers=4-2 	 100	 1 ns/op	 6464 reader-p99.9-ns
`
	if err := parse(strings.NewReader(more), d); err != nil {
		t.Fatal(err)
	}
	got := floorTable(d, "5k")
	want := "| R=4 | " + fmtDur(820) + " | " + fmtDur(40000) + " | " + fmtDur(6464) + " | " + fmtDur(536) + " |"
	if !strings.Contains(got, want) {
		t.Fatalf("R=4 row: want %q in\n%s", want, got)
	}
}

// scaleTable puts each implementation's and the floor's paired 5k and 50k
// medians side by side with the median and range of the pairs' ratios,
// the difference, and the ratio of the separate runs where they exist.
func TestScaleTable(t *testing.T) {
	raw := `BenchmarkW1/impl=upstream/nodes=5k/readers=0-2 	 100	 6000 ns/op
BenchmarkW1/impl=upstream/nodes=50k/readers=0-2 	 100	 9000 ns/op
BenchmarkW2/impl=schedcache/nodes=5k-2 	 100	 3000 ns/op
`
	d := data{}
	if err := parse(strings.NewReader(raw), d); err != nil {
		t.Fatal(err)
	}
	if got := scaleTable(d); got != "" {
		t.Fatalf("without BenchmarkScale lines: got %q, want nothing", got)
	}
	more := `BenchmarkScale/impl=upstream/workload=W1-2 	 100	 1 ns/op	 7000 50k-ns/event	 1.2 50k/5k	 6000 5k-ns/event
BenchmarkScale/impl=schedcache/workload=W1-2 	 100	 1 ns/op	 10000 50k-ns/event	 1.25 50k/5k	 8000 5k-ns/event
BenchmarkScale/impl=schedcache/workload=W1-2 	 100	 1 ns/op	 12000 50k-ns/event	 1.5 50k/5k	 8000 5k-ns/event
BenchmarkScale/impl=schedcache/workload=W1-2 	 100	 1 ns/op	 9000 50k-ns/event	 1.1 50k/5k	 8200 5k-ns/event
BenchmarkScale/impl=floor/workload=W2-2 	 100	 1 ns/op	 2000 50k-ns/event	 0.8 50k/5k	 2500 5k-ns/event
`
	if err := parse(strings.NewReader(more), d); err != nil {
		t.Fatal(err)
	}
	got := scaleTable(d)
	for _, want := range []string{
		"| W1 writer, no readers | upstream | 6µs | 7µs | 1.20x | 1.20-1.20x | 1µs | 1.50x |",
		// medians of three; the ratio is the pairs' median, not 10000/8000
		"| W1 writer, no readers | schedcache | 8µs | 10µs | 1.25x | 1.10-1.50x | 2µs | n/a |",
		"| W1 writer, no readers | floor | n/a | n/a | n/a | n/a | n/a | n/a |",
		"| W2 informer churn | floor | 2.5µs | 2µs | 0.80x | 0.80-0.80x | -500ns | n/a |", // a faster 50k
		"| W2 informer churn | schedcache | n/a | n/a | n/a | n/a | n/a | n/a |",          // separate runs need both sizes
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("missing %q in\n%s", want, got)
		}
	}
}
