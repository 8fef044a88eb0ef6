// Package rawbench reads raw `go test -bench` output and formats its
// figures, for the bench module's report commands (cmd/plot draws the
// charts, cmd/numbers writes the tables): one parser, one median and one
// number format, so that a figure reads the same in every page.
package rawbench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Data holds the samples of a raw file: Data[key][impl][unit], key being
// the benchmark name without its impl=... element and -GOMAXPROCS suffix.
type Data map[string]map[string]map[string][]float64

var (
	procSuffix = regexp.MustCompile(`-\d+$`)
	implElem   = regexp.MustCompile(`/impl=([^/]+)`)
)

// Fields returns the name (without the -GOMAXPROCS suffix) and the
// value/unit pairs of a benchmark result line, ok false for any other
// line.
func Fields(line string) (name string, pairs [][2]string, ok bool) {
	f := strings.Fields(line)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
		return "", nil, false
	}
	if _, err := strconv.Atoi(f[1]); err != nil {
		return "", nil, false
	}
	for i := 2; i+1 < len(f); i += 2 {
		pairs = append(pairs, [2]string{f[i], f[i+1]})
	}
	return procSuffix.ReplaceAllString(f[0], ""), pairs, true
}

// Parse adds to d the results of r whose names have an impl=... element.
func Parse(r io.Reader, d Data) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, pairs, ok := Fields(sc.Text())
		if !ok {
			continue
		}
		m := implElem.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		key := implElem.ReplaceAllString(name, "")
		for _, p := range pairs {
			v, err := strconv.ParseFloat(p[0], 64)
			if err != nil {
				continue
			}
			if d[key] == nil {
				d[key] = map[string]map[string][]float64{}
			}
			if d[key][m[1]] == nil {
				d[key][m[1]] = map[string][]float64{}
			}
			d[key][m[1]][p[1]] = append(d[key][m[1]][p[1]], v)
		}
	}
	return sc.Err()
}

// Median returns the median of xs, NaN when empty.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// Value returns the median of key/impl/unit, NaN when absent.
func (d Data) Value(key, impl, unit string) float64 { return Median(d[key][impl][unit]) }

// FmtDur formats nanoseconds: 30ns, 7.26µs, 10.3ms, 1.2s; n/a for NaN.
func FmtDur(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "n/a"
	case ns < 1e3:
		return fmt.Sprintf("%.0fns", ns)
	case ns < 1e6:
		return fmt.Sprintf("%.3g", ns/1e3) + "µs"
	case ns < 1e9:
		return fmt.Sprintf("%.3g", ns/1e6) + "ms"
	}
	return fmt.Sprintf("%.3g", ns/1e9) + "s"
}

// FmtRate formats a rate: 720/s, 57.5k/s, 1.2M/s; n/a for NaN.
func FmtRate(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v < 1e3:
		return fmt.Sprintf("%.3g", v) + "/s"
	case v < 1e6:
		return fmt.Sprintf("%.3g", v/1e3) + "k/s"
	}
	return fmt.Sprintf("%.3g", v/1e6) + "M/s"
}

// FmtMiB formats mebibytes: 67.6 MiB; n/a for NaN.
func FmtMiB(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.1f MiB", v)
}
