package sim

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"math/rand/v2"
	"sort"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/hist"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/sim/trace"
	"github.com/schedcache/schedcache/workload"
)

// virtualEpoch is time zero of a deterministic run.
var virtualEpoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// virtualClock is the cache's clock in deterministic mode: the event loop
// sets it; its timers never fire (the run uses no TTL, so the cache makes
// none).
//
// Contract: safe for concurrent use; Now returns what the loop set last.
type virtualClock struct {
	now atomic.Int64 // atomic; nanoseconds since virtualEpoch
}

func (c *virtualClock) Now() time.Time { return virtualEpoch.Add(time.Duration(c.now.Load())) }
func (c *virtualClock) set(d time.Duration) {
	c.now.Store(int64(d))
}
func (c *virtualClock) NewTimer(time.Duration) schedcache.Timer { return stoppedTimer{} }

type stoppedTimer struct{}

func (stoppedTimer) C() <-chan time.Time      { return nil }
func (stoppedTimer) Reset(time.Duration) bool { return false }
func (stoppedTimer) Stop() bool               { return false }

type evKind uint8

const (
	evDecide    evKind = iota // a scheduler makes one decision
	evDeliver                 // the informer delivers the events due
	evAudit                   // an audit during the run (-audit-every)
	evArrive                  // open loop: pods arrive in the pending queue
	evChurn                   // the API server's churn actions due
	evRelist                  // the informer relists after a drop window
	evBindDone                // the dispatcher finishes a binding
	evPhase                   // a phase's timer (phaserun.go): worker indexes phaseRun.timers
	evPermit                  // a waiting pod's Permit timeout (bindcycle.go)
	evBindCycle               // a pod's binding cycle (bindcycle.go)
)

type event struct {
	at     time.Duration
	seq    uint64 // ties broken by insertion order
	kind   evKind
	worker int
	pod    *v1.Pod
	call   *dispatchCall // evBindDone
	done   <-chan error  // evBindDone: the BindPod channel
	gen    uint64        // evPermit: the wait's generation
	note   string        // evPermit: the plugin; evBindCycle: the node
	tr     time.Time     // evBindCycle: when the attempt began (zero: unknown)
}

// eventQueue is a min-heap by (at, seq), owned by the event loop.
type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

// runDeterministic runs the simulation on the calling goroutine in virtual
// time: every arrival, decision, confirmation, failure and deletion comes
// from one PRNG seeded with cfg.Seed and one event queue, and every cache
// call is synchronous, so the same seed gives the same run event for event.
// The digest covers the event trace and the final state (the API server's
// pods and the cache's per-node totals).
func runDeterministic(ctx context.Context, cfg Config, prog *progress, h hooks) (_ *Report, retErr error) {
	d := &detRun{ctx: ctx, cfg: cfg, h: h, prog: prog, logger: klog.Background(), rep: &Report{Config: cfg}, clk: &virtualClock{}}
	defer func() { d.close(retErr) }()
	if err := d.open(); err != nil {
		return nil, err
	}
	d.prime()
	if err := d.loop(); err != nil {
		return nil, err
	}
	return d.report()
}

