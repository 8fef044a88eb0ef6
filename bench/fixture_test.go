package bench

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/hist"
	"github.com/schedcache/schedcache/workload"
)

var (
	flag50k        = flag.Bool("bench.50k", false, "also run the 50,000-node variants of W1, W2 and W4 (slow, several GiB)")
	flagReaders    = flag.String("bench.readers", "0,1,4,16", "W1: the reader counts to run (comma-separated; the device mode of run.sh runs 0..15)")
	flagSchedulers = flag.String("bench.schedulers", "1,2,4", "W3: the scheduler counts to run (comma-separated; the device mode of run.sh runs 1..15)")
	flagSettle     = flag.Bool("bench.settle", true, "start every timed region from settleHeap; false: from a plain runtime.GC(), as before 2026-11-24 (to measure what settling changes)")
)

// clusters are built once per process and shared read-only.
var (
	clustersMu sync.Mutex
	clusters   = map[workload.ClusterSpec]*workload.Cluster{}
)

func clusterFor(spec workload.ClusterSpec) *workload.Cluster {
	clustersMu.Lock()
	defer clustersMu.Unlock()
	c, ok := clusters[spec]
	if !ok {
		c = workload.Build(spec)
		clusters[spec] = c
	}
	return c
}

// specs returns the cluster sizes a benchmark runs: the standard 5k
// cluster, plus the 50k one when with50k and -bench.50k are set.
func specs(with50k bool) []workload.ClusterSpec {
	s := []workload.ClusterSpec{workload.Standard()}
	if with50k && *flag50k {
		s = append(s, workload.Standard50k())
	}
	return s
}

// counts parses a comma-separated list of non-negative counts (a flag of
// this file); a malformed list fails the benchmark.
func counts(b *testing.B, name, list string) []int {
	var out []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 0 {
			b.Fatalf("-%s: %q is not a list of non-negative counts", name, list)
		}
		out = append(out, n)
	}
	return out
}

func sizeName(spec workload.ClusterSpec) string {
	if spec.Nodes%1000 == 0 {
		return fmt.Sprintf("%dk", spec.Nodes/1000)
	}
	return fmt.Sprint(spec.Nodes)
}

// fixture is a loaded cache plus the workload streams that continue from
// its state. Loading is setup: one fixture is kept alive at a time and
// reused by consecutive sub-benchmarks with the same key (the same
// implementation, workload family and options; e.g. every readers=R of W1
// and every -count repetition), so each (impl, workload) loads the cluster
// once per process. Streams always continue from the cache's state, so their
// events stay valid across reuse.
type fixture struct {
	key     string
	impl    Impl
	cluster *workload.Cluster
	rng     *rand.Rand
	churn   *workload.InformerChurn // W1 (W1Mix), W2, W5 (W2Mix)
	nodes   *workload.NodeChurn     // W4
	seq     int                     // names of pods the benchmarks create
	pool    []*v1.Pod               // BenchmarkCycle, W5 storm pods
}

var current *fixture

// getFixture returns the loaded fixture for key, building it (and releasing
// the previous one) if needed. Callers reset the timer after their own
// setup.
func getFixture(b *testing.B, impl, family string, spec workload.ClusterSpec, o Options) *fixture {
	b.Helper()
	key := fixtureKey(impl, family, spec, o)
	if current != nil && current.key == key {
		return current
	}
	releaseFixture()
	current = loadFixture(b, impl, family, spec, o)
	return current
}

func fixtureKey(impl, family string, spec workload.ClusterSpec, o Options) string {
	return fmt.Sprintf("%s/%s/%d/%v/%v", impl, family, spec.Nodes, o.TTL, o.Period)
}

// loadFixture builds a fixture; the caller closes its impl.
func loadFixture(b *testing.B, impl, family string, spec workload.ClusterSpec, o Options) *fixture {
	b.Helper()
	key := fixtureKey(impl, family, spec, o)
	c := clusterFor(spec)
	im, err := NewImpl(impl, o)
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if err := Load(im, c); err != nil {
		im.Close()
		b.Fatalf("load: %v", err)
	}
	b.Logf("loaded %s: %d nodes + %d pods in %v", key, len(c.Nodes), len(c.Pods), time.Since(t0).Round(time.Millisecond))
	f := &fixture{key: key, impl: im, cluster: c, rng: workload.NewRand(int64(len(family)*7919 + spec.Nodes))}
	runtime.GC()
	return f
}

