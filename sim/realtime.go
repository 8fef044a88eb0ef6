package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/hist"
	"github.com/schedcache/schedcache/nodeinfo"
)

// runRealtime: scheduler goroutines schedule on snapshots and bind through
// BindPod's simulated dispatcher while the API server goroutine runs the
// churn and its informer delivers the watch events after their delay, in
// wall-clock time. Every step that writes the cache or the truth holds the
// world's read lock; a mid-run audit takes the write lock, so it sees the
// cache, the truth and the informer at one point between steps.
func runRealtime(ctx context.Context, cfg Config, prog *progress, h hooks) (*Report, error) {
	rep := &Report{Config: cfg}
	e, err := setup(ctx, cfg, nil, prog, rep, false)
	if err != nil {
		return nil, err
	}
	defer e.c.Close()
	pickers, err := newPickers(ctx, h.picker, cfg, e.c)
	if err != nil {
		return nil, err
	}
	defer pickers.close()
	prog.printf("scheduling for %v with %d schedulers\n", cfg.Duration, cfg.Schedulers)

	rt := newRealtimeRun(ctx, cfg, prog, h, e, pickers, rep)
	rt.start()
	rt.supervise()
	if err := rt.wait(); err != nil {
		return nil, err
	}
	return rt.report()
}

// realtimeRun is one real-time run: the state its goroutines share, and
// one method per role. The run's main goroutine (the caller of
// runRealtime) calls start, which starts every other goroutine; then
// supervise, which returns when the run is over (its duration, its pod
// count, a stall, a failure or ctx cancelled); then wait, which stops
// every goroutine and joins it; then report.
//
// Goroutines and their owners: the schedulers (schedWG), the dispatcher
// (dispWG; it ends when e.disp.calls is closed), the arrivals (arrWG),
// the readers and the full-snapshot taker (readWG) stop once done is
// closed (stop); the API server goroutine stops once flush is closed and
// sends its result on apiDone. wait closes both, in that order, and joins
// every one of them. A phases run (phasert.go) has no arrivals goroutine
// but a phase driver and its churn goroutines (ph.wg), which stop once
// done is closed and are joined before flush is closed (they wait on the
// API server goroutine); the driver closes ph.over once the last phase
// has ended, and supervise then stops the run. Cancelling ctx makes
// supervise return, so wait stops them all.
type realtimeRun struct {
	ctx     context.Context   // immutable after newRealtimeRun
	cfg     Config            // immutable after newRealtimeRun
	h       hooks             // immutable after newRealtimeRun
	logger  klog.Logger       // immutable after newRealtimeRun
	e       *env              // immutable after newRealtimeRun; its fields say who owns them
	c       *schedcache.Cache // immutable after newRealtimeRun: e.c
	pickers *schedPickers     // immutable after newRealtimeRun; its fields say who owns them
	t0      time.Time         // immutable after newRealtimeRun: the run's wall-clock time zero
	limit   time.Duration     // immutable after newRealtimeRun: cfg.limit()
	// inf and api are owned by the API server goroutine (inf.emit: any
	// goroutine holding world's read lock; an audit holding its write
	// lock reads both).
	inf *informer  // immutable pointer after newRealtimeRun
	api *apiServer // immutable pointer after newRealtimeRun
	// arr is the open loop's bounded pending queue (nil: closed loop):
	// the arrivals goroutine sends, the schedulers receive, and the main
	// goroutine drains it once wait has joined them.
	arr chan arrival // immutable after newRealtimeRun
	// ph runs a phases plan (phasert.go; nil: none); its phase driver
	// hands the API server goroutine work through apiReq (nil: none).
	ph     *rtPhases   // immutable after newRealtimeRun
	apiReq chan apiReq // immutable after newRealtimeRun

	// world: every step that writes the cache or the truth holds it for
	// reading; a mid-run audit and a timed relist hold it for writing.
	world sync.RWMutex

	done     chan struct{}          // immutable after newRealtimeRun; closed once, by stop: every goroutine of the run stops
	haltOnce sync.Once              // guards the close of done
	stopped  atomic.Bool            // atomic: set by stop before done is closed
	schedErr atomic.Pointer[runErr] // atomic: the first failure (fail)
	endNs    atomic.Int64           // atomic: when the pod count was reached, since t0
	// counts: the API server goroutine's churn and informer counts after
	// its last step, published for hooks.until (only when it is set).
	counts atomic.Pointer[runProgress]
	// overran: how long the run went on, since t0, when hooks.until kept
	// it going past its duration (0: it did not); owned by the main
	// goroutine.
	overran time.Duration
	// traceEnd: when a trace run's trace was used up and its pods
	// settled, since t0 (0: it was not); owned by the main goroutine.
	traceEnd time.Duration

	scheduled, forgotten, failed, refused, conflicts, unsched atomic.Int64 // atomic

	// What the goroutines measure: each part is owned by its goroutine
	// until wait has joined it, then by the main goroutine (report).
	scheds  []schedStats    // immutable length; scheds[s] owned by scheduler s
	readers []readerStats   // immutable length; readers[i] owned by reader i
	full    *hist.Histogram // owned by the full-snapshot goroutine
	fulls   int64           // owned by the full-snapshot goroutine
	arrived int64           // owned by the arrivals goroutine
	iwin    windows         // owned by the API server goroutine (the informer's events per window)
	relists []time.Duration // owned by the API server goroutine: the relists still to make

	schedWG sync.WaitGroup // the schedulers; joined by wait
	dispWG  sync.WaitGroup // the dispatcher's goroutine (-bind-latency); joined by wait
	arrWG   sync.WaitGroup // the arrivals goroutine (open loop); joined by wait
	readWG  sync.WaitGroup // the readers and the full-snapshot goroutine; joined by wait
	flush   chan struct{}  // immutable after newRealtimeRun; closed by wait once every producer has stopped
	apiDone chan error     // immutable after newRealtimeRun; cap 1: the API server goroutine's result

	prog         *progress // owned by the main goroutine
	rep          *Report   // owned by the main goroutine
	pendingAt    []int     // owned by the main goroutine: the queue length at the end of each 1 s window
	lastCount    int64     // owned by the main goroutine: scheduled at lastProgress
	lastProgress time.Time // owned by the main goroutine: when scheduled last changed
}