// detRun is one deterministic run: its state and one method per event
// kind, the event loop and the report. It has one goroutine, the caller
// of runDeterministic (the event loop), which owns every field not noted
// otherwise; the cache's own goroutines belong to the cache, which close
// stops. The fields noted immutable are set by open and prime, before the
// loop.
type detRun struct {
	ctx     context.Context   // immutable
	cfg     Config            // immutable
	h       hooks             // immutable
	prog    *progress         // owned by the loop
	logger  klog.Logger       // immutable
	rep     *Report           // owned by the loop
	clk     *virtualClock     // immutable pointer; set by the loop only (the cache reads it)
	f       *recordFile       // immutable: -record's file (nil: none; gzip for .gz); closed by close
	tw      *trace.Writer     // immutable: -record's trace (nil: none)
	e       *env              // immutable pointer; its fields say who owns them; its cache closed by close
	c       *schedcache.Cache // immutable: e.c
	pickers *schedPickers     // immutable pointer; closed by close
	limit   time.Duration     // immutable: cfg.limit()
	r       *rand.Rand        // owned by the loop: the run's one PRNG (also the dispatcher's)
	digest  hash.Hash         // owned by the loop: the event trace, then the final state
	inf     *informer         // owned by the loop
	api     *apiServer        // owned by the loop
	t0      time.Time         // immutable: the wall-clock start of the scheduling phase

	q            eventQueue      // owned by the loop
	seq          uint64          // owned by the loop: the next event's seq
	win          windows         // owned by the loop
	pendingAt    []int           // owned by the loop: the queue length at the end of each window
	queue        []arrival       // owned by the loop: the pending queue, FIFO from head
	head         int             // owned by the loop
	arrived      int             // owned by the loop
	stopped      bool            // owned by the loop: the scheduling phase is over
	endAt        time.Duration   // owned by the loop: when it ended
	lastProgress time.Duration   // owned by the loop: when a pod was last bound
	ha, hr       *hist.Histogram // owned by the loop: assume and snapshot read latency
	ht, hq       *hist.Histogram // owned by the loop: attempt latency and queueing delay
	decisions    []int           // owned by the loop: decisions[w] made by virtual scheduler w
	deliverAt    time.Duration   // owned by the loop: the informer's next due time scheduled (-1: none)
	churnAt      time.Duration   // owned by the loop: the churn's next due time scheduled (-1: none)
	traceClosed  bool            // owned by the loop: the trace's End record is written
	ph           *phaseRun       // owned by the loop: the phases being run (nil: none; phaserun.go)
	feed         *traceFeed      // owned by the loop: -arrivals-from's pods (nil: none yet; arrivals.go)
}

// open creates -record's file, sets the cluster up, makes the pickers and
// records the initial cluster in the trace.
func (d *detRun) open() error {
	cfg := d.cfg
	if cfg.Record != "" {
		f, err := createRecord(cfg.Record)
		if err != nil {
			return bad("record", "%v", err)
		}
		d.f = f
		d.tw = trace.NewWriter(f)
	}
	e, err := setup(d.ctx, cfg, d.clk, d.prog, d.rep, podGroupsOn(d.h.picker) && cfg.Phases != nil)
	if err != nil {
		return err
	}
	d.e, d.c = e, e.c
	pickers, err := newPickers(d.ctx, d.h.picker, cfg, d.c)
	if err != nil {
		return err
	}
	d.pickers = pickers
	if d.tw != nil {
		// The initial cluster went in through setup (its pods through the
		// asynchronous path); the trace holds it as the synchronous calls
		// that replay it.
		if e.asyncErrs.Load() != 0 {
			return fmt.Errorf("-record: %d asynchronous load errors (first: %v)", e.asyncErrs.Load(), e.firstErr.Load())
		}
		for _, n := range e.cl.Nodes {
			if err := d.rec(trace.Record{Op: trace.AddNode, Node: n}, nil); err != nil {
				return err
			}
		}
		for _, p := range e.cl.Pods {
			if err := d.rec(trace.Record{Op: trace.AddPod, Pod: p}, nil); err != nil {
				return err
			}
		}
	}
	if cfg.Phases != nil {
		d.prog.printf("running %d phases with %d virtual schedulers\n", len(cfg.Phases.phases), cfg.Schedulers)
	} else {
		d.prog.printf("scheduling for %v of virtual time with %d virtual schedulers\n", cfg.limit(), cfg.Schedulers)
	}
	return nil
}

// close releases what open made, in reverse order. A run that fails (err
// not nil: a cache call returned an error) still ends its trace: the
// failed call is in it with its error, and the End record holds the state
// at the failure, so a replay checks both.
func (d *detRun) close(err error) {
	if d.pickers != nil {
		d.pickers.close()
	}
	if d.e != nil {
		if err != nil && d.tw != nil && !d.traceClosed {
			if t, err := trace.CacheTotals(d.e.c); err == nil {
				_ = d.tw.Close(t)
			}
		}
		d.e.c.Close()
	}
	if d.f != nil {
		d.f.Close()
	}
}

// rec records one call with its result err and returns err (or the
// write's error); without -record it returns err.
func (d *detRun) rec(r trace.Record, err error) error {
	if d.tw == nil {
		return err
	}
	r.At = int64(d.clk.now.Load())
	if werr := d.tw.Call(r, err); werr != nil {
		return fmt.Errorf("-record: %w", werr)
	}
	return err
}

// note adds one event to the digest.
func (d *detRun) note(at time.Duration, what, obj, node string) {
	traceEvent(d.digest, at, what, obj, node)
}