// releaseFixture closes the current fixture.
//
// The released heap is returned to the OS here, during setup: left to the
// background scavenger, returning a 50k fixture's gigabytes ran inside the
// next benchmark's timed region, on one of its two Ps, and so charged
// whichever implementation ran next for the previous one's garbage.
func releaseFixture() {
	if current != nil {
		current.impl.Close()
		current = nil
		debug.FreeOSMemory() // a full GC, then every free page back to the OS
	}
}

// settleHeap collects garbage and leaves the heap as a process that has
// run for a while has it: the free pages the next allocations will take are
// resident. Call it with the timer stopped, right before a timed region.
//
// The runtime's page allocator hands out the lowest-addressed free pages
// first, whether or not it had returned them to the OS (releaseFixture's
// FreeOSMemory, the background scavenger), and a returned page faults on
// its first touch (5-12 µs here). Which pages are returned depends on what
// ran before, so without this one implementation's timed region could take
// faults that the other's did not: schedcache's Cycle, loaded after
// upstream's fixture was released, took 0.07-0.32 faults per cycle and
// upstream's none (docs/bench/optimizations.md, row 42). settleHeap takes
// the lowest free pages with one-page allocations (so they fill the
// smallest holes first), writes to every OS page of them, and frees them,
// up to what the heap may grow before its next collection (at most
// settleCap).
func settleHeap() {
	runtime.GC()
	if !*flagSettle {
		return
	}
	touchFreePages(settleBudget())
	runtime.GC()
}

const (
	settlePage = 8192    // a size class of one object per one-page span
	settleCap  = 1 << 30 // bytes
)

// settleBudget is what the heap may allocate before its next collection,
// less a tenth (so that touching it does not start one), at most settleCap.
func settleBudget() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	goal, live := s[0].Value.Uint64(), s[1].Value.Uint64()
	if goal <= live {
		return 0
	}
	return min((goal-live)/10*9, settleCap)
}

// touchFreePages allocates n bytes in one-page objects, writes to each OS
// page of them and drops them.
func touchFreePages(n uint64) {
	pages := make([][]byte, n/settlePage)
	for i := range pages {
		p := make([]byte, settlePage)
		for j := 0; j < len(p); j += 4096 {
			p[j] = 1
		}
		pages[i] = p
	}
	runtime.KeepAlive(pages)
}

// reportHist reports the percentiles of h as <prefix>-p50-ns etc.
func reportHist(b *testing.B, prefix string, h *hist.Histogram) {
	if h.Count() == 0 {
		return
	}
	b.ReportMetric(float64(h.Quantile(0.50)), prefix+"-p50-ns")
	b.ReportMetric(float64(h.Quantile(0.99)), prefix+"-p99-ns")
	b.ReportMetric(float64(h.Quantile(0.999)), prefix+"-p99.9-ns")
	b.ReportMetric(float64(h.Max()), prefix+"-max-ns")
}

func merge(hs []*hist.Histogram) *hist.Histogram {
	out := hist.New()
	for _, h := range hs {
		out.Merge(h)
	}
	return out
}

// podRequest returns the cpu (millicores) and memory (bytes) a scheduler
// reserves for pod: the sum of its containers' requests plus overhead, or the
// non-zero defaults when it requests nothing. A scheduling heuristic, the
// same for both implementations.
func podRequest(p *v1.Pod) (cpu, mem int64) {
	for i := range p.Spec.Containers {
		r := p.Spec.Containers[i].Resources.Requests
		if q, ok := r[v1.ResourceCPU]; ok {
			cpu += q.MilliValue()
		}
		if q, ok := r[v1.ResourceMemory]; ok {
			mem += q.Value()
		}
	}
	if q, ok := p.Spec.Overhead[v1.ResourceCPU]; ok {
		cpu += q.MilliValue()
	}
	if q, ok := p.Spec.Overhead[v1.ResourceMemory]; ok {
		mem += q.Value()
	}
	if cpu == 0 {
		cpu = 100
	}
	if mem == 0 {
		mem = 200 << 20
	}
	return cpu, mem
}