// schedStats is what one scheduler goroutine measures, owned by it until
// wait has joined it.
type schedStats struct {
	assume, read, attempt, queue *hist.Histogram
	win                          windows
}

// readerStats is what one reader goroutine measures, owned by it until
// wait has joined it.
type readerStats struct {
	lat   *hist.Histogram
	reads int64
}

// newRealtimeRun wires the informer, the API server and the dispatcher of
// a run over e; it starts nothing.
func newRealtimeRun(ctx context.Context, cfg Config, prog *progress, h hooks, e *env, pickers *schedPickers, rep *Report) *realtimeRun {
	rt := &realtimeRun{
		ctx: ctx, cfg: cfg, h: h, logger: klog.Background(), e: e, c: e.c, pickers: pickers,
		t0: time.Now(), limit: cfg.limit(),
		done: make(chan struct{}), flush: make(chan struct{}), apiDone: make(chan error, 1),
		prog: prog, rep: rep,
	}
	rt.inf = newInformer(cfg, asyncOps{e.c}, cfg.Seed)
	rt.inf.load(e.cl.Nodes, e.cl.Pods)
	rt.api = newAPIServer(cfg, e.truth, rt.inf, e.cl)
	rt.api.assume = rt.assumeBound
	rt.inf.onAdd = rt.api.delivered
	rt.inf.win = &rt.iwin
	e.inf, e.api = rt.inf, rt.api
	e.disp.inf, e.disp.now = rt.inf, rt.since
	if cfg.openLoop() {
		rt.arr = make(chan arrival, queueCap)
	}
	if cfg.Phases != nil {
		rt.ph, rt.apiReq = newRTPhases(rt), make(chan apiReq)
		rt.api.onComplete = rt.ph.completed
		if cfg.Phases.evict && rt.inf.byNode == nil {
			rt.inf.byNode = map[string]map[string]*v1.Pod{} // drains evict a node's pods
		}
	}
	rt.scheds = make([]schedStats, cfg.Schedulers)
	for s := range rt.scheds {
		rt.scheds[s] = schedStats{assume: hist.New(), read: hist.New(), attempt: hist.New(), queue: hist.New()}
	}
	rt.readers = make([]readerStats, cfg.Readers)
	for i := range rt.readers {
		rt.readers[i].lat = hist.New()
	}
	rt.full = hist.New()
	rt.relists = rt.inf.relistTimes()
	return rt
}

