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
