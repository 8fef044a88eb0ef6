package sim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/workload"
)

// hooks carry what a caller injects into a run: the picker (MainWith's
// Options) and tests' reach into it. The zero value does nothing.
type hooks struct {
	// picker chooses nodes; nil: LeastAllocated.
	picker Picker
	// beforeAudit runs once the simulation has stopped, before the audit.
	beforeAudit func(c *schedcache.Cache, truth *Truth)
	// auditNow asks a real-time run for an audit (SIGUSR1 in cmd/loadgen).
	auditNow <-chan struct{}
	// until, if set, keeps a real-time run going past its duration while
	// it returns false for the run's progress, for at most untilLimit
	// more, so that a test's checks do not depend on how much of the
	// churn a loaded machine gets through in the duration. The run's main
	// goroutine calls it at every tick (100 ms) past the duration.
	// Deterministic runs ignore it.
	until func(p runProgress) bool
	// forceProgress: every progress tick draws at once and phase tickers
	// tick every millisecond (progress.go), so that a test sees the live
	// figures without waiting on the wall clock.
	forceProgress bool
}

// runProgress is what hooks.until sees of a real-time run: the churn and
// the informer's counts as of the API server goroutine's last step, and
// the mid-run audits made. A plain value.
type runProgress struct {
	Churn     ChurnCounts
	Informer  InformerCounts
	MidAudits int
}

// untilLimit bounds how long hooks.until keeps a run going past its
// duration: a condition that never holds ends the run then, and the
// test's checks report what is missing.
const untilLimit = 30 * time.Second

// env is what both modes share: the cluster, the cache, the ground truth.
type env struct {
	cl        *workload.Cluster
	c         *schedcache.Cache
	truth     *Truth
	disp      *simDispatcher // BindPod's dispatcher; its inf is set by the run
	inf       *informer      // set by the run
	api       *apiServer     // set by the run
	memo      reqMemo        // owned by the auditor (main goroutine or event loop)
	asyncErrs atomic.Int64   // atomic
	firstErr  atomic.Value   // atomic; error
	warnings  []string       // owned by the run's main goroutine
	// pending are the manifests' pending pods (nil: none), the next to
	// take at pendingNext (clusterfrom.go).
	pending     []*v1.Pod    // immutable length; element i owned by whoever took it
	pendingNext atomic.Int64 // atomic
}

// refuseOverfull says whether a cluster with over of its nodes over-full
// at start is refused: more than 1% of them. The standard generator's tail
// over-fills a few nodes of a large cluster (2 of the 50,000 of seed 1);
// those are reported as a warning.
func refuseOverfull(over, nodes int) bool { return over*100 > nodes }