// since is the run time: the wall-clock time since t0.
func (rt *realtimeRun) since() time.Duration { return time.Since(rt.t0) }

// assumeBound is the expiry storm's AssumePod + FinishBinding.
func (rt *realtimeRun) assumeBound(p *v1.Pod, _ string) error {
	if err := rt.c.AssumePod(rt.logger, p); err != nil {
		return err
	}
	return rt.c.FinishBinding(rt.logger, p)
}

// start starts every goroutine of the run; wait stops and joins them.
func (rt *realtimeRun) start() {
	if rt.cfg.BindLatency > 0 {
		rt.e.disp.calls = make(chan *dispatchCall, rt.cfg.Schedulers)
		rt.dispWG.Add(1)
		go rt.dispatcher()
	}
	if rt.arr != nil {
		rt.arrWG.Add(1)
		go rt.arrivals()
	}
	for s := range rt.scheds {
		rt.schedWG.Add(1)
		go rt.scheduler(s)
	}
	for i := range rt.readers {
		rt.readWG.Add(1)
		go rt.reader(i)
	}
	if rt.cfg.FullSnapshotEvery > 0 {
		rt.readWG.Add(1)
		go rt.fullSnapshots()
	}
	go rt.serveAPI()
	if rt.ph != nil {
		rt.ph.start()
	}
}

// stop makes every goroutine of the run stop; it may be called more than
// once, from any goroutine.
func (rt *realtimeRun) stop() {
	rt.haltOnce.Do(func() {
		rt.stopped.Store(true)
		close(rt.done)
	})
}

// fail records err as the run's failure, unless one came first, and stops
// the run.
func (rt *realtimeRun) fail(err error) {
	rt.schedErr.CompareAndSwap(nil, &runErr{err})
	rt.stop()
}

// runErr holds a run's first failure: one concrete type for schedErr,
// whatever the error's own type (an atomic.Value panics on a second
// store of another type: context.Canceled, then a wrapped error).
type runErr struct{ err error }

// wait stops the run and joins every goroutine: the schedulers first,
// then the dispatcher (its calls channel closed), the arrivals and the
// readers, and last the API server goroutine, which delivers what is left
// once flush is closed. It returns the run's failure, if any.
func (rt *realtimeRun) wait() error {
	rt.stop()
	rt.schedWG.Wait()
	if rt.ph != nil {
		rt.ph.wg.Wait() // before flush: they wait on the API server goroutine
	}
	if rt.e.disp.calls != nil {
		close(rt.e.disp.calls)
	}
	rt.dispWG.Wait()
	rt.arrWG.Wait()
	rt.readWG.Wait()
	close(rt.flush)
	ierr := <-rt.apiDone
	if re := rt.schedErr.Load(); re != nil {
		if cerr := rt.ctx.Err(); cerr != nil && errors.Is(re.err, cerr) {
			// Interrupted: not a failure; the run's report is written.
			rt.rep.Stopped = "interrupted"
			return ierr
		}
		return re.err
	}
	return ierr
}

// dispatcher is the dispatcher's goroutine, when bindings take time: it
// runs until e.disp.calls is closed.
func (rt *realtimeRun) dispatcher() {
	defer rt.dispWG.Done()
	rt.e.disp.run()
}

// arrivals is the open loop's arrivals goroutine: it feeds the bounded
// pending queue on the arrival schedule (Poisson or bursts); it waits when
// the queue is full, so a late pod's queueing delay counts from its
// planned arrival.
func (rt *realtimeRun) arrivals() {
	defer rt.arrWG.Done()
	cfg := rt.cfg
	if cfg.Arrival == arrTrace {
		rt.traceArrivals()
		return
	}
	r := rand.New(rand.NewPCG(uint64(cfg.Seed), 9))
	var next time.Duration
	for {
		if d := time.Until(rt.t0.Add(next)); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-rt.done:
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
			pod := rt.e.cl.NewPod(r, fmt.Sprintf("arr-%d", rt.arrived), "")
			select {
			case rt.arr <- arrival{pod: pod, at: next}:
				rt.arrived++
			case <-rt.done:
				return
			}
		}
		if cfg.Arrival == arrBurst {
			next += cfg.BurstInterval
		} else {
			next += max(time.Duration(r.ExpFloat64()/cfg.Rate*float64(time.Second)), 1)
		}
	}
}