// now is the virtual run time.
func (d *detRun) now() time.Duration { return time.Duration(d.clk.now.Load()) }

// prime wires the informer, the API server and the dispatcher, and queues
// the first events: each scheduler's first decision, the audits, the
// first arrival and the relists.
func (d *detRun) prime() {
	cfg, e := d.cfg, d.e
	d.limit = cfg.limit()
	d.r = workload.NewRand(cfg.Seed ^ 0x5eed)
	d.digest = sha256.New()
	d.inf = newInformer(cfg, syncOps{c: d.c, rec: d.rec}, cfg.Seed)
	d.inf.note = d.note
	d.inf.load(e.cl.Nodes, e.cl.Pods)
	d.api = newAPIServer(cfg, e.truth, d.inf, e.cl)
	d.api.note = d.note
	d.inf.onAdd = d.api.delivered
	e.inf, e.api = d.inf, d.api
	e.disp.inf, e.disp.now = d.inf, d.now
	e.disp.r = d.r
	for w := 0; w < cfg.Schedulers; w++ {
		d.push(event{at: cfg.DecisionTime * time.Duration(w) / time.Duration(cfg.Schedulers), kind: evDecide, worker: w})
	}
	if cfg.AuditEvery > 0 {
		for at := cfg.AuditEvery; at < cfg.Duration; at += cfg.AuditEvery {
			d.push(event{at: at, kind: evAudit})
		}
	}
	if cfg.openLoop() {
		d.push(event{at: 0, kind: evArrive})
	}
	for _, at := range d.inf.relistTimes() {
		d.push(event{at: at, kind: evRelist})
	}
	d.endAt = d.limit
	d.ha, d.hr, d.ht, d.hq = hist.New(), hist.New(), hist.New(), hist.New()
	d.decisions = make([]int, cfg.Schedulers)
	d.t0 = time.Now()
	d.rep.Stopped = "duration"
	d.inf.win = &d.win
	// The informer's and the churn's next due times, each scheduled once.
	d.deliverAt, d.churnAt = -1, -1
	if cfg.Phases != nil {
		d.ph = newPhaseRun(d)
		d.api.onComplete = d.ph.completed
		d.inf.onEvent = d.ph.clusterEvent
		if d.ph.groups {
			// A pod added (bound) may complete a gang: the pods the
			// picker's PreEnqueue held are asked again (GangScheduling's
			// queueing hint for an assigned pod's add).
			delivered := d.inf.onAdd
			d.inf.onAdd = func(now time.Duration, p *v1.Pod) error {
				if err := delivered(now, p); err != nil {
					return err
				}
				return d.ph.retryPreEnqueue(now)
			}
		}
	}
	d.reschedule()
}

// push queues ev after every event queued before it at the same time.
func (d *detRun) push(ev event) {
	ev.seq = d.seq
	d.seq++
	heap.Push(&d.q, ev)
}

// reschedule queues the informer's and the churn's next due times, when
// earlier than those queued.
func (d *detRun) reschedule() {
	d.inf.intake()
	if n := d.inf.next(); n >= 0 && (d.deliverAt < 0 || n < d.deliverAt) {
		d.deliverAt = n
		d.push(event{at: n, kind: evDeliver})
	}
	if n := d.api.next(); n >= 0 && n < d.limit && (d.churnAt < 0 || n < d.churnAt) {
		d.churnAt = n
		d.push(event{at: n, kind: evChurn})
	}
}

// loop is the event loop: it handles the events in (time, seq) order
// until none is left.
func (d *detRun) loop() error {
	for n := 0; ; n++ {
		d.reschedule()
		if d.q.Len() == 0 {
			// The run is over and every event delivered: a relist brings
			// back what a last drop window lost.
			if d.inf.intake(); len(d.inf.dirty) > 0 {
				if err := d.inf.relist(d.clk.Now().Sub(virtualEpoch), d.e.truth); err != nil {
					return err
				}
				d.reschedule()
			}
			if d.q.Len() == 0 {
				return nil
			}
		}
		if n%1024 == 0 {
			if d.ctx.Err() != nil {
				d.interrupt()
			}
			d.tick()
		}
		ev := heap.Pop(&d.q).(event)
		if !d.admit(ev) {
			continue
		}
		for !d.stopped && time.Duration(len(d.pendingAt)+1)*time.Second <= min(ev.at, d.limit) {
			d.pendingAt = append(d.pendingAt, len(d.queue)-d.head)
			d.rep.MaxPending = max(d.rep.MaxPending, len(d.queue)-d.head)
		}
		d.clk.set(ev.at)
		if err := d.handle(ev); err != nil {
			if !d.interrupted(err) {
				return err
			}
			d.interrupt()
		}
		if !d.stopped && d.api.life.traceOver() {
			// The trace is used up and its pods settled (arrivals.go).
			d.stopped, d.endAt = true, ev.at
			d.rep.Stopped = "trace"
		}
	}
}

