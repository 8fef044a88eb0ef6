package bench

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedcache/schedcache/workload"
)

var (
	flagWindow = flag.Duration("bench.window", 10*time.Second,
		"BenchmarkSustained: the timed length of every window (a quoted figure needs >= 10s)")
	flagRounds = flag.Int("bench.rounds", 4,
		"BenchmarkSustained: rounds; each runs every workload on both implementations, in Impls' order in odd rounds and reversed in even ones")
	flagMinGC = flag.Int("bench.mingc", 3,
		"BenchmarkSustained: a window goes on past -bench.window until it saw this many GC cycles, up to -bench.maxwindow")
	flagMaxWindow = flag.Duration("bench.maxwindow", 60*time.Second,
		"BenchmarkSustained: the longest timed window -bench.mingc may ask for")
	flagSustained = flag.String("bench.sustained", "W1/readers=0,W1/readers=4,W2,W3/schedulers=4",
		"BenchmarkSustained: the workloads, comma-separated: W1/readers=R, W2, W3/schedulers=S")
)

// BenchmarkSustained measures throughputs the way docs/BENCHMARKS.md may
// quote them: each workload runs for a window of at least -bench.window of
// timed work (10 s by default) on each implementation, both in this
// process, in -bench.rounds rounds whose implementation order alternates.
// Both implementations' fixtures of a workload stay loaded during its
// rounds (one workload at a time), so that the rounds follow one another
// without reloading. Per window it prints the rate (W1:
// writer events/s, W2: events/s, W3: pods/s), the process's CPU seconds
// per second of the timed work, the garbage collections the window saw and
// the load average at its end; per round the ratio schedcache/upstream, and
// per workload the median ratio. Run it with -benchtime 1x: one call runs
// every round (bench/run.sh sustained).
//
// A window goes on past -bench.window until the process saw -bench.mingc
// GC cycles (3 by default; at most -bench.maxwindow of timed work), so
// that each figure includes the collector's share.
//
// A window is a sequence of timed chunks with untimed setup between them,
// so that the generated work never holds the whole window in memory: W1
// and W2 apply chunks of generated events (generation untimed); W3 runs
// its loop on chunks of about 2 s of pods (placed pods are removed,
// untimed, after each chunk, which keeps the cluster's size). The GC count
// covers the whole window, setup included.
func BenchmarkSustained(b *testing.B) {
	works := strings.Split(*flagSustained, ",")
	for _, w := range works {
		if _, _, err := parseSustained(w); err != nil {
			b.Fatal(err)
		}
	}
	if *flagRounds < 1 || *flagWindow <= 0 {
		b.Fatalf("-bench.rounds %d, -bench.window %v: both must be positive", *flagRounds, *flagWindow)
	}
	out := io.Writer(os.Stdout)
	spec := workload.Standard()
	fmt.Fprintf(out, "# sustained: nodes=%s window=%v rounds=%d workloads=%s; load average at start: %s\n",
		sizeName(spec), *flagWindow, *flagRounds, *flagSustained, loadAvg())
	type key struct{ work, impl string }
	rates := map[key][]float64{}
	releaseFixture() // the benchmarks' shared fixture; this one keeps its own
	for _, w := range works {
		family, _, _ := parseSustained(w)
		fixtures := map[string]*fixture{}
		for _, impl := range Impls {
			fixtures[impl] = loadFixture(b, impl, family, spec, Options{})
		}
		for round := range *flagRounds {
			order := slices.Clone(Impls)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, impl := range order {
				r, err := sustainWindow(b, fixtures[impl], w)
				if err != nil {
					b.Fatalf("round %d %s impl=%s: %v", round+1, w, impl, err)
				}
				rates[key{w, impl}] = append(rates[key{w, impl}], r.rate)
				fmt.Fprintf(out, "round=%d %-18s impl=%-10s %12.0f %s  timed=%5.1fs wall=%5.1fs cpu=%.2f cpu-s/s  %8.0f per cpu-s  gc=%d  load=%s\n",
					round+1, w, impl, r.rate, r.unit, r.timed.Seconds(), r.wall.Seconds(), r.cpu.Seconds()/r.timed.Seconds(),
					float64(r.ops)/max(r.cpu.Seconds(), 1e-9), r.gcs, loadAvg())
			}
		}
		for _, f := range fixtures {
			f.impl.Close()
		}
		debug.FreeOSMemory()
	}
	fmt.Fprintf(out, "# ratio schedcache/upstream per round, then the median\n")
	for _, w := range works {
		up, sc := rates[key{w, Upstream}], rates[key{w, SchedCache}]
		ratios := make([]float64, len(up))
		var cells []string
		for i := range up {
			ratios[i] = sc[i] / up[i]
			cells = append(cells, fmt.Sprintf("%.3f", ratios[i]))
		}
		med := median(ratios)
		fmt.Fprintf(out, "ratio %-18s rounds: %s  median: %.3fx  (median rates: schedcache %.0f, upstream %.0f)\n",
			w, strings.Join(cells, " "), med, median(sc), median(up))
		b.ReportMetric(med, strings.NewReplacer("/", "-", "=", "").Replace(w)+"-x")
	}
}