// scheduler is scheduler goroutine s: it takes the next pod (from the
// pending queue in the open loop, a new one in the closed loop) and
// decides, until the run stops.
func (rt *realtimeRun) scheduler(s int) {
	defer rt.schedWG.Done()
	r := rand.New(rand.NewPCG(uint64(rt.cfg.Seed), uint64(s)+1000))
	for i := 0; !rt.stopped.Load(); i++ {
		if rt.ph != nil {
			pp, pod := rt.ph.take()
			if pp == nil || !rt.decide(s, r, pod, pp.created) {
				return
			}
			continue
		}
		var pod *v1.Pod
		var arrivedAt time.Duration
		if p := rt.e.takeLoaded(); p != nil {
			pod = p // pending since the start
		} else if rt.arr != nil {
			select {
			case a := <-rt.arr:
				pod, arrivedAt = a.pod, a.at
			case <-rt.done:
				return
			}
		} else {
			pod = rt.e.cl.NewPod(r, fmt.Sprintf("sched-%d-%d", s, i), "")
		}
		if !rt.decide(s, r, pod, arrivedAt) {
			return
		}
	}
}

// decide is one scheduling attempt of scheduler s: pick, assume, bind
// through the dispatcher (waiting for the outcome), finish or forget.
// It runs under the world's read lock; false stops the scheduler.
func (rt *realtimeRun) decide(s int, r *rand.Rand, pod *v1.Pod, arrivedAt time.Duration) bool {
	rt.world.RLock()
	defer rt.world.RUnlock()
	st := &rt.scheds[s]
	info, err := nodeinfo.NewPodInfo(pod)
	if err != nil {
		rt.fail(err)
		return false
	}
	tr := time.Now()
	snap := rt.c.Snapshot()
	best, err := rt.pickers.pick(rt.ctx, s, snap, info, r)
	if isAttemptError(err) {
		// The picker failed this attempt alone (counted by pick).
		if rt.ph != nil {
			rt.ph.attemptFailed(pod)
			return true
		}
		rt.api.life.decided(pod, false)
		return true
	}
	if err != nil {
		rt.fail(fmt.Errorf("pick %s: %w", pod.Name, err))
		return false
	}
	st.read.Record(time.Since(tr))
	if best == "" {
		rt.unsched.Add(1)
		if rt.ph != nil {
			rt.ph.unschedulable(pod)
			return true
		}
		rt.api.life.decided(pod, false)
		return true
	}
	pod.Spec.NodeName = best
	rt.e.truth.Assume(pod, best)
	ta := time.Now()
	if err := rt.c.AssumePod(rt.logger, pod); err != nil {
		rt.fail(fmt.Errorf("AssumePod %s: %w", pod.Name, err))
		return false
	}
	st.assume.Record(time.Since(ta))
	if rt.arr != nil || rt.ph != nil {
		st.queue.Record(ta.Sub(rt.t0) - arrivedAt)
		rt.api.life.submitted(pod, arrivedAt)
	} else {
		rt.api.life.submitted(pod, ta.Sub(rt.t0))
	}
	// Optimistic concurrency: another scheduler may have filled
	// the node since our snapshot. Check on a fresh snapshot.
	if ni, err := rt.c.Snapshot().Get(best); err != nil || overcommitted(ni) {
		rt.conflicts.Add(1)
		if !rt.forget(pod) {
			return false
		}
		if rt.ph != nil {
			rt.ph.requeue(pod, false)
		}
		return true
	}
	return rt.bind(s, pod, best, tr)
}

// bind binds pod, assumed on best, through the dispatcher and waits for
// the outcome; then, as upstream's binding cycle, FinishBinding, and
// ForgetPod if the binding failed. tr is when the attempt began. The
// caller (decide) holds the world's read lock; false stops the scheduler.
func (rt *realtimeRun) bind(s int, pod *v1.Pod, best string, tr time.Time) bool {
	ch, err := rt.c.BindPod(bindingOf(pod, best))
	if err != nil {
		rt.fail(fmt.Errorf("BindPod %s: %w", pod.Name, err))
		return false
	}
	berr := <-ch
	if err := rt.c.FinishBinding(rt.logger, pod); err != nil {
		rt.fail(fmt.Errorf("FinishBinding %s: %w", pod.Name, err))
		return false
	}
	if berr != nil {
		if errors.Is(berr, ErrBindRefused) {
			rt.refused.Add(1)
		} else {
			rt.failed.Add(1)
		}
		if !rt.forget(pod) {
			return false
		}
		if rt.ph != nil {
			rt.ph.requeue(pod, true)
		}
		return true
	}
	now := time.Now()
	rt.scheds[s].attempt.Record(now.Sub(tr))
	rt.scheds[s].win.scheduled(now.Sub(rt.t0), now.Sub(tr))
	if rt.ph != nil {
		rt.ph.bound(now.Sub(rt.t0), pod, now.Sub(tr))
	}
	rt.api.life.decided(pod, true)
	if n := rt.scheduled.Add(1); rt.cfg.Pods > 0 && n >= rt.cfg.Pods {
		rt.endNs.CompareAndSwap(0, int64(now.Sub(rt.t0)))
		rt.stop()
	}
	return true
}

