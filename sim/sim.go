package sim

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/framework"
	"github.com/schedcache/schedcache/internal/hist"
	"github.com/schedcache/schedcache/workload"
)

// hooks carry what a caller injects into a run: the picker (MainWith's
// Options) and tests' reach into it. The zero value does nothing.
type hooks struct {
	// picker chooses nodes; nil: LeastAllocated.
	picker Picker
	// beforeAudit runs once the simulation has stopped, before the audit.
	beforeAudit func(c *schedcache.Cache, truth *Truth)
}

// progress writes progress lines when w is not nil. It is used by one
// goroutine at a time (the run's main goroutine).
type progress struct {
	w    io.Writer // owned by the run's main goroutine; nil: silent
	last time.Time // owned by the run's main goroutine
}

func (p *progress) printf(format string, args ...any) {
	if p.w != nil {
		fmt.Fprintf(p.w, format, args...)
	}
}

// tick prints a line if a second has passed since the last one.
func (p *progress) tick(format string, args ...any) {
	if p.w == nil {
		return
	}
	if now := time.Now(); now.Sub(p.last) >= time.Second {
		p.last = now
		fmt.Fprintf(p.w, format+"\n", args...)
	}
}

// env is what both modes share: the cluster, the cache, the ground truth.
type env struct {
	cl        *workload.Cluster
	c         *schedcache.Cache
	truth     *Truth
	asyncErrs atomic.Int64 // atomic
	firstErr  atomic.Value // atomic; error
	warnings  []string     // owned by the run's main goroutine
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
func setup(ctx context.Context, cfg Config, clk schedcache.Clock, prog *progress, rep *Report) (*env, error) {
	e := &env{truth: newTruth()}
	prog.printf("building cluster: %d nodes, %d pods per node or %d in all (seed %d)\n", cfg.Nodes, cfg.PodsPerNode, cfg.InitialPods, cfg.Seed)
	e.cl = buildCluster(cfg)
	rep.InitialPods = len(e.cl.Pods)
	opts := []schedcache.Option{schedcache.WithAsyncErrorHandler(func(ae schedcache.AsyncError) {
		if e.asyncErrs.Add(1) == 1 {
			e.firstErr.Store(ae.Err)
		}
	})}
	if cfg.Shards > 0 {
		opts = append(opts, schedcache.WithShards(cfg.Shards))
	}
	if clk != nil {
		opts = append(opts, schedcache.WithClock(clk))
	}
	c, err := schedcache.New(ctx, opts...)
	if err != nil {
		return nil, err
	}
	e.c = c
	t0 := time.Now()
	total := len(e.cl.Nodes) + len(e.cl.Pods)
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
		if i%4096 == 0 {
			prog.tick("loading: %d/%d objects", i, total)
		}
	}
	for i, p := range e.cl.Pods {
		if err := c.AddPodAsync(p); err != nil {
			c.Close()
			return nil, err
		}
		e.truth.Load(p)
		if i%4096 == 0 {
			prog.tick("loading: %d/%d objects", len(e.cl.Nodes)+i, total)
		}
	}
	if err := c.Sync(); err != nil {
		c.Close()
		return nil, err
	}
	rep.LoadTime = time.Since(t0)
	rep.LoadRate = float64(total) / rep.LoadTime.Seconds()
	// An over-full cluster is refused before scheduling starts.
	over, first := 0, ""
	snap := c.Snapshot()
	snap.Range(func(_ int, ni *framework.NodeInfo) bool {
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
	if refuseOverfull(over, cfg.Nodes) {
		c.Close()
		return nil, bad("pods-per-node", "%d pods per node over-fill %d of %d nodes at start (first: %s)", cfg.PodsPerNode, over, cfg.Nodes, first)
	}
	if over > 0 {
		e.warnings = append(e.warnings, fmt.Sprintf("%d of %d nodes are over-full at start, the generator's tail (first: %s)", over, cfg.Nodes, first))
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.LoadHeapAlloc = ms.HeapAlloc
	prog.printf("loaded in %v\n", rep.LoadTime.Round(time.Millisecond))
	return e, nil
}

// buildCluster builds the generated cluster of cfg: with InitialPods, the
// generator's ceil(InitialPods/Nodes) pods per node thinned evenly to that
// total; with Zones, nodes relabelled round-robin into zone-0 … zone-(N-1).
func buildCluster(cfg Config) *workload.Cluster {
	ppn := cfg.PodsPerNode
	if cfg.InitialPods > 0 {
		ppn = (cfg.InitialPods + cfg.Nodes - 1) / cfg.Nodes
	}
	cl := workload.Build(workload.ClusterSpec{Nodes: cfg.Nodes, PodsPerNode: ppn, Seed: cfg.Seed})
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
	rep.Events = rep.Adds + rep.Removes + rep.NodeUpdates
	if rep.Elapsed > 0 {
		rep.PodsPerSec = float64(rep.Scheduled) / rep.Elapsed.Seconds()
		rep.EventsPerSec = float64(rep.Events) / rep.Elapsed.Seconds()
	}
	if h.beforeAudit != nil {
		h.beforeAudit(e.c, e.truth)
	}
	rep.FinalPods, _ = e.c.PodCount()
	rep.FinalNodes = e.c.NodeCount()
	rep.ExpectedPods = rep.InitialPods + int(rep.Adds) - int(rep.Removes)
	rep.AsyncErrors = e.asyncErrs.Load()
	prog.printf("auditing %d pods, %d nodes\n", e.truth.Len(), len(e.cl.Nodes))
	rep.Audit = audit(e.c, e.truth, e.cl.Nodes)
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
	rep.Warnings = e.warnings
	rep.Consistent = rep.Audit.OK && rep.MidAudits.Failed == 0 && rep.FinalPods == rep.ExpectedPods && rep.FinalNodes == cfg.Nodes && rep.AsyncErrors == 0
	if fe := e.firstErr.Load(); fe != nil {
		prog.printf("first async error: %v\n", fe)
	}
	return nil
}

// run runs one simulation in the mode cfg selects. cfg must be valid.
func run(ctx context.Context, cfg Config, progressW io.Writer, h hooks) (*Report, error) {
	prog := &progress{w: progressW}
	if cfg.Deterministic {
		return runDeterministic(ctx, cfg, prog, h)
	}
	return runRealtime(ctx, cfg, prog, h)
}

type confirmation struct {
	pod *v1.Pod
	due time.Time
}

// runRealtime: scheduler goroutines schedule on snapshots while an informer
// goroutine confirms their bindings after the delay, in wall-clock time.
func runRealtime(ctx context.Context, cfg Config, prog *progress, h hooks) (*Report, error) {
	logger := klog.Background()
	rep := &Report{Config: cfg}
	e, err := setup(ctx, cfg, nil, prog, rep)
	if err != nil {
		return nil, err
	}
	defer e.c.Close()
	c := e.c
	pickers, err := newPickers(ctx, h.picker, cfg)
	if err != nil {
		return nil, err
	}
	defer pickers.close()
	prog.printf("scheduling for %v with %d schedulers\n", cfg.Duration, cfg.Schedulers)

	confirm := make(chan confirmation, 4096)
	var stop atomic.Bool
	done := make(chan struct{}) // closed once, by halt: every goroutine of the run stops
	var haltOnce sync.Once
	halt := func() {
		haltOnce.Do(func() {
			stop.Store(true)
			close(done)
		})
	}
	var wg sync.WaitGroup
	var scheduled, forgotten, failed, conflicts, unsched atomic.Int64
	var endNs atomic.Int64    // when the pod count was reached, since start
	var schedErr atomic.Value // error
	fail := func(err error) {
		schedErr.CompareAndSwap(nil, err)
		halt()
	}
	limit := cfg.limit()
	hAssume := make([]*hist.Histogram, cfg.Schedulers)
	hRead := make([]*hist.Histogram, cfg.Schedulers)
	hAttempt := make([]*hist.Histogram, cfg.Schedulers)
	hQueue := make([]*hist.Histogram, cfg.Schedulers)
	wins := make([]windows, cfg.Schedulers) // wins[s] owned by scheduler s until wg.Wait
	forget := func(pod *v1.Pod) bool {
		if err := c.ForgetPod(logger, pod); err != nil {
			fail(fmt.Errorf("ForgetPod %s: %w", pod.Name, err))
			return false
		}
		forgotten.Add(1)
		e.truth.Pending(pod)
		return true
	}
	start := time.Now()

	// Open loop: the arrivals goroutine feeds the bounded pending queue on
	// the arrival schedule (Poisson or bursts); it waits when the queue is
	// full, so a late pod's queueing delay counts from its planned arrival.
	var arr chan arrival
	var arrWG sync.WaitGroup
	var arrived int64 // owned by the arrivals goroutine until arrWG.Wait
	if cfg.openLoop() {
		arr = make(chan arrival, queueCap)
		arrWG.Add(1)
		go func() {
			defer arrWG.Done()
			r := rand.New(rand.NewPCG(uint64(cfg.Seed), 9))
			var next time.Duration
			for {
				if d := time.Until(start.Add(next)); d > 0 {
					t := time.NewTimer(d)
					select {
					case <-done:
						t.Stop()
						return
					case <-t.C:
					}
				}
				k := 1
				if cfg.Arrival == arrBurst {
					k = cfg.BurstSize
				}
				for j := 0; j < k; j++ {
					pod := workload.NewPod(r, fmt.Sprintf("arr-%d", arrived), "")
					select {
					case arr <- arrival{pod: pod, at: next}:
						arrived++
					case <-done:
						return
					}
				}
				if cfg.Arrival == arrBurst {
					next += cfg.BurstInterval
				} else {
					next += max(time.Duration(r.ExpFloat64()/cfg.Rate*float64(time.Second)), 1)
				}
			}
		}()
	}

	for s := 0; s < cfg.Schedulers; s++ {
		hAssume[s], hRead[s], hAttempt[s], hQueue[s] = hist.New(), hist.New(), hist.New(), hist.New()
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(s)+1000))
			for i := 0; !stop.Load(); i++ {
				var pod *v1.Pod
				var arrivedAt time.Duration
				if arr != nil {
					select {
					case a := <-arr:
						pod, arrivedAt = a.pod, a.at
					case <-done:
						return
					}
				} else {
					pod = workload.NewPod(r, fmt.Sprintf("sched-%d-%d", s, i), "")
				}
				info, err := framework.NewPodInfo(pod)
				if err != nil {
					fail(err)
					return
				}
				tr := time.Now()
				snap := c.Snapshot()
				best, err := pickers.pickers[s].Pick(ctx, snap, info, r, pickers.rejected[s])
				if err != nil {
					fail(fmt.Errorf("pick %s: %w", pod.Name, err))
					return
				}
				hRead[s].Record(time.Since(tr))
				if best == "" {
					unsched.Add(1)
					continue
				}
				pod.Spec.NodeName = best
				ta := time.Now()
				if err := c.AssumePod(logger, pod); err != nil {
					fail(fmt.Errorf("AssumePod %s: %w", pod.Name, err))
					return
				}
				hAssume[s].Record(time.Since(ta))
				if arr != nil {
					hQueue[s].Record(ta.Sub(start) - arrivedAt)
				}
				// Optimistic concurrency: another scheduler may have filled
				// the node since our snapshot. Check on a fresh snapshot.
				if ni, err := c.Snapshot().Get(best); err != nil || overcommitted(ni) {
					conflicts.Add(1)
					if !forget(pod) {
						return
					}
					continue
				}
				if err := c.FinishBinding(logger, pod); err != nil {
					fail(fmt.Errorf("FinishBinding %s: %w", pod.Name, err))
					return
				}
				if r.Float64() < cfg.FailRate {
					failed.Add(1)
					if !forget(pod) {
						return
					}
					continue
				}
				now := time.Now()
				hAttempt[s].Record(now.Sub(tr))
				e.truth.Bind(pod, best)
				wins[s].scheduled(now.Sub(start), now.Sub(tr))
				if n := scheduled.Add(1); cfg.Pods > 0 && n >= cfg.Pods {
					endNs.CompareAndSwap(0, int64(now.Sub(start)))
					halt()
				}
				confirm <- confirmation{pod: pod, due: now.Add(cfg.ConfirmDelay)}
			}
		}(s)
	}

	// The informer: confirms bindings after the delay and deletes an old
	// pod for each one, so the cluster stays at a steady size; one node
	// status update per 100 pod events.
	var adds, removes, nodeUpdates int64 // owned by the informer until informerDone
	var iwin windows                     // owned by the informer until informerDone
	informerDone := make(chan error, 1)
	go func() {
		r := rand.New(rand.NewPCG(uint64(cfg.Seed), 7))
		live := append([]*v1.Pod(nil), e.cl.Pods...)
		nodes := append([]*v1.Node(nil), e.cl.Nodes...)
		var ierr error
		for conf := range confirm {
			if ierr != nil {
				continue // drain so that the schedulers never block
			}
			if d := time.Until(conf.due); d > 0 {
				time.Sleep(d)
			}
			if ierr = c.AddPodAsync(conf.pod); ierr != nil {
				fail(ierr)
				continue
			}
			e.truth.Observed(conf.pod)
			adds++
			iwin.events(time.Since(start), 1)
			live = append(live, conf.pod)
			if !cfg.KeepPods {
				victim := popRandom(r, &live)
				e.truth.Delete(victim)
				if ierr = c.RemovePodAsync(victim); ierr != nil {
					fail(ierr)
					continue
				}
				removes++
				iwin.events(time.Since(start), 1)
			}
			if (adds+removes)%100 < 2 {
				k := r.IntN(len(nodes))
				nn := nodeHeartbeat(nodes[k], adds+removes)
				if ierr = c.UpdateNodeAsync(nodes[k], nn); ierr != nil {
					fail(ierr)
					continue
				}
				nodes[k] = nn
				nodeUpdates++
				iwin.events(time.Since(start), 1)
			}
		}
		informerDone <- ierr
	}()

	deadline := start.Add(limit)
	ticker := time.NewTicker(100 * time.Millisecond)
	var pendingAt []int // queue length at the end of each window
	lastCount, lastProgress := int64(0), start
	rep.Stopped = "duration"
	for !stop.Load() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			fail(ctx.Err())
		case now := <-ticker.C:
			for time.Duration(len(pendingAt)+1)*time.Second <= now.Sub(start) {
				pendingAt = append(pendingAt, len(arr))
				rep.MaxPending = max(rep.MaxPending, len(arr))
			}
			n := scheduled.Load()
			if n != lastCount {
				lastCount, lastProgress = n, now
			} else if cfg.Duration == 0 && now.Sub(lastProgress) > stallLimit {
				rep.Stopped = "stalled"
				e.warnings = append(e.warnings, fmt.Sprintf("stopped after %v with no pod scheduled: %d of the %d pods scheduled", stallLimit, n, cfg.Pods))
				halt()
			}
			prog.tick("scheduling: %v, %d pods scheduled, %d pending", now.Sub(start).Truncate(time.Second), n, len(arr))
		}
	}
	ticker.Stop()
	halt()
	wg.Wait()
	arrWG.Wait()
	close(confirm)
	ierr := <-informerDone
	if err, _ := schedErr.Load().(error); err != nil {
		return nil, err
	}
	if ierr != nil {
		return nil, ierr
	}
	rep.Wall = time.Since(start)
	rep.Elapsed = min(rep.Wall, limit)
	if end := endNs.Load(); end > 0 {
		rep.Elapsed = time.Duration(end)
		rep.Stopped = "pods"
	}
	// Pods still queued have arrived and were never scheduled: pending in
	// the API server.
	if arr != nil {
		for len(arr) > 0 {
			a := <-arr
			e.truth.Pending(a.pod)
			rep.PendingAtEnd++
		}
	}
	rep.Arrived = arrived
	var win windows
	win.merge(&iwin)
	for s := range wins {
		win.merge(&wins[s])
	}
	rep.Windows = windowsOf(win.sched, rep.Elapsed, time.Second)
	rep.Series = win.series(rep.Elapsed, pendingAt)
	rep.Scheduled, rep.Forgotten, rep.FailedBindings = scheduled.Load(), forgotten.Load(), failed.Load()
	rep.Conflicts, rep.Unschedulable = conflicts.Load(), unsched.Load()
	rep.Adds, rep.Removes, rep.NodeUpdates = adds, removes, nodeUpdates
	ha, hr, ht, hq := hist.New(), hist.New(), hist.New(), hist.New()
	for s := range hAssume {
		ha.Merge(hAssume[s])
		hr.Merge(hRead[s])
		ht.Merge(hAttempt[s])
		hq.Merge(hQueue[s])
	}
	rep.Assume, rep.Read, rep.Attempt, rep.QueueDelay = summarise(ha), summarise(hr), summarise(ht), summarise(hq)
	pickers.report(rep)
	if err := e.finish(cfg, rep, h, prog); err != nil {
		return nil, err
	}
	return rep, nil
}