// sustained is one window's measure.
type sustained struct {
	rate        float64 // ops per second of timed work
	unit        string
	ops         int
	timed, wall time.Duration // timed work; the whole window, setup included
	cpu         time.Duration // the process's CPU time during the timed work
	gcs         uint64        // GC cycles during the window
}

// parseSustained reads a -bench.sustained workload: its family and count.
func parseSustained(w string) (family string, n int, err error) {
	switch {
	case w == "W2":
		return "W2", 0, nil
	case strings.HasPrefix(w, "W1/readers="):
		_, err = fmt.Sscanf(w, "W1/readers=%d", &n)
		return "W1", n, err
	case strings.HasPrefix(w, "W3/schedulers="):
		_, err = fmt.Sscanf(w, "W3/schedulers=%d", &n)
		if err == nil && n < 1 {
			err = fmt.Errorf("W3 needs at least one scheduler")
		}
		return "W3", n, err
	}
	return "", 0, fmt.Errorf("-bench.sustained: unknown workload %q (W1/readers=R, W2, W3/schedulers=S)", w)
}

// sustainWindow runs workload w on f for one window.
func sustainWindow(b *testing.B, f *fixture, w string) (sustained, error) {
	family, n, err := parseSustained(w)
	if err != nil {
		return sustained{}, err
	}
	window := *flagWindow
	var r sustained
	var pool *w1Readers
	if family == "W1" {
		pool = newW1Readers(b, f.impl, n)
	}
	settleHeap()
	gc0, start := gcCycles(), time.Now()
	// more reports whether the window goes on after timed work: until
	// window, then until it saw -bench.mingc GC cycles or reached
	// -bench.maxwindow.
	more := func(timed time.Duration) bool {
		return timed < window || timed < *flagMaxWindow && gcCycles()-gc0 < uint64(*flagMinGC)
	}
	if pool != nil {
		pool.start()
	}
	switch family {
	case "W1", "W2":
		if f.churn == nil {
			if family == "W1" {
				f.churn = workload.NewInformerChurnMix(f.cluster, 101, workload.W1Mix())
			} else {
				f.churn = workload.NewInformerChurn(f.cluster, 202)
			}
		}
		r.unit = map[string]string{"W1": "writer-events/s", "W2": "events/s"}[family]
		for more(r.timed) {
			events := f.churn.Generate(20000) // untimed
			c0, t0 := takeCPU(), time.Now()
			for _, ev := range events {
				if family == "W1" {
					err = Apply(f.impl, ev)
				} else {
					err = f.impl.Submit(ev)
				}
				if err != nil {
					break
				}
			}
			if err == nil && family == "W2" {
				err = f.impl.Flush()
			}
			r.timed += time.Since(t0)
			r.cpu += cpuSince(c0)
			r.ops += len(events)
			if err != nil {
				break
			}
		}
	case "W3":
		r.unit = "pods/s"
		chunk := 2000
		for more(r.timed) {
			var c0 cpuMeter
			out, werr := runW3(f, n, chunk, func() { c0 = takeCPU() }, func() { r.cpu += cpuSince(c0) })
			if werr != nil {
				err = werr
				break
			}
			r.timed += out.elapsed
			r.ops += int(out.scheduled)
			// The next chunk takes about 2 s at this chunk's rate.
			chunk = min(max(int(2*float64(out.scheduled)/out.elapsed.Seconds()), 500), 200000)
		}
	}
	if pool != nil {
		if perr := pool.stop(); err == nil {
			err = perr
		}
	}
	r.wall, r.gcs = time.Since(start), gcCycles()-gc0
	r.rate = float64(r.ops) / r.timed.Seconds()
	return r, err
}

// gcCycles returns the number of GC cycles completed so far.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// loadAvg returns the machine's 1, 5 and 15 minute load averages as
// /proc/loadavg has them ("n/a" elsewhere).
func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "n/a"
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		return "n/a"
	}
	return strings.Join(f[:3], ",")
}

// median returns the median of xs (0 for none).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
