package sim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/hist"
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
}

// progress draws a progress bar when w is not nil (a terminal: Main
// passes stderr only then). It is used by one goroutine at a time (the
// run's main goroutine). The bar is redrawn in place (carriage return,
// erase line) at most every barEvery; printf ends it with a newline first.
type progress struct {
	w      io.Writer // owned by the run's main goroutine; nil: silent
	last   time.Time // owned by the run's main goroutine
	drawn  bool      // owned by the run's main goroutine; a bar is on the current line
	barLen int       // owned by the run's main goroutine; 0: 30 cells
}

const barEvery = 200 * time.Millisecond

func (p *progress) printf(format string, args ...any) {
	if p.w == nil {
		return
	}
	if p.drawn {
		fmt.Fprint(p.w, "\n")
		p.drawn = false
	}
	fmt.Fprintf(p.w, format, args...)
}

// tick redraws the bar, filled to frac (clamped to [0, 1]), followed by a
// status text, if barEvery has passed since the last draw.
func (p *progress) tick(frac float64, format string, args ...any) {
	if p.w == nil {
		return
	}
	now := time.Now()
	if now.Sub(p.last) < barEvery {
		return
	}
	p.last = now
	fmt.Fprint(p.w, "\r\x1b[K"+bar(frac, p.barLen)+" "+fmt.Sprintf(format, args...))
	p.drawn = true
}

// bar renders frac as "[#####.....]  45%" with n cells (30 when n is 0).
func bar(frac float64, n int) string {
	if n <= 0 {
		n = 30
	}
	if !(frac >= 0) { // NaN too
		frac = 0
	}
	frac = min(frac, 1)
	full := int(frac * float64(n))
	return "[" + strings.Repeat("#", full) + strings.Repeat(".", n-full) + "] " + fmt.Sprintf("%3d%%", int(frac*100))
}

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
	e.disp = &simDispatcher{truth: e.truth, latency: cfg.BindLatency, fail: cfg.FailRate, det: cfg.Deterministic,
		r: rand.New(rand.NewPCG(uint64(cfg.Seed), 0xb1))}
	prog.printf("building cluster: %d nodes, %d pods per node or %d in all (seed %d)\n", cfg.Nodes, cfg.PodsPerNode, cfg.InitialPods, cfg.Seed)
	e.cl = buildCluster(cfg)
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
			prog.tick(float64(i)/float64(total), "loading: %d/%d objects", i, total)
		}
	}
	for i, p := range e.cl.Pods {
		if err := c.AddPodAsync(p); err != nil {
			c.Close()
			return nil, err
		}
		if i%4096 == 0 {
			prog.tick(float64(len(e.cl.Nodes)+i)/float64(total), "loading: %d/%d objects", len(e.cl.Nodes)+i, total)
		}
	}
	if err := c.Sync(); err != nil {
		c.Close()
		return nil, err
	}
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
	rep.Audit = audit(e.c, e.truth, e.inf, cfg.AssumeTTL > 0, &e.memo)
	if !e.inf.settled() {
		rep.Audit.OK = false
		rep.Audit.Divergences++
		rep.Audit.Examples = append(rep.Audit.Examples, "the informer has not delivered every event at the end")
	}
	rep.ExpectedPods, rep.ExpectedNodes = rep.Audit.ExpectedPods, rep.Audit.ExpectedNodes
	rep.Informer, rep.Churn = e.inf.counts, e.api.counts
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
	rep.Warnings = e.warnings
	rep.Consistent = rep.Audit.OK && rep.MidAudits.Failed == 0 && rep.FinalPods == rep.ExpectedPods && rep.FinalNodes == rep.ExpectedNodes+rep.Audit.GhostNodes && rep.AsyncErrors == 0
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