// nodeHeartbeat returns a copy of n with a fresh Ready condition.
func nodeHeartbeat(n *v1.Node, at int64) *v1.Node {
	nn := n.DeepCopy()
	nn.Status.Conditions = []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, LastHeartbeatTime: metav1.NewTime(time.Unix(at, 0))}}
	return nn
}

func overcommitted(ni *framework.NodeInfo) bool {
	req, alloc := ni.Requested(), ni.Allocatable()
	return req.MilliCPU > alloc.MilliCPU || req.Memory > alloc.Memory || int64(ni.NumPods()) > alloc.AllowedPodNumber
}

// pick returns the least-allocated node among `sample` random nodes of snap
// that fit the pod, or "" if none fits.
func pick(r *rand.Rand, snap *schedcache.Snapshot, info *framework.PodInfo, sample int) string {
	n := snap.NumNodes()
	if n == 0 {
		return ""
	}
	want := info.Requests()
	best, bestScore := "", -1.0
	for i := 0; i < sample; i++ {
		ni := snap.At(r.IntN(n))
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

// popRandom removes and returns a random element of *live (the informer's
// deletion of an old pod), moving the last element into its place.
func popRandom(r *rand.Rand, live *[]*v1.Pod) *v1.Pod {
	l := *live
	j := r.IntN(len(l))
	victim := l[j]
	l[j] = l[len(l)-1]
	*live = l[:len(l)-1]
	return victim
}