// setup builds the cluster, starts the cache (with clk when not nil) and
// loads the cluster through the asynchronous path (the nodes with
// synchronous calls in deterministic mode), recording every pod in
// the ground truth. It refuses an over-capacity cluster with a *UsageError.
// The caller closes env.c.
func setup(ctx context.Context, cfg Config, clk schedcache.Clock, prog *progress, rep *Report, groups bool) (*env, error) {
	e := &env{truth: newTruth()}
	e.disp = &simDispatcher{truth: e.truth, latency: cfg.BindLatency, fail: cfg.FailRate, det: cfg.Deterministic,
		r: rand.New(rand.NewPCG(uint64(cfg.Seed), 0xb1))}
	prog.printf("building cluster: %d nodes, %d pods per node or %d in all (seed %d)\n", cfg.Nodes, cfg.PodsPerNode, cfg.InitialPods, cfg.Seed)
	endBuild := prog.phase(elapsed("building cluster"))
	defer endBuild()
	e.cl = buildCluster(cfg)
	e.initLoaded(cfg, prog)
	rep.InitialPods = len(e.cl.Pods)
	// The live heap is measured after each part, so that the report
	// tells the generated objects, the ground truth and the cache apart.
	h0 := liveHeap()
	for _, n := range e.cl.Nodes {
		e.truth.LoadNode(n)
	}
	for _, p := range e.cl.Pods {
		e.truth.Load(p)
	}
	h1 := liveHeap()
	rep.ObjectsHeap, rep.TruthHeap = h0, h1-min(h0, h1)
	endBuild()
	opts := []schedcache.Option{schedcache.WithAsyncErrorHandler(func(ae schedcache.AsyncError) {
		if e.asyncErrs.Add(1) == 1 {
			e.firstErr.Store(ae.Err)
		}
	})}
	opts = append(opts, schedcache.WithDispatcher(e.disp))
	if cfg.AssumeTTL > 0 {
		opts = append(opts, schedcache.WithTTL(cfg.AssumeTTL))
	}
	if cfg.Shards > 0 {
		opts = append(opts, schedcache.WithShards(cfg.Shards))
	}
	if clk != nil {
		opts = append(opts, schedcache.WithClock(clk))
	}
	if groups {
		// The picker schedules pod groups (PodGroupPicker): the cache
		// tracks them, as upstream's with GenericWorkload on.
		opts = append(opts, schedcache.WithPodGroups(true, false))
	}
	// The cache outlives an interrupt: cancelling ctx stops the run, whose
	// report and final audit still need the cache; the run closes it.
	c, err := schedcache.New(context.WithoutCancel(ctx), opts...)
	if err != nil {
		return nil, err
	}
	e.c = c
	t0 := time.Now()
	total := len(e.cl.Nodes) + len(e.cl.Pods)
	prog.printf("loading %d nodes and %d pods\n", len(e.cl.Nodes), len(e.cl.Pods))
	var loaded atomic.Int64 // objects added, every 1024th stored
	endLoad := prog.phase(func(d time.Duration) (float64, string) {
		n := loaded.Load()
		if n == int64(total) {
			return 1, fmt.Sprintf("loading: %d objects added, waiting for the cache (%v)", total, d.Truncate(100*time.Millisecond))
		}
		return float64(n) / float64(total), fmt.Sprintf("loading: %d/%d objects (%.0f/s)", n, total, float64(n)/d.Seconds())
	})
	defer endLoad()
	addNode := c.AddNodeAsync
	if cfg.Deterministic {
		// Nodes one synchronous call at a time: the image summaries of a
		// node that gets no pod are those of the publication that added
		// it, and the asynchronous path batches adds as timing allows.
		// Pods change no image, so they keep the asynchronous path.
		logger := klog.Background()
		addNode = func(n *v1.Node) error { _, err := c.AddNode(logger, n); return err }
	}
	for i, n := range e.cl.Nodes {
		if err := addNode(n); err != nil {
			c.Close()
			return nil, err
		}
		if i%1024 == 0 {
			loaded.Store(int64(i))
		}
	}
	for i, p := range e.cl.Pods {
		if err := c.AddPodAsync(p); err != nil {
			c.Close()
			return nil, err
		}
		if i%1024 == 0 {
			loaded.Store(int64(len(e.cl.Nodes) + i))
		}
	}
	loaded.Store(int64(total))
	if err := c.Sync(); err != nil {
		c.Close()
		return nil, err
	}
	endLoad()
	rep.LoadTime = time.Since(t0)
	rep.LoadRate = float64(total) / rep.LoadTime.Seconds()
	h2 := liveHeap()
	rep.CacheHeap = h2 - min(h1, h2)
	// An over-full cluster is refused before scheduling starts.
	over, first := 0, ""
	snap := c.Snapshot()
	snap.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		if overcommitted(ni) {
			if over == 0 {
				req, alloc := ni.Requested(), ni.Allocatable()
				first = fmt.Sprintf("%s requests %dm cpu, %d MiB for %d pods; allocatable %dm, %d MiB, %d pods",
					ni.Node().Name, req.MilliCPU, req.Memory>>20, ni.NumPods(), alloc.MilliCPU, alloc.Memory>>20, alloc.AllowedPodNumber)
			}
			over++
		}
		return true
	})
	rep.OverfullAtStart = over
	if refuseOverfull(over, cfg.Nodes) && cfg.Loaded == nil { // a loaded cluster is as the files have it
		c.Close()
		return nil, cfg.overfull(over, first)
	}
	if over > 0 {
		e.warnings = append(e.warnings, fmt.Sprintf("%d of %d nodes are over-full at start, %s (first: %s)", over, cfg.Nodes, overfullCause(cfg), first))
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.LoadHeapAlloc = ms.HeapAlloc
	prog.printf("loaded in %v\n", rep.LoadTime.Round(time.Millisecond))
	return e, nil
}