// interrupt ends the scheduling phase once ctx is cancelled: decisions,
// arrivals and churn are dropped from now on while the confirmations
// drain, and the run reports what it did, stopped "interrupted".
func (d *detRun) interrupt() {
	if d.rep.Stopped == "interrupted" {
		return
	}
	if !d.stopped {
		d.stopped, d.endAt = true, min(d.clk.Now().Sub(virtualEpoch), d.limit)
	}
	d.rep.Stopped = "interrupted"
}

// interrupted says whether err is the interrupt's doing, not a failure:
// ctx is cancelled and err is its error or the cache's ErrClosed (a call
// made as the run was being stopped).
func (d *detRun) interrupted(err error) bool {
	cerr := d.ctx.Err()
	return cerr != nil && (errors.Is(err, cerr) || errors.Is(err, schedcache.ErrClosed))
}

// tick draws the progress bar.
func (d *detRun) tick() {
	virt := d.clk.Now().Sub(virtualEpoch)
	frac := float64(virt) / float64(d.limit)
	if d.cfg.Pods > 0 {
		frac = max(frac, float64(d.rep.Scheduled)/float64(d.cfg.Pods))
	}
	pending := len(d.queue) - d.head
	if d.ph != nil {
		frac, pending = d.ph.progress()
	}
	d.prog.runTick(frac, virt, true, d.rep.Scheduled, pending)
}

// admit says whether ev is handled: once the scheduling phase is over
// (its time, its pod count, a stall, a full queue) decisions, arrivals
// and churn are dropped while confirmations drain. A pod-count run that
// has bound no pod for stallLimit stops here.
func (d *detRun) admit(ev event) bool {
	if ev.kind != evDecide && ev.kind != evArrive && ev.kind != evChurn && ev.kind != evPhase {
		return true
	}
	if d.stopped || ev.at >= d.limit {
		return false
	}
	if d.cfg.Duration == 0 && d.ph == nil && d.cfg.Arrival != arrTrace && ev.at-d.lastProgress > stallLimit {
		d.stopped, d.endAt = true, ev.at
		d.rep.Stopped = "stalled"
		d.e.warnings = append(d.e.warnings, fmt.Sprintf("stopped after %v of virtual time with no pod scheduled: %d of the %d pods scheduled", stallLimit, d.rep.Scheduled, d.cfg.Pods))
		return false
	}
	return true
}

// handle handles one event, at its time.
func (d *detRun) handle(ev event) error {
	switch ev.kind {
	case evArrive:
		d.arrive(ev)
	case evAudit:
		d.midAudit(ev)
	case evDecide:
		return d.decide(ev)
	case evBindDone:
		return d.bindDone(ev)
	case evDeliver:
		return d.deliver(ev)
	case evChurn:
		return d.churn(ev)
	case evRelist:
		return d.inf.relist(ev.at, d.e.truth)
	case evPhase:
		return d.ph.handle(ev)
	case evPermit:
		return d.ph.expire(ev)
	case evBindCycle:
		return d.ph.bindCycle(ev)
	}
	return nil
}

// arrive (evArrive) puts the next arrival's pods in the pending queue and
// queues the one after; a queue of detQueueMax stops the run.
func (d *detRun) arrive(ev event) {
	cfg := d.cfg
	if cfg.Arrival == arrTrace {
		d.arriveTrace(ev)
		return
	}
	k, next := 1, time.Duration(0)
	if cfg.Arrival == arrBurst {
		k, next = cfg.BurstSize, cfg.BurstInterval
	} else {
		next = max(time.Duration(d.r.ExpFloat64()/cfg.Rate*float64(time.Second)), 1)
	}
	for j := 0; j < k; j++ {
		pod := d.e.cl.NewPod(d.r, fmt.Sprintf("arr-%d", d.arrived), "")
		d.arrived++
		d.queue = append(d.queue, arrival{pod: pod, at: ev.at})
		traceEvent(d.digest, ev.at, "arrive", pod.Name, "")
	}
	d.afterArrivals(ev.at, "the arrivals outrun the schedulers")
	d.push(event{at: ev.at + next, kind: evArrive})
}

