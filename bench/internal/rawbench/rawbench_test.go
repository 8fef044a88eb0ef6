package rawbench

import (
	"math"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestParseAndMedian(t *testing.T) {
	raw := `goos: linux
BenchmarkW2/impl=schedcache/nodes=5k-2   100   3000 ns/op   300000 events/s
BenchmarkW2/impl=schedcache/nodes=5k-2   100   5000 ns/op   200000 events/s
BenchmarkW2/impl=schedcache/nodes=5k-2   100   4000 ns/op   250000 events/s
BenchmarkW2/impl=upstream/nodes=5k-2     100   9000 ns/op
BenchmarkNoImpl-2                        100   1 ns/op
--- BENCH: BenchmarkW2
PASS
`
	d := Data{}
	if err := Parse(strings.NewReader(raw), d); err != nil {
		t.Fatal(err)
	}
	if got := d.Value("BenchmarkW2/nodes=5k", "schedcache", "ns/op"); got != 4000 {
		t.Errorf("median ns/op = %v, want 4000", got)
	}
	if got := d.Value("BenchmarkW2/nodes=5k", "upstream", "ns/op"); got != 9000 {
		t.Errorf("upstream = %v", got)
	}
	if _, ok := d["BenchmarkNoImpl"]; ok {
		t.Error("a result without impl=... is not kept")
	}
	if !math.IsNaN(d.Value("BenchmarkW2/nodes=5k", "upstream", "events/s")) {
		t.Error("an absent unit is NaN")
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("even median = %v", got)
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{FmtDur(30), "30ns"}, {FmtDur(7260), "7.26µs"}, {FmtDur(10.3e6), "10.3ms"}, {FmtDur(2e9), "2s"}, {FmtDur(math.NaN()), "n/a"},
		{FmtRate(720), "720/s"}, {FmtRate(57500), "57.5k/s"}, {FmtRate(1.2e6), "1.2M/s"}, {FmtRate(math.NaN()), "n/a"},
		{FmtMiB(67.6), "67.6 MiB"}, {FmtMiB(math.NaN()), "n/a"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