// liveHeap returns the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// buildCluster builds the generated cluster of cfg: with InitialPods, the
// generator's ceil(InitialPods/Nodes) pods per node thinned evenly to that
// total; with Zones, nodes relabelled round-robin into zone-0 … zone-(N-1).
func buildCluster(cfg Config) *workload.Cluster {
	if cfg.Loaded != nil {
		return loadedCluster(cfg)
	}
	ppn := cfg.PodsPerNode
	if cfg.InitialPods > 0 {
		ppn = (cfg.InitialPods + cfg.Nodes - 1) / cfg.Nodes
	}
	cl := workload.Build(workload.ClusterSpec{Nodes: cfg.Nodes, PodsPerNode: ppn, Seed: cfg.Seed, Shape: cfg.Shape})
	if cfg.InitialPods > 0 && len(cl.Pods) > cfg.InitialPods {
		n, want := len(cl.Pods), cfg.InitialPods
		kept := make([]*v1.Pod, 0, want)
		for i, p := range cl.Pods {
			if (i+1)*want/n > i*want/n {
				kept = append(kept, p)
			}
		}
		cl.Pods = kept
	}
	if cfg.Zones > 0 {
		for i, n := range cl.Nodes {
			n.Labels[v1.LabelTopologyZone] = fmt.Sprintf("zone-%d", i%cfg.Zones)
		}
	}
	return cl
}

// finish fills the report's final figures and runs the audit. The cache
// must be quiescent.
func (e *env) finish(cfg Config, rep *Report, h hooks, prog *progress) error {
	if err := e.c.Sync(); err != nil {
		return err
	}
	rep.Shards = cfg.Shards
	if rep.Shards == 0 {
		rep.Shards = max(1, runtime.GOMAXPROCS(0)/2) // the cache's default
	}
	ic := e.inf.counts
	rep.Adds, rep.Removes, rep.NodeUpdates = ic.PodAdds, ic.PodDeletes, ic.NodeAdds+ic.NodeUpdates+ic.NodeDeletes
	rep.Events = ic.PodAdds + ic.PodUpdates + ic.PodDeletes + rep.NodeUpdates
	if rep.Elapsed > 0 {
		rep.PodsPerSec = float64(rep.Scheduled) / rep.Elapsed.Seconds()
		rep.EventsPerSec = float64(rep.Events) / rep.Elapsed.Seconds()
	}
	if h.beforeAudit != nil {
		h.beforeAudit(e.c, e.truth)
	}
	rep.FinalPods, _ = e.c.PodCount()
	rep.FinalNodes = e.c.NodeCount()
	rep.AsyncErrors = e.asyncErrs.Load()
	prog.printf("auditing %d pods, %d nodes\n", e.truth.Len(), e.truth.nodes.Size())
	endAudit := prog.phase(elapsed("auditing"))
	defer endAudit()
	rep.Audit = audit(e.c, e.truth, e.inf, cfg.AssumeTTL > 0, &e.memo)
	endAudit()
	if !e.inf.settled() {
		rep.Audit.OK = false
		rep.Audit.Divergences++
		rep.Audit.Examples = append(rep.Audit.Examples, "the informer has not delivered every event at the end")
	}
	rep.ExpectedPods, rep.ExpectedNodes = rep.Audit.ExpectedPods, rep.Audit.ExpectedNodes
	rep.Informer, rep.Churn = e.inf.counts, e.api.counts
	rep.Lifecycle = e.api.life.report()
	rep.RSS, rep.PeakRSS = readRSS()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.HeapInUse, rep.HeapAlloc = ms.HeapInuse, ms.HeapAlloc
	decisions := rep.Scheduled + rep.FailedBindings + rep.Conflicts + rep.Unschedulable
	switch {
	case rep.Scheduled == 0:
		e.warnings = append(e.warnings, fmt.Sprintf("no pod was scheduled: %d decisions, %d unschedulable, %d failed bindings, %d conflicts",
			decisions, rep.Unschedulable, rep.FailedBindings, rep.Conflicts))
	case rep.Unschedulable*2 > decisions:
		e.warnings = append(e.warnings, fmt.Sprintf("the cluster is nearly full: %d of %d decisions found no node among the %d sampled",
			rep.Unschedulable, decisions, cfg.Sample))
	}
	e.noteLoadedLeft()
	rep.Warnings = e.warnings
	rep.Consistent = rep.Audit.OK && rep.MidAudits.Failed == 0 && rep.FinalPods == rep.ExpectedPods && rep.FinalNodes == rep.ExpectedNodes+rep.Audit.GhostNodes && rep.AsyncErrors == 0
	if fe := e.firstErr.Load(); fe != nil {
		prog.printf("first async error: %v\n", fe)
	}
	return nil
}