// afterArrivals follows arrivals at virtual time at: it records the
// pending queue's high-water mark, stops a run whose queue is full (why
// says what outran the schedulers) and compacts the queue.
func (d *detRun) afterArrivals(at time.Duration, why string) {
	d.rep.MaxPending = max(d.rep.MaxPending, len(d.queue)-d.head)
	if len(d.queue)-d.head >= detQueueMax {
		d.stopped, d.endAt = true, at
		d.rep.Stopped = "queue-full"
		d.e.warnings = append(d.e.warnings, fmt.Sprintf("stopped at %v of virtual time: %d pods pending, the most a deterministic run queues (%s)", at, len(d.queue)-d.head, why))
	}
	if d.head > 4096 && d.head*2 > len(d.queue) {
		d.queue = append(d.queue[:0:0], d.queue[d.head:]...)
		d.head = 0
	}
}

// midAudit (evAudit) audits the cache during the run.
func (d *detRun) midAudit(ev event) {
	if d.h.beforeAudit != nil {
		d.h.beforeAudit(d.c, d.e.truth)
	}
	res := audit(d.c, d.e.truth, d.inf, false, &d.e.memo)
	ma := &d.rep.MidAudits
	ma.Count++
	if !res.OK {
		ma.Failed++
		if ma.FirstFail == nil {
			ma.FirstFail, ma.FirstFailAt = &res, ev.at.Seconds()
		}
	}
}

// decide (evDecide) is one decision of virtual scheduler ev.worker: it
// queues the scheduler's next decision, takes a pod (the pending queue's
// head in the open loop, a new one in the closed loop), picks a node and
// binds it there.
func (d *detRun) decide(ev event) error {
	if d.ph != nil {
		return d.ph.decide(ev)
	}
	d.push(event{at: ev.at + d.cfg.DecisionTime, kind: evDecide, worker: ev.worker})
	var pod *v1.Pod
	arrivedAt := ev.at
	if p := d.e.takeLoaded(); p != nil {
		pod, arrivedAt = p, 0 // pending since the start
	} else if d.cfg.openLoop() {
		if d.head == len(d.queue) {
			return nil // idle: nothing pending
		}
		pod, arrivedAt = d.queue[d.head].pod, d.queue[d.head].at
		d.queue[d.head] = arrival{}
		d.head++
	} else {
		i := d.decisions[ev.worker]
		d.decisions[ev.worker]++
		pod = d.e.cl.NewPod(d.r, fmt.Sprintf("sched-%d-%d", ev.worker, i), "")
	}
	return d.attempt(ev, pod, arrivedAt)
}

// attempt picks a node for pod (pending since arrivedAt) and binds it
// there, or counts it unschedulable.
func (d *detRun) attempt(ev event, pod *v1.Pod, arrivedAt time.Duration) error {
	info, err := nodeinfo.NewPodInfo(pod)
	if err != nil {
		return err
	}
	tr := time.Now()
	snap := d.c.Snapshot()
	best, err := d.pickers.pick(d.ctx, ev.worker, snap, info, d.r)
	if isAttemptError(err) {
		// The picker failed this attempt alone (counted by pick).
		traceEvent(d.digest, ev.at, "attempt-error", pod.Name, "")
		if d.ph != nil {
			return d.ph.attemptFailed(ev.at, pod)
		}
		d.api.life.decided(pod, false)
		return nil
	}
	if err != nil {
		return fmt.Errorf("pick %s: %w", pod.Name, err)
	}
	d.hr.Record(time.Since(tr))
	if best != "" && d.ph != nil && d.ph.preemptors[ev.worker] == nil && d.ph.reserved(best, pod) {
		best = "" // the room a preemptor made there is its own (the stand-in's reservation)
	}
	if best == "" {
		d.rep.Unschedulable++
		traceEvent(d.digest, ev.at, "unschedulable", pod.Name, "")
		if d.ph != nil {
			return d.ph.unschedulable(ev, pod, snap)
		}
		d.api.life.decided(pod, false)
		return nil
	}
	return d.bind(ev, pod, best, arrivedAt, tr)
}