// forget forgets pod, assumed, and makes it pending in the truth; false
// (ForgetPod failed) stops the scheduler.
func (rt *realtimeRun) forget(pod *v1.Pod) bool {
	if err := rt.c.ForgetPod(rt.logger, pod); err != nil {
		rt.fail(fmt.Errorf("ForgetPod %s: %w", pod.Name, err))
		return false
	}
	rt.forgotten.Add(1)
	rt.e.truth.Pending(pod)
	rt.api.life.decided(pod, false)
	return true
}

// reader is reader goroutine i (W1): it takes the latest snapshot and
// reads -read-nodes random nodes of it, until the run stops.
func (rt *realtimeRun) reader(i int) {
	defer rt.readWG.Done()
	st := &rt.readers[i]
	r := rand.New(rand.NewPCG(uint64(rt.cfg.Seed), uint64(i)+5000))
	var sink int64
	for !rt.stopped.Load() {
		t := time.Now()
		snap := rt.c.Snapshot()
		if n := snap.NumNodes(); n > 0 {
			for k := 0; k < rt.cfg.ReadNodes; k++ {
				sink += snap.At(r.IntN(n)).Requested().MilliCPU
			}
		}
		st.lat.Record(time.Since(t))
		st.reads++
	}
	_ = sink
}

// fullSnapshots is the full-snapshot goroutine (W6): every
// -full-snapshot-every a new reader takes its first full snapshot, until
// the run stops.
func (rt *realtimeRun) fullSnapshots() {
	defer rt.readWG.Done()
	tk := time.NewTicker(rt.cfg.FullSnapshotEvery)
	defer tk.Stop()
	for {
		select {
		case <-rt.done:
			return
		case <-tk.C:
		}
		snap := schedcache.NewEmptySnapshot()
		t := time.Now()
		if err := rt.c.UpdateSnapshot(rt.logger, snap); err != nil {
			rt.fail(fmt.Errorf("UpdateSnapshot: %w", err))
			return
		}
		rt.full.Record(time.Since(t))
		rt.fulls++
	}
}

// serveAPI is the API server goroutine: it runs the churn and the
// informer and sends its result on apiDone once flush is closed.
func (rt *realtimeRun) serveAPI() {
	rt.apiDone <- rt.apiLoop()
}

// apiLoop runs the churn and the informer, each step when it is due or an
// event is emitted. After flush is closed (every producer has stopped) it
// delivers what is left, relists if events were lost, and returns.
func (rt *realtimeRun) apiLoop() error {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		timer.Reset(rt.apiWait())
		select {
		case <-rt.flush:
			return rt.apiFlush()
		case <-rt.inf.wake:
		case <-timer.C:
		case q := <-rt.apiReq:
			rt.world.RLock()
			err := q.fn(rt.since())
			rt.world.RUnlock()
			q.done <- err
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		if err := rt.apiStep(rt.since()); err != nil {
			return err
		}
	}
}

// apiWait returns how long the API server goroutine may sleep: until the
// informer's, the churn's or the next relist's due time, or an hour.
func (rt *realtimeRun) apiWait() time.Duration {
	rt.world.RLock()
	rt.inf.intake()
	next := rt.inf.next()
	if n := rt.api.next(); n >= 0 && (next < 0 || n < next) {
		next = n
	}
	rt.world.RUnlock()
	if len(rt.relists) > 0 && (next < 0 || rt.relists[0] < next) {
		next = rt.relists[0]
	}
	wait := time.Hour
	if next >= 0 {
		wait = max(next-rt.since(), 0)
	}
	return wait
}