// run runs one simulation in the mode cfg selects. cfg must be valid.
func run(ctx context.Context, cfg Config, progressW io.Writer, h hooks) (*Report, error) {
	prog := newProgress(progressW, h.forceProgress)
	if cfg.Deterministic {
		return runDeterministic(ctx, cfg, prog, h)
	}
	return runRealtime(ctx, cfg, prog, h)
}

// unschedulable says whether a node takes no new pod: cordoned, or
// tainted NoSchedule or NoExecute (NotReady, draining).
func unschedulable(n *v1.Node) bool {
	if n.Spec.Unschedulable {
		return true
	}
	for _, t := range n.Spec.Taints {
		if t.Effect == v1.TaintEffectNoSchedule || t.Effect == v1.TaintEffectNoExecute {
			return true
		}
	}
	return false
}

func overcommitted(ni *nodeinfo.NodeInfo) bool {
	req, alloc := ni.Requested(), ni.Allocatable()
	return req.MilliCPU > alloc.MilliCPU || req.Memory > alloc.Memory || int64(ni.NumPods()) > alloc.AllowedPodNumber
}

// pick returns the least-allocated node among `sample` random nodes of snap
// that fit the pod (its requests, and its tolerations and node selector:
// see fits), or "" if none fits.
func pick(r *rand.Rand, snap *schedcache.Snapshot, info *nodeinfo.PodInfo, sample int) string {
	n := snap.NumNodes()
	if n == 0 {
		return ""
	}
	want := info.Requests()
	pod := info.Pod()
	best, bestScore := "", -1.0
	for i := 0; i < sample; i++ {
		ni := snap.At(r.IntN(n))
		if !fits(pod, ni.Node()) {
			continue
		}
		req, alloc := ni.Requested(), ni.Allocatable()
		freeCPU := alloc.MilliCPU - req.MilliCPU - want.MilliCPU
		freeMem := alloc.Memory - req.Memory - want.Memory
		if freeCPU < 0 || freeMem < 0 || int64(ni.NumPods()) >= alloc.AllowedPodNumber {
			continue
		}
		score := float64(freeCPU)/float64(alloc.MilliCPU) + float64(freeMem)/float64(alloc.Memory)
		if score > bestScore {
			best, bestScore = ni.Node().Name, score
		}
	}
	return best
}