// bind assumes pod on best and binds it through the dispatcher: at once
// without -bind-latency, else with an evBindDone after it. tr is when the
// attempt began.
func (d *detRun) bind(ev event, pod *v1.Pod, best string, arrivedAt time.Duration, tr time.Time) error {
	pod.Spec.NodeName = best
	if d.ph != nil {
		// A phase pod starts as it is bound (preemption ranks victims
		// by their start times; without one upstream reads the clock).
		pod.Status.StartTime = &metav1.Time{Time: virtualEpoch.Add(ev.at)}
	}
	ta := time.Now()
	if err := d.rec(trace.Record{Op: trace.AssumePod, Pod: pod}, d.c.AssumePod(d.logger, pod)); err != nil {
		return fmt.Errorf("AssumePod %s: %w", pod.Name, err)
	}
	d.ha.Record(time.Since(ta))
	if d.cfg.openLoop() {
		d.hq.Record(ev.at - arrivedAt)
	}
	d.e.truth.Assume(pod, best)
	d.api.life.submitted(pod, arrivedAt)
	if d.ph != nil {
		if held, err := d.ph.assumed(ev.at, pod, best, tr); held || err != nil {
			return err // a gang member waits for its gang
		}
		if d.ph.binders != nil {
			return d.ph.reserve(ev.at, ev.worker, pod, best, tr)
		}
	}
	return d.dispatch(ev.at, pod, best, tr)
}

// dispatch binds the assumed pod to best at at through the dispatcher.
func (d *detRun) dispatch(at time.Duration, pod *v1.Pod, best string, tr time.Time) error {
	ch, err := d.c.BindPod(bindingOf(pod, best))
	if err != nil {
		return fmt.Errorf("BindPod %s: %w", pod.Name, err)
	}
	for _, call := range d.e.disp.take() {
		if d.cfg.BindLatency > 0 {
			d.push(event{at: at + d.cfg.BindLatency, kind: evBindDone, pod: pod, call: call, done: ch})
			continue
		}
		d.e.disp.execute(call)
		if err := d.complete(at, pod, best, <-ch, tr, nil); err != nil {
			return err
		}
	}
	return nil
}

// bindDone (evBindDone): the dispatcher finishes a binding.
func (d *detRun) bindDone(ev event) error {
	d.e.disp.execute(ev.call)
	return d.complete(ev.at, ev.pod, ev.pod.Spec.NodeName, <-ev.done, time.Time{}, nil)
}

// complete handles a binding's outcome berr at at: as upstream's binding
// cycle, FinishBinding, then ForgetPod if the binding failed. tr is when
// the attempt began (zero: unknown, the binding took -bind-latency).
// unreserve, when not nil, is the binding cycle's (bindcycle.go): it runs
// between FinishBinding and ForgetPod of a failed binding, and the
// unschedulable pods then move, as upstream's handleBindingCycleError.
func (d *detRun) complete(at time.Duration, pod *v1.Pod, best string, berr error, tr time.Time, unreserve func()) error {
	rep := d.rep
	if err := d.rec(trace.Record{Op: trace.FinishBinding, Pod: pod}, d.c.FinishBinding(d.logger, pod)); err != nil {
		return fmt.Errorf("FinishBinding %s: %w", pod.Name, err)
	}
	if berr != nil {
		if unreserve != nil {
			unreserve()
		}
		if err := d.rec(trace.Record{Op: trace.ForgetPod, Pod: pod}, d.c.ForgetPod(d.logger, pod)); err != nil {
			return fmt.Errorf("ForgetPod %s: %w", pod.Name, err)
		}
		d.e.truth.Pending(pod)
		if errors.Is(berr, ErrBindRefused) {
			rep.RefusedBindings++
		} else {
			rep.FailedBindings++
		}
		rep.Forgotten++
		traceEvent(d.digest, at, "bind-failed", pod.Name, best)
		if d.ph != nil {
			if unreserve != nil {
				d.ph.clusterEvent(at)
			}
			d.ph.bindFailed(at, pod)
		}
		d.api.life.decided(pod, false)
		return nil
	}
	rep.Scheduled++
	d.lastProgress = at
	traceEvent(d.digest, at, "bound", pod.Name, best)
	var took time.Duration
	if !tr.IsZero() {
		took = time.Since(tr)
		d.ht.Record(took)
		d.win.scheduled(at, took)
	} else {
		d.win.scheduled(at, 0)
	}
	if d.ph != nil {
		d.ph.bound(at, pod, took, !tr.IsZero())
	}
	d.api.life.decided(pod, true)
	if d.cfg.Pods > 0 && rep.Scheduled >= d.cfg.Pods && !d.stopped {
		d.stopped, d.endAt = true, min(at+d.cfg.DecisionTime, d.limit)
		rep.Stopped = "pods"
	}
	return nil
}

