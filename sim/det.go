package sim

import (
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"os"
	"sort"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
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
	evDecide   evKind = iota // a scheduler makes one decision
	evDeliver                // the informer delivers the events due
	evAudit                  // an audit during the run (-audit-every)
	evArrive                 // open loop: pods arrive in the pending queue
	evChurn                  // the API server's churn actions due
	evRelist                 // the informer relists after a drop window
	evBindDone               // the dispatcher finishes a binding
)

type event struct {
	at     time.Duration
	seq    uint64 // ties broken by insertion order
	kind   evKind
	worker int
	pod    *v1.Pod
	call   *dispatchCall // evBindDone
	done   <-chan error  // evBindDone: the BindPod channel
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
	logger := klog.Background()
	rep := &Report{Config: cfg}
	clk := &virtualClock{}
	var tw *trace.Writer
	if cfg.Record != "" {
		f, err := os.Create(cfg.Record)
		if err != nil {
			return nil, bad("record", "%v", err)
		}
		defer f.Close()
		tw = trace.NewWriter(f)
	}
	e, err := setup(ctx, cfg, clk, prog, rep)
	if err != nil {
		return nil, err
	}
	defer e.c.Close()
	// A run that fails (a cache call returned an error) still ends its
	// trace: the failed call is in it with its error, and the End record
	// holds the state at the failure, so a replay checks both.
	traceClosed := false
	defer func() {
		if retErr != nil && tw != nil && !traceClosed {
			if t, err := trace.CacheTotals(e.c); err == nil {
				_ = tw.Close(t)
			}
		}
	}()
	c := e.c
	pickers, err := newPickers(ctx, h.picker, cfg)
	if err != nil {
		return nil, err
	}
	defer pickers.close()
	// rec records one call with its result err and returns err (or the
	// write's error).
	rec := func(r trace.Record, err error) error { return err }
	if tw != nil {
		rec = func(r trace.Record, err error) error {
			r.At = int64(clk.now.Load())
			if werr := tw.Call(r, err); werr != nil {
				return fmt.Errorf("-record: %w", werr)
			}
			return err
		}
		// The initial cluster went in through setup (its pods through the
		// asynchronous path); the trace holds it as the synchronous calls
		// that replay it.
		if e.asyncErrs.Load() != 0 {
			return nil, fmt.Errorf("-record: %d asynchronous load errors (first: %v)", e.asyncErrs.Load(), e.firstErr.Load())
		}
		for _, n := range e.cl.Nodes {
			if err := rec(trace.Record{Op: trace.AddNode, Node: n}, nil); err != nil {
				return nil, err
			}
		}
		for _, p := range e.cl.Pods {
			if err := rec(trace.Record{Op: trace.AddPod, Pod: p}, nil); err != nil {
				return nil, err
			}
		}
	}
	prog.printf("scheduling for %v of virtual time with %d virtual schedulers\n", cfg.limit(), cfg.Schedulers)
	limit := cfg.limit()

	r := workload.NewRand(cfg.Seed ^ 0x5eed)
	digest := sha256.New()
	note := func(at time.Duration, what, obj, node string) { traceEvent(digest, at, what, obj, node) }
	inf := newInformer(cfg, syncOps{c: c, rec: rec}, cfg.Seed)
	inf.note = note
	inf.load(e.cl.Nodes, e.cl.Pods)
	api := newAPIServer(cfg, e.truth, inf, e.cl)
	api.note = note
	inf.onAdd = api.delivered
	e.inf, e.api = inf, api
	e.disp.inf, e.disp.now = inf, func() time.Duration { return time.Duration(clk.now.Load()) }
	e.disp.r = r
	var q eventQueue
	var seq uint64
	push := func(ev event) {
		ev.seq = seq
		seq++
		heap.Push(&q, ev)
	}
	for w := 0; w < cfg.Schedulers; w++ {
		push(event{at: cfg.DecisionTime * time.Duration(w) / time.Duration(cfg.Schedulers), kind: evDecide, worker: w})
	}
	if cfg.AuditEvery > 0 {
		for at := cfg.AuditEvery; at < cfg.Duration; at += cfg.AuditEvery {
			push(event{at: at, kind: evAudit})
		}
	}
	if cfg.openLoop() {
		push(event{at: 0, kind: evArrive})
	}
	for _, at := range inf.relistTimes() {
		push(event{at: at, kind: evRelist})
	}
	var win windows
	var pendingAt []int // queue length at the end of each window
	var queue []arrival // the pending queue, FIFO from head
	head, arrived := 0, 0
	stopped, endAt, lastProgress := false, limit, time.Duration(0)
	ha, hr, ht, hq := hist.New(), hist.New(), hist.New(), hist.New()
	decisions := make([]int, cfg.Schedulers)
	start := time.Now()
	rep.Stopped = "duration"
	inf.win = &win
	// The informer's and the churn's next due times, each scheduled once.
	deliverAt, churnAt := time.Duration(-1), time.Duration(-1)
	reschedule := func() {
		inf.intake()
		if n := inf.next(); n >= 0 && (deliverAt < 0 || n < deliverAt) {
			deliverAt = n
			push(event{at: n, kind: evDeliver})
		}
		if n := api.next(); n >= 0 && n < limit && (churnAt < 0 || n < churnAt) {
			churnAt = n
			push(event{at: n, kind: evChurn})
		}
	}
	reschedule()
	// complete handles a binding's outcome.
	complete := func(at time.Duration, pod *v1.Pod, best string, berr error, tr time.Time) error {
		// As upstream's binding cycle: FinishBinding, then ForgetPod if the
		// binding failed.
		if err := rec(trace.Record{Op: trace.FinishBinding, Pod: pod}, c.FinishBinding(logger, pod)); err != nil {
			return fmt.Errorf("FinishBinding %s: %w", pod.Name, err)
		}
		if berr != nil {
			if err := rec(trace.Record{Op: trace.ForgetPod, Pod: pod}, c.ForgetPod(logger, pod)); err != nil {
				return fmt.Errorf("ForgetPod %s: %w", pod.Name, err)
			}
			e.truth.Pending(pod)
			if errors.Is(berr, ErrBindRefused) {
				rep.RefusedBindings++
			} else {
				rep.FailedBindings++
			}
			rep.Forgotten++
			traceEvent(digest, at, "bind-failed", pod.Name, best)
			return nil
		}
		rep.Scheduled++
		lastProgress = at
		traceEvent(digest, at, "bound", pod.Name, best)
		if !tr.IsZero() {
			took := time.Since(tr)
			ht.Record(took)
			win.scheduled(at, took)
		} else {
			win.scheduled(at, 0)
		}
		if cfg.Pods > 0 && rep.Scheduled >= cfg.Pods && !stopped {
			stopped, endAt = true, min(at+cfg.DecisionTime, limit)
			rep.Stopped = "pods"
		}
		return nil
	}
	for n := 0; ; n++ {
		reschedule()
		if q.Len() == 0 {
			// The run is over and every event delivered: a relist brings
			// back what a last drop window lost.
			if inf.intake(); len(inf.dirty) > 0 {
				if err := inf.relist(clk.Now().Sub(virtualEpoch), e.truth); err != nil {
					return nil, err
				}
				reschedule()
			}
			if q.Len() == 0 {
				break
			}
		}
		if n%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			virt := clk.Now().Sub(virtualEpoch)
			frac := float64(virt) / float64(limit)
			if cfg.Pods > 0 {
				frac = max(frac, float64(rep.Scheduled)/float64(cfg.Pods))
			}
			prog.tick(frac, "scheduling: %v virtual, %d pods scheduled, %d pending", virt.Truncate(time.Millisecond), rep.Scheduled, len(queue)-head)
		}
		ev := heap.Pop(&q).(event)
		if ev.kind == evDecide || ev.kind == evArrive || ev.kind == evChurn {
			if stopped || ev.at >= limit {
				continue // the scheduling phase is over; confirmations drain
			}
			if cfg.Duration == 0 && ev.at-lastProgress > stallLimit {
				stopped, endAt = true, ev.at
				rep.Stopped = "stalled"
				e.warnings = append(e.warnings, fmt.Sprintf("stopped after %v of virtual time with no pod scheduled: %d of the %d pods scheduled", stallLimit, rep.Scheduled, cfg.Pods))
				continue
			}
		}
		for !stopped && time.Duration(len(pendingAt)+1)*time.Second <= min(ev.at, limit) {
			pendingAt = append(pendingAt, len(queue)-head)
			rep.MaxPending = max(rep.MaxPending, len(queue)-head)
		}
		clk.set(ev.at)
		switch ev.kind {
		case evArrive:
			k, next := 1, time.Duration(0)
			if cfg.Arrival == arrBurst {
				k, next = cfg.BurstSize, cfg.BurstInterval
			} else {
				next = max(time.Duration(r.ExpFloat64()/cfg.Rate*float64(time.Second)), 1)
			}
			for j := 0; j < k; j++ {
				pod := e.cl.NewPod(r, fmt.Sprintf("arr-%d", arrived), "")
				arrived++
				queue = append(queue, arrival{pod: pod, at: ev.at})
				traceEvent(digest, ev.at, "arrive", pod.Name, "")
			}
			rep.MaxPending = max(rep.MaxPending, len(queue)-head)
			if len(queue)-head >= detQueueMax {
				stopped, endAt = true, ev.at
				rep.Stopped = "queue-full"
				e.warnings = append(e.warnings, fmt.Sprintf("stopped at %v of virtual time: %d pods pending, the most a deterministic run queues (the arrivals outrun the schedulers)", ev.at, len(queue)-head))
			}
			if head > 4096 && head*2 > len(queue) {
				queue = append(queue[:0:0], queue[head:]...)
				head = 0
			}
			push(event{at: ev.at + next, kind: evArrive})
		case evAudit:
			if h.beforeAudit != nil {
				h.beforeAudit(c, e.truth)
			}
			res := audit(c, e.truth, inf, false, &e.memo)
			rep.MidAudits.Count++
			if !res.OK {
				rep.MidAudits.Failed++
				if rep.MidAudits.FirstFail == nil {
					rep.MidAudits.FirstFail, rep.MidAudits.FirstFailAt = &res, ev.at.Seconds()
				}
			}
		case evDecide:
			push(event{at: ev.at + cfg.DecisionTime, kind: evDecide, worker: ev.worker})
			var pod *v1.Pod
			arrivedAt := ev.at
			if cfg.openLoop() {
				if head == len(queue) {
					continue // idle: nothing pending
				}
				pod, arrivedAt = queue[head].pod, queue[head].at
				queue[head] = arrival{}
				head++
			} else {
				i := decisions[ev.worker]
				decisions[ev.worker]++
				pod = e.cl.NewPod(r, fmt.Sprintf("sched-%d-%d", ev.worker, i), "")
			}
			info, err := nodeinfo.NewPodInfo(pod)
			if err != nil {
				return nil, err
			}
			tr := time.Now()
			best, err := pickers.pickers[ev.worker].Pick(ctx, c.Snapshot(), info, r, pickers.rejected[ev.worker])
			if err != nil {
				return nil, fmt.Errorf("pick %s: %w", pod.Name, err)
			}
			hr.Record(time.Since(tr))
			if best == "" {
				rep.Unschedulable++
				traceEvent(digest, ev.at, "unschedulable", pod.Name, "")
				continue
			}
			pod.Spec.NodeName = best
			ta := time.Now()
			if err := rec(trace.Record{Op: trace.AssumePod, Pod: pod}, c.AssumePod(logger, pod)); err != nil {
				return nil, fmt.Errorf("AssumePod %s: %w", pod.Name, err)
			}
			ha.Record(time.Since(ta))
			if cfg.openLoop() {
				hq.Record(ev.at - arrivedAt)
			}
			e.truth.Assume(pod, best)
			ch, err := c.BindPod(bindingOf(pod, best))
			if err != nil {
				return nil, fmt.Errorf("BindPod %s: %w", pod.Name, err)
			}
			for _, call := range e.disp.take() {
				if cfg.BindLatency > 0 {
					push(event{at: ev.at + cfg.BindLatency, kind: evBindDone, pod: pod, call: call, done: ch})
					continue
				}
				e.disp.execute(call)
				if err := complete(ev.at, pod, best, <-ch, tr); err != nil {
					return nil, err
				}
			}
		case evBindDone:
			e.disp.execute(ev.call)
			if err := complete(ev.at, ev.pod, ev.pod.Spec.NodeName, <-ev.done, time.Time{}); err != nil {
				return nil, err
			}
		case evDeliver:
			if ev.at == deliverAt {
				deliverAt = -1
			}
			if err := inf.deliverDue(ev.at, false); err != nil {
				return nil, err
			}
		case evChurn:
			if ev.at == churnAt {
				churnAt = -1
			}
			if err := api.runDue(ev.at); err != nil {
				return nil, err
			}
		case evRelist:
			if err := inf.relist(ev.at, e.truth); err != nil {
				return nil, err
			}
		}
	}
	rep.Wall = time.Since(start)
	rep.Elapsed = endAt
	rep.Windows = windowsOf(win.sched, endAt, time.Second)
	rep.Series = win.series(endAt, pendingAt)
	rep.Assume, rep.Read, rep.Attempt = summarise(ha), summarise(hr), summarise(ht)
	rep.Arrived, rep.PendingAtEnd = int64(arrived), len(queue)-head
	rep.QueueDelay = summarise(hq)
	pickers.report(rep)
	for _, p := range queue[head:] {
		e.truth.Pending(p.pod) // arrived, never scheduled: pending in the API server
	}
	if err := e.finish(cfg, rep, h, prog); err != nil {
		return nil, err
	}
	stateDigest(digest, e.truth, c)
	rep.Digest = "sha256:" + hex.EncodeToString(digest.Sum(nil))
	if tw != nil {
		t, err := trace.CacheTotals(c)
		if err != nil {
			return nil, err
		}
		traceClosed = true
		if err := tw.Close(t); err != nil {
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