// apiStep runs what is due at now: the relist (under the world's write
// lock), the churn and the informer's deliveries (under its read lock).
func (rt *realtimeRun) apiStep(now time.Duration) error {
	if rt.stopped.Load() {
		rt.api.stop()
	}
	if len(rt.relists) > 0 && now >= rt.relists[0] {
		rt.relists = rt.relists[1:]
		rt.world.Lock()
		err := rt.inf.relist(now, rt.e.truth)
		rt.world.Unlock()
		if err != nil {
			return err
		}
	}
	rt.world.RLock()
	defer rt.world.RUnlock()
	if rt.h.until != nil {
		defer func() { rt.counts.Store(&runProgress{Churn: rt.api.counts, Informer: rt.inf.counts}) }()
	}
	if err := rt.api.runDue(now); err != nil {
		return err
	}
	return rt.inf.deliverDue(now, false)
}

// apiFlush stops the churn and delivers every event left, relisting while
// events were lost.
func (rt *realtimeRun) apiFlush() error {
	rt.api.stop()
	for !rt.inf.settled() {
		if err := rt.inf.deliverDue(0, true); err != nil {
			return err
		}
		if len(rt.inf.dirty) > 0 {
			if err := rt.inf.relist(rt.since(), rt.e.truth); err != nil {
				return err
			}
		}
	}
	return nil
}

// supervise is the main goroutine's loop during the run: it audits on
// -audit-every and on demand, samples the pending queue and draws the
// progress bar every 100 ms, and returns when the run's time is up, the
// run has stopped (its pod count, a stall, a failure) or ctx is done.
func (rt *realtimeRun) supervise() {
	var auditC <-chan time.Time
	if rt.cfg.AuditEvery > 0 {
		at := time.NewTicker(rt.cfg.AuditEvery)
		defer at.Stop()
		auditC = at.C
	}
	deadline := rt.t0.Add(rt.limit)
	ticker := time.NewTicker(100 * time.Millisecond)
	defer ticker.Stop()
	rt.lastCount, rt.lastProgress = 0, rt.t0
	rt.rep.Stopped = "duration"
	var phasesOver chan struct{} // nil: never
	var deadlineC <-chan time.Time
	if rt.ph != nil {
		phasesOver = rt.ph.over
		// The phases may end any time: stop them at the deadline, not
		// at the next tick.
		dt := time.NewTimer(time.Until(deadline))
		defer dt.Stop()
		deadlineC = dt.C
	}
	for !rt.stopped.Load() && (time.Now().Before(deadline) || rt.keepGoing(deadline)) {
		select {
		case <-rt.ctx.Done():
			rt.fail(rt.ctx.Err())
		case <-auditC:
			rt.midAudit()
		case <-rt.h.auditNow:
			rt.midAudit()
		case <-phasesOver:
			rt.rep.Stopped = "phases"
			rt.stop()
		case <-deadlineC:
		case now := <-ticker.C:
			rt.sample(now)
			if !rt.stopped.Load() && rt.api.life.traceOver() {
				// The trace is used up and its pods settled (arrivals.go).
				rt.rep.Stopped, rt.traceEnd = "trace", now.Sub(rt.t0)
				rt.stop()
			}
		}
	}
}

// keepGoing reports, past the deadline, whether hooks.until keeps the run
// going (see there); it records how long the run went on when it stops
// doing so.
func (rt *realtimeRun) keepGoing(deadline time.Time) bool {
	if rt.h.until == nil {
		return false
	}
	var p runProgress
	if c := rt.counts.Load(); c != nil {
		p = *c
	}
	p.MidAudits = rt.rep.MidAudits.Count
	if !rt.h.until(p) && time.Since(deadline) < untilLimit {
		return true
	}
	rt.overran = rt.since()
	return false
}