// runRealtime: scheduler goroutines schedule on snapshots and bind through
// BindPod's simulated dispatcher while the API server goroutine runs the
// churn and its informer delivers the watch events after their delay, in
// wall-clock time. Every step that writes the cache or the truth holds the
// world's read lock; a mid-run audit takes the write lock, so it sees the
// cache, the truth and the informer at one point between steps.
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

	var world sync.RWMutex
	start := time.Now()
	since := func() time.Duration { return time.Since(start) }
	inf := newInformer(cfg, asyncOps{c}, cfg.Seed)
	inf.load(e.cl.Nodes, e.cl.Pods)
	api := newAPIServer(cfg, e.truth, inf, e.cl)
	api.assume = func(p *v1.Pod, _ string) error {
		if err := c.AssumePod(logger, p); err != nil {
			return err
		}
		return c.FinishBinding(logger, p)
	}
	inf.onAdd = api.delivered
	var iwin windows // owned by the API server goroutine until apiDone
	inf.win = &iwin
	e.inf, e.api = inf, api
	e.disp.inf, e.disp.now = inf, since

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
	var scheduled, forgotten, failed, refused, conflicts, unsched atomic.Int64
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

	// The dispatcher's goroutine, when bindings take time.
	var dispWG sync.WaitGroup
	if cfg.BindLatency > 0 {
		e.disp.calls = make(chan *dispatchCall, cfg.Schedulers)
		dispWG.Add(1)
		go func() {
			defer dispWG.Done()
			e.disp.run()
		}()
	}

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
					pod := e.cl.NewPod(r, fmt.Sprintf("arr-%d", arrived), "")
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

	// decide is one scheduling attempt of scheduler s: pick, assume, bind
	// through the dispatcher (waiting for the outcome), finish or forget.
	// It runs under the world's read lock; false stops the scheduler.
	decide := func(s int, r *rand.Rand, pod *v1.Pod, arrivedAt time.Duration) bool {
		world.RLock()
		defer world.RUnlock()
		info, err := nodeinfo.NewPodInfo(pod)
		if err != nil {
			fail(err)
			return false
		}
		tr := time.Now()
		snap := c.Snapshot()
		best, err := pickers.pickers[s].Pick(ctx, snap, info, r, pickers.rejected[s])
		if err != nil {
			fail(fmt.Errorf("pick %s: %w", pod.Name, err))
			return false
		}
		hRead[s].Record(time.Since(tr))
		if best == "" {
			unsched.Add(1)
			return true
		}
		pod.Spec.NodeName = best
		e.truth.Assume(pod, best)
		ta := time.Now()
		if err := c.AssumePod(logger, pod); err != nil {
			fail(fmt.Errorf("AssumePod %s: %w", pod.Name, err))
			return false
		}
		hAssume[s].Record(time.Since(ta))
		if arr != nil {
			hQueue[s].Record(ta.Sub(start) - arrivedAt)
		}
		// Optimistic concurrency: another scheduler may have filled
		// the node since our snapshot. Check on a fresh snapshot.
		if ni, err := c.Snapshot().Get(best); err != nil || overcommitted(ni) {
			conflicts.Add(1)
			return forget(pod)
		}
		ch, err := c.BindPod(bindingOf(pod, best))
		if err != nil {
			fail(fmt.Errorf("BindPod %s: %w", pod.Name, err))
			return false
		}
		berr := <-ch
		// As upstream's binding cycle: FinishBinding, then ForgetPod if
		// the binding failed.
		if err := c.FinishBinding(logger, pod); err != nil {
			fail(fmt.Errorf("FinishBinding %s: %w", pod.Name, err))
			return false
		}
		if berr != nil {
			if errors.Is(berr, ErrBindRefused) {
				refused.Add(1)
			} else {
				failed.Add(1)
			}
			return forget(pod)
		}
		now := time.Now()
		hAttempt[s].Record(now.Sub(tr))
		wins[s].scheduled(now.Sub(start), now.Sub(tr))
		if n := scheduled.Add(1); cfg.Pods > 0 && n >= cfg.Pods {
			endNs.CompareAndSwap(0, int64(now.Sub(start)))
			halt()
		}
		return true
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
					pod = e.cl.NewPod(r, fmt.Sprintf("sched-%d-%d", s, i), "")
				}
				if !decide(s, r, pod, arrivedAt) {
					return
				}
			}
		}(s)
	}

	// Readers (W1) and first full snapshots (W6): they only read.
	var readWG sync.WaitGroup
	hReader := make([]*hist.Histogram, cfg.Readers)
	reads := make([]int64, cfg.Readers) // reads[i] owned by reader i until readWG.Wait
	for i := 0; i < cfg.Readers; i++ {
		hReader[i] = hist.New()
		readWG.Add(1)
		go func(i int) {
			defer readWG.Done()
			r := rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(i)+5000))
			var sink int64
			for !stop.Load() {
				t := time.Now()
				snap := c.Snapshot()
				if n := snap.NumNodes(); n > 0 {
					for k := 0; k < cfg.ReadNodes; k++ {
						sink += snap.At(r.IntN(n)).Requested().MilliCPU
					}
				}
				hReader[i].Record(time.Since(t))
				reads[i]++
			}
			_ = sink
		}(i)
	}
	hFull := hist.New() // owned by the full-snapshot goroutine until readWG.Wait
	var fulls int64     // owned by the full-snapshot goroutine until readWG.Wait
	if cfg.FullSnapshotEvery > 0 {
		readWG.Add(1)
		go func() {
			defer readWG.Done()
			tk := time.NewTicker(cfg.FullSnapshotEvery)
			defer tk.Stop()
			for {
				select {
				case <-done:
					return
				case <-tk.C:
				}
				snap := schedcache.NewEmptySnapshot()
				t := time.Now()
				if err := c.UpdateSnapshot(logger, snap); err != nil {
					fail(fmt.Errorf("UpdateSnapshot: %w", err))
					return
				}
				hFull.Record(time.Since(t))
				fulls++
			}
		}()
	}

	// The API server goroutine: runs the churn and the informer. After
	// flush is closed (every producer has stopped) it delivers what is
	// left, relists if events were lost, and returns.
	flush := make(chan struct{})
	apiDone := make(chan error, 1)
	relists := inf.relistTimes()
	go func() {
		apiDone <- func() error {
			timer := time.NewTimer(time.Hour)
			defer timer.Stop()
			for {
				world.RLock()
				inf.intake()
				next := inf.next()
				if n := api.next(); n >= 0 && (next < 0 || n < next) {
					next = n
				}
				world.RUnlock()
				if len(relists) > 0 && (next < 0 || relists[0] < next) {
					next = relists[0]
				}
				wait := time.Hour
				if next >= 0 {
					wait = max(next-since(), 0)
				}
				timer.Reset(wait)
				select {
				case <-flush:
					api.stop()
					for !inf.settled() {
						if err := inf.deliverDue(0, true); err != nil {
							return err
						}
						if len(inf.dirty) > 0 {
							if err := inf.relist(since(), e.truth); err != nil {
								return err
							}
						}
					}
					return nil
				case <-inf.wake:
				case <-timer.C:
				}
				if !timer.Stop() {
					select {
					case <-timer.C:
					default:
					}
				}
				now := since()
				if stop.Load() {
					api.stop()
				}
				if len(relists) > 0 && now >= relists[0] {
					relists = relists[1:]
					world.Lock()
					err := inf.relist(now, e.truth)
					world.Unlock()
					if err != nil {
						return err
					}
				}
				world.RLock()
				err := api.runDue(now)
				if err == nil {
					err = inf.deliverDue(now, false)
				}
				world.RUnlock()
				if err != nil {
					return err
				}
			}
		}()
	}()

	// midAudit pauses every writer and audits.
	midAudit := func() {
		world.Lock()
		defer world.Unlock()
		t := time.Now()
		if err := c.Sync(); err != nil {
			fail(err)
			return
		}
		if h.beforeAudit != nil {
			h.beforeAudit(c, e.truth)
		}
		res := audit(c, e.truth, inf, cfg.AssumeTTL > 0, &e.memo)
		rep.MidAudits.Count++
		rep.MidAudits.MaxPauseMs = max(rep.MidAudits.MaxPauseMs, ms(time.Since(t)))
		if !res.OK {
			rep.MidAudits.Failed++
			if rep.MidAudits.FirstFail == nil {
				rep.MidAudits.FirstFail, rep.MidAudits.FirstFailAt = &res, since().Seconds()
			}
		}
	}
	var auditC <-chan time.Time
	if cfg.AuditEvery > 0 {
		at := time.NewTicker(cfg.AuditEvery)
		defer at.Stop()
		auditC = at.C
	}

	deadline := start.Add(limit)
	ticker := time.NewTicker(100 * time.Millisecond)
	var pendingAt []int // queue length at the end of each window
	lastCount, lastProgress := int64(0), start
	rep.Stopped = "duration"
	for !stop.Load() && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			fail(ctx.Err())
		case <-auditC:
			midAudit()
		case <-h.auditNow:
			midAudit()
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
			frac := float64(now.Sub(start)) / float64(cfg.Duration)
			if cfg.Duration == 0 || (cfg.Pods > 0 && float64(n)/float64(cfg.Pods) > frac) {
				frac = float64(n) / float64(cfg.Pods)
			}
			prog.tick(frac, "scheduling: %v, %d pods scheduled, %d pending", now.Sub(start).Truncate(100*time.Millisecond), n, len(arr))
		}
	}
	ticker.Stop()
	halt()
	wg.Wait()
	if e.disp.calls != nil {
		close(e.disp.calls)
	}
	dispWG.Wait()
	arrWG.Wait()
	readWG.Wait()
	close(flush)
	ierr := <-apiDone
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
	rep.RefusedBindings = refused.Load()
	rep.Conflicts, rep.Unschedulable = conflicts.Load(), unsched.Load()
	ha, hr, ht, hq, hrd := hist.New(), hist.New(), hist.New(), hist.New(), hist.New()
	for s := range hAssume {
		ha.Merge(hAssume[s])
		hr.Merge(hRead[s])
		ht.Merge(hAttempt[s])
		hq.Merge(hQueue[s])
	}
	for i := range hReader {
		hrd.Merge(hReader[i])
		rep.Reads += reads[i]
	}
	rep.Assume, rep.Read, rep.Attempt, rep.QueueDelay = summarise(ha), summarise(hr), summarise(ht), summarise(hq)
	rep.ReaderLatency, rep.FullSnapshot, rep.FullSnapshots = summarise(hrd), summarise(hFull), fulls
	pickers.report(rep)
	if err := e.finish(cfg, rep, h, prog); err != nil {
		return nil, err
	}
	return rep, nil
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