// deliver (evDeliver): the informer delivers the events due.
func (d *detRun) deliver(ev event) error {
	if ev.at == d.deliverAt {
		d.deliverAt = -1
	}
	return d.inf.deliverDue(ev.at, false)
}

// churn (evChurn): the API server's churn actions due.
func (d *detRun) churn(ev event) error {
	if ev.at == d.churnAt {
		d.churnAt = -1
	}
	return d.api.runDue(ev.at)
}

// report fills the report once the loop is over, runs the final audit,
// adds the final state to the digest and ends the trace.
func (d *detRun) report() (*Report, error) {
	rep := d.rep
	rep.Wall = time.Since(d.t0)
	rep.Elapsed = d.endAt
	rep.Windows = windowsOf(d.win.sched, d.endAt, time.Second)
	rep.Series = d.win.series(d.endAt, d.pendingAt)
	rep.Assume, rep.Read, rep.Attempt = summarise(d.ha), summarise(d.hr), summarise(d.ht)
	rep.Arrived, rep.PendingAtEnd = int64(d.arrived), len(d.queue)-d.head
	rep.QueueDelay = summarise(d.hq)
	d.pickers.report(rep)
	if d.ph != nil {
		d.ph.finishReport(rep)
	}
	for _, p := range d.queue[d.head:] {
		d.e.truth.Pending(p.pod) // arrived, never scheduled: pending in the API server
	}
	if err := d.e.finish(d.cfg, rep, d.h, d.prog); err != nil {
		return nil, err
	}
	stateDigest(d.digest, d.e.truth, d.c)
	rep.Digest = "sha256:" + hex.EncodeToString(d.digest.Sum(nil))
	if d.tw != nil {
		t, err := trace.CacheTotals(d.c)
		if err != nil {
			return nil, err
		}
		d.traceClosed = true
		if err := d.tw.Close(t); err != nil {
			return nil, fmt.Errorf("-record: %w", err)
		}
		if err := d.f.finish(); err != nil {
			return nil, fmt.Errorf("-record: %w", err)
		}
	}
	return rep, nil
}

func traceEvent(h hash.Hash, at time.Duration, what, pod, node string) {
	fmt.Fprintf(h, "%d %s %s %s\n", int64(at), what, pod, node)
}

// stateDigest adds the final state to h: the API server's pods sorted by
// UID, then the cache's nodes sorted by name with their pod counts and
// requested totals.
func stateDigest(h hash.Hash, truth *Truth, c *schedcache.Cache) {
	type rec struct{ uid, node string }
	pods := make([]rec, 0, truth.Len())
	truth.pods.Range(func(uid string, r podRecord) bool {
		node := r.Node
		if !r.Bound {
			node = "<pending>"
		}
		pods = append(pods, rec{uid, node})
		return true
	})
	sort.Slice(pods, func(i, j int) bool { return pods[i].uid < pods[j].uid })
	fmt.Fprintf(h, "pods %d\n", len(pods))
	for _, p := range pods {
		fmt.Fprintf(h, "%s %s\n", p.uid, p.node)
	}
	snap := c.Snapshot()
	lines := make([]string, 0, snap.NumNodes())
	snap.Range(func(_ int, ni *nodeinfo.NodeInfo) bool {
		req := ni.Requested()
		lines = append(lines, fmt.Sprintf("%s %d %d %d", ni.Node().Name, ni.NumPods(), req.MilliCPU, req.Memory))
		return true
	})
	sort.Strings(lines)
	fmt.Fprintf(h, "nodes %d\n", len(lines))
	for _, l := range lines {
		fmt.Fprintln(h, l)
	}
}