// sample records the pending queue's length at the end of each 1 s
// window, stops a pod-count run that has stalled, and draws the progress
// bar.
func (rt *realtimeRun) sample(now time.Time) {
	cfg, rep := rt.cfg, rt.rep
	for time.Duration(len(rt.pendingAt)+1)*time.Second <= now.Sub(rt.t0) {
		rt.pendingAt = append(rt.pendingAt, len(rt.arr))
		rep.MaxPending = max(rep.MaxPending, len(rt.arr))
	}
	n := rt.scheduled.Load()
	if n != rt.lastCount {
		rt.lastCount, rt.lastProgress = n, now
	} else if cfg.Duration == 0 && cfg.Arrival != arrTrace && rt.ph == nil && now.Sub(rt.lastProgress) > stallLimit {
		rep.Stopped = "stalled"
		rt.e.warnings = append(rt.e.warnings, fmt.Sprintf("stopped after %v with no pod scheduled: %d of the %d pods scheduled", stallLimit, n, cfg.Pods))
		rt.stop()
	}
	frac := float64(now.Sub(rt.t0)) / float64(rt.limit)
	if cfg.Pods > 0 && float64(n)/float64(cfg.Pods) > frac {
		frac = float64(n) / float64(cfg.Pods)
	}
	if t := rt.api.life.traceTally(); t != nil && t.rows > 0 {
		frac = max(frac, float64(t.settled.Load())/float64(t.rows))
	}
	pending := len(rt.arr)
	if rt.ph != nil {
		frac, pending = rt.ph.progress()
	}
	rt.prog.runTick(frac, now.Sub(rt.t0), false, n, pending)
}

// midAudit pauses every writer (the world's write lock) and audits.
func (rt *realtimeRun) midAudit() {
	rt.world.Lock()
	defer rt.world.Unlock()
	t := time.Now()
	if err := rt.c.Sync(); err != nil {
		rt.fail(err)
		return
	}
	if rt.h.beforeAudit != nil {
		rt.h.beforeAudit(rt.c, rt.e.truth)
	}
	res := audit(rt.c, rt.e.truth, rt.inf, rt.cfg.AssumeTTL > 0, &rt.e.memo)
	ma := &rt.rep.MidAudits
	ma.Count++
	ma.MaxPauseMs = max(ma.MaxPauseMs, ms(time.Since(t)))
	if !res.OK {
		ma.Failed++
		if ma.FirstFail == nil {
			ma.FirstFail, ma.FirstFailAt = &res, rt.since().Seconds()
		}
	}
}

// report fills the report once wait has joined every goroutine: the
// run's figures, merged from every goroutine's, then the final audit.
func (rt *realtimeRun) report() (*Report, error) {
	rep := rt.rep
	rep.Wall = time.Since(rt.t0)
	rep.Elapsed = min(rep.Wall, rt.limit)
	if rt.overran > rt.limit {
		rep.Elapsed = rt.overran
	}
	if rt.traceEnd > 0 {
		rep.Elapsed = rt.traceEnd
	}
	if end := rt.endNs.Load(); end > 0 {
		rep.Elapsed = time.Duration(end)
		rep.Stopped = "pods"
	}
	// Pods still queued have arrived and were never scheduled: pending in
	// the API server.
	if rt.arr != nil {
		for len(rt.arr) > 0 {
			a := <-rt.arr
			rt.e.truth.Pending(a.pod)
			rep.PendingAtEnd++
		}
	}
	rep.Arrived = rt.arrived
	var win windows
	win.merge(&rt.iwin)
	for s := range rt.scheds {
		win.merge(&rt.scheds[s].win)
	}
	rep.Windows = windowsOf(win.sched, rep.Elapsed, time.Second)
	rep.Series = win.series(rep.Elapsed, rt.pendingAt)
	rep.Scheduled, rep.Forgotten, rep.FailedBindings = rt.scheduled.Load(), rt.forgotten.Load(), rt.failed.Load()
	rep.RefusedBindings = rt.refused.Load()
	rep.Conflicts, rep.Unschedulable = rt.conflicts.Load(), rt.unsched.Load()
	ha, hr, ht, hq, hrd := hist.New(), hist.New(), hist.New(), hist.New(), hist.New()
	for _, st := range rt.scheds {
		ha.Merge(st.assume)
		hr.Merge(st.read)
		ht.Merge(st.attempt)
		hq.Merge(st.queue)
	}
	for _, st := range rt.readers {
		hrd.Merge(st.lat)
		rep.Reads += st.reads
	}
	rep.Assume, rep.Read, rep.Attempt, rep.QueueDelay = summarise(ha), summarise(hr), summarise(ht), summarise(hq)
	rep.ReaderLatency, rep.FullSnapshot, rep.FullSnapshots = summarise(hrd), summarise(rt.full), rt.fulls
	rt.pickers.report(rep)
	if rt.ph != nil {
		rt.ph.finishReport(rep, rep.Elapsed)
	}
	if err := rt.e.finish(rt.cfg, rep, rt.h, rt.prog); err != nil {
		return nil, err
	}
	return rep, nil
}
