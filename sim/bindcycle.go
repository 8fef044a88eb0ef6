package sim

import (
	"context"
	"fmt"
	"io"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache/sim/trace"
)

// BindingCycle is an optional interface of a NodePicker: upstream's
// binding cycle (Reserve, Permit, WaitOnPermit, PreBind, Bind, PostBind,
// Unreserve) for the pods it picks. A phases run (deterministic mode)
// uses it when every scheduler's picker implements it; otherwise the
// cache calls alone stand for the binding cycle (AssumePod, BindPod,
// FinishBinding, ForgetPod) and gangs are the simulator's stand-in.
// cmd/loadgen-fwk's picker runs the profile's own plugins.
//
// How a run drives it, in simulated time: right after a Pick chose node
// for pod, the run assumes pod on node in its cache and calls Reserve
// (Reserve, then Permit, with the Pick's cycle state). A pod told to
// wait keeps its assumed resources; its wait ends when a plugin allows
// it (Resolved reports it, checked after every call into the picker) or
// when its timeout passes in simulated time (the run calls Expire). Once
// a pod may go on, the run calls Bind at the time its binding lands
// (-bind-latency after): WaitOnPermit's verdict, PreBind, then the Bind
// plugins, which bind through the run's API server by calling api. Then
// the run calls FinishBinding on its cache and, on success, PostBind; on
// any failure Unreserve, then ForgetPod, and the pod goes back to the
// queue as upstream's handleBindingCycleError puts it: a rejection
// (Reserve, Permit, the wait) makes it unschedulable, an error backs it
// off.
//
// Contract: as NodePicker's (one goroutine at a time). The pod a method
// is given is the assumed pod (spec.nodeName set); calls for one pod come
// in the order above; Drop ends the picker's record of a pod the run gave
// up on otherwise.
type BindingCycle interface {
	// Reserve runs Reserve and Permit for pod, assumed on node by the
	// Pick just made. On a failed Reserve or a Permit that neither allows
	// nor waits, Unreserve has run. An error stops the run.
	Reserve(ctx context.Context, pod *v1.Pod, node string) (PermitResult, error)
	// Resolved returns the waiting pods whose wait ended since the last
	// call (allowed or rejected by a plugin), in the order they began
	// to wait.
	Resolved() []types.UID
	// Expire ends pod's wait, rejected by plugin's timeout.
	Expire(pod *v1.Pod, plugin string)
	// Bind runs WaitOnPermit (the wait, if any, is over), PreBind and the
	// Bind plugins for pod on node; api binds pod through the run's API
	// server and returns its answer. An error stops the run.
	Bind(ctx context.Context, pod *v1.Pod, node string, api func() error) (BindResult, error)
	// PostBind runs the PostBind plugins of pod, bound, and drops the
	// picker's record of it.
	PostBind(ctx context.Context, pod *v1.Pod, node string)
	// Unreserve runs the Unreserve plugins of pod, whose binding cycle
	// failed, and drops the picker's record of it.
	Unreserve(ctx context.Context, pod *v1.Pod, node string)
	// Activated returns the pods plugins asked the queue to activate
	// since the last call (upstream's PodActivator), sorted by UID.
	Activated() []types.UID
}

// PermitResult is a plain value: what Reserve decided.
type PermitResult struct {
	// Wait: the pod waits, for Timeout at most (Plugin's, the shortest).
	Wait    bool
	Timeout time.Duration
	// Failed: Reserve or Permit failed (Stage "reserve" or "permit"),
	// Unreserve has run; Rejected says it was a rejection
	// (unschedulable), else an error (backoff).
	Failed   bool
	Stage    string
	Rejected bool
	// Plugin and Message name the plugin that failed or waits, and why.
	Plugin  string
	Message string
}

// BindResult is a plain value: what Bind did.
type BindResult struct {
	// Stage is where the binding cycle failed: "permit" (WaitOnPermit
	// rejected or failed), "prebind", "bind"; "" it succeeded.
	Stage string
	// Rejected: a rejection (unschedulable), else an error.
	Rejected bool
	// Called: the Bind plugins called api (they bound through the API
	// server); APIErr is its answer.
	Called bool
	APIErr error
	Plugin string
	// Message is the failure's.
	Message string
}

// Binding-cycle failures, as the report counts them.
var errBindingCycle = fmt.Errorf("sim: binding cycle failed")

// waitingPod is owned by the event loop: a pod waiting on Permit.
type waitingPod struct {
	pp     *phasePod
	node   string
	tr     time.Time
	worker int
	gen    uint64 // evPermit events of an older wait are stale
}

// bindingCycles returns the schedulers' pickers as BindingCycles, or nil
// unless every one is.
func bindingCycles(pickers []NodePicker) []BindingCycle {
	out := make([]BindingCycle, 0, len(pickers))
	for _, np := range pickers {
		bc, ok := np.(BindingCycle)
		if !ok {
			return nil
		}
		out = append(out, bc)
	}
	return out
}

// reserve runs scheduler w's Reserve and Permit for pod, assumed on
// node at now: it waits, is failed back to the queue, or goes on to its
// binding.
func (pr *phaseRun) reserve(now time.Duration, w int, pod *v1.Pod, node string, tr time.Time) error {
	d := pr.d
	bc := pr.binders[w]
	res, err := bc.Reserve(d.ctx, pod, node)
	if err != nil {
		return fmt.Errorf("reserve %s: %w", pod.Name, err)
	}
	pp := pr.byUID[string(pod.UID)]
	switch {
	case res.Failed:
		if res.Stage == "reserve" {
			pr.bc.ReserveFailures++
		} else {
			pr.bc.PermitRejections++
		}
		traceEvent(d.digest, now, "reserve-failed", pod.Name, node+" "+res.Plugin)
		if err := pr.forget(now, pod); err != nil {
			return err
		}
		pr.cycleFailed(now, pp, pod, res.Rejected, false)
	case res.Wait:
		traceEvent(d.digest, now, "permit-wait", pod.Name, node+" "+res.Plugin)
		if pp != nil {
			pr.waitGen++
			wp := &waitingPod{pp: pp, node: node, tr: tr, worker: w, gen: pr.waitGen}
			pr.waiting[pod.UID] = wp
			pr.bc.Reserved++
			pr.bc.PermitWaits++
			d.push(event{at: now + res.Timeout, kind: evPermit, pod: pod, worker: w, gen: wp.gen, note: res.Plugin})
		}
	default:
		pr.bc.Reserved++
		pr.startBinding(now, w, pod, node, tr)
	}
	return pr.afterCycle(now, w)
}

// afterCycle takes scheduler w's activations and resolved waits, after a
// call into its picker.
func (pr *phaseRun) afterCycle(now time.Duration, w int) error {
	bc := pr.binders[w]
	for _, uid := range bc.Activated() {
		pr.bc.Activations++
		if pp := pr.byUID[string(uid)]; pp != nil {
			pr.activate(now, pp)
		}
	}
	for _, uid := range bc.Resolved() {
		wp := pr.waiting[uid]
		if wp == nil {
			continue
		}
		delete(pr.waiting, uid)
		traceEvent(pr.d.digest, now, "permit-over", wp.pp.pod.Name, wp.node)
		pr.startBinding(now, wp.worker, wp.pp.pod, wp.node, wp.tr)
	}
	return nil
}

// expire (evPermit): a waiting pod's timeout passed.
func (pr *phaseRun) expire(ev event) error {
	wp := pr.waiting[ev.pod.UID]
	if wp == nil || wp.gen != ev.gen {
		return nil // its wait ended before
	}
	traceEvent(pr.d.digest, ev.at, "permit-timeout", ev.pod.Name, wp.node)
	pr.bc.PermitTimeouts++
	pr.binders[wp.worker].Expire(wp.pp.pod, ev.note)
	return pr.afterCycle(ev.at, wp.worker)
}

// startBinding runs pod's binding at now, or -bind-latency later.
func (pr *phaseRun) startBinding(now time.Duration, w int, pod *v1.Pod, node string, tr time.Time) {
	d := pr.d
	if d.cfg.BindLatency > 0 {
		d.push(event{at: now + d.cfg.BindLatency, kind: evBindCycle, pod: pod, worker: w, note: node})
		return
	}
	d.push(event{at: now, kind: evBindCycle, pod: pod, worker: w, note: node, tr: tr})
}

// bindCycle (evBindCycle): scheduler ev.worker's binding cycle of
// ev.pod: WaitOnPermit, PreBind, Bind (through the API server), then
// FinishBinding and PostBind, or Unreserve and ForgetPod.
func (pr *phaseRun) bindCycle(ev event) error {
	d, w, pod, node := pr.d, ev.worker, ev.pod, ev.note
	bc := pr.binders[w]
	api := func() error {
		ch, err := d.c.BindPod(bindingOf(pod, node))
		if err != nil {
			return fmt.Errorf("BindPod %s: %w", pod.Name, err)
		}
		var berr error
		for _, call := range d.e.disp.take() {
			d.e.disp.execute(call)
			berr = <-ch
		}
		return berr
	}
	res, err := bc.Bind(d.ctx, pod, node, api)
	if err != nil {
		return fmt.Errorf("bind %s: %w", pod.Name, err)
	}
	if res.Stage == "" || res.Stage == "bind" {
		var berr error
		switch {
		case res.Stage == "bind" && res.Called && res.APIErr != nil:
			berr = res.APIErr
		case res.Stage == "bind":
			berr = fmt.Errorf("%w: %s: %s", errBindingCycle, res.Plugin, res.Message)
		case !res.Called:
			// The Bind plugins succeeded without the clientset: the
			// simulator's API server still has to bind the pod.
			berr = api()
		}
		if berr == nil {
			pr.bc.Bound++
		} else {
			pr.bc.BindFailures++
		}
		unreserve := func() { bc.Unreserve(d.ctx, pod, node) }
		if err := d.complete(ev.at, pod, node, berr, ev.tr, unreserve); err != nil {
			return err
		}
		if berr == nil {
			bc.PostBind(d.ctx, pod, node)
		}
		return pr.afterCycle(ev.at, w)
	}
	// WaitOnPermit or PreBind failed: no binding was tried.
	if res.Stage == "permit" {
		pr.bc.WaitRejections++
	} else {
		pr.bc.PreBindFailures++
	}
	traceEvent(d.digest, ev.at, "bindcycle-failed", pod.Name, node+" "+res.Stage+" "+res.Plugin)
	bc.Unreserve(d.ctx, pod, node)
	if err := pr.forget(ev.at, pod); err != nil {
		return err
	}
	pp := pr.byUID[string(pod.UID)]
	if res.Rejected {
		pr.cycleFailed(ev.at, pp, pod, true, true)
	} else {
		d.api.life.decided(pod, false)
		pr.clusterEvent(ev.at) // the forgotten pod freed its room
		pr.bindFailed(ev.at, pod)
	}
	return pr.afterCycle(ev.at, w)
}

// forget forgets pod, assumed, from the cache: it is pending again.
func (pr *phaseRun) forget(now time.Duration, pod *v1.Pod) error {
	d := pr.d
	if err := d.rec(trace.Record{Op: trace.ForgetPod, Pod: pod}, d.c.ForgetPod(d.logger, pod)); err != nil {
		return fmt.Errorf("ForgetPod %s: %w", pod.Name, err)
	}
	d.e.truth.Pending(pod)
	d.rep.Forgotten++
	traceEvent(d.digest, now, "forget", pod.Name, pod.Spec.NodeName)
	return nil
}

// cycleFailed: pod's Reserve, Permit or wait failed at now and it was
// forgotten. In the binding cycle (move: a wait that ended rejected), as
// upstream's handleBindingCycleError, the unschedulable pods move first
// (the pod's room was freed); then, as its FailureHandler, a rejected pod
// joins them, settled unschedulable, and an errored one backs off.
func (pr *phaseRun) cycleFailed(now time.Duration, pp *phasePod, pod *v1.Pod, rejected, move bool) {
	d := pr.d
	d.api.life.decided(pod, false)
	if move {
		pr.clusterEvent(now)
	}
	if pp == nil {
		return
	}
	np := *pod
	np.Spec.NodeName = ""
	np.Status.StartTime = nil
	d.e.truth.Pending(&np)
	pp.pod = &np
	pp.state = psQueued
	if !rejected {
		pp.failed(now, true)
		pr.q.backoffError(pp)
		pr.backoffLater(pp)
		return
	}
	d.rep.Unschedulable++
	pp.failed(now, false)
	pr.parkUnschedulable(pp, now)
}

// activate moves pp to activeQ if it waits in the unschedulable pods or
// a backoff queue (upstream's PriorityQueue.Activate).
func (pr *phaseRun) activate(now time.Duration, pp *phasePod) {
	switch pp.q.where {
	case qUnsched, qBackoff, qErrBackoff:
	default:
		return
	}
	pr.q.remove(pp)
	if pp.state == psUnschedulable {
		pr.unsettle(pp)
	}
	traceEvent(pr.d.digest, now, "activate", pp.pod.Name, "")
	pr.q.addActive(pp, now, false)
	pr.wake(now)
}

// BindingCycleCounts is a plain value: what the binding cycles of a run
// did.
type BindingCycleCounts struct {
	Reserved         int64 `json:"reserved"`          // pods that passed Reserve and Permit (waiting or not)
	ReserveFailures  int64 `json:"reserve_failures"`  // Reserve failed
	PermitRejections int64 `json:"permit_rejections"` // Permit rejected or failed at once
	PermitWaits      int64 `json:"permit_waits"`      // pods told to wait
	PermitTimeouts   int64 `json:"permit_timeouts"`   // waits that timed out
	WaitRejections   int64 `json:"wait_rejections"`   // waits that ended rejected (timeouts included)
	PreBindFailures  int64 `json:"prebind_failures"`
	BindFailures     int64 `json:"bind_failures"` // the Bind plugins failed (the API server's refusals included)
	Bound            int64 `json:"bound"`
	Activations      int64 `json:"activations"` // pods plugins activated
}

// printBindingCycle writes the binding cycle line of the text report.
func (r *Report) printBindingCycle(w io.Writer) {
	b := r.BindingCycle
	if b == nil {
		return
	}
	fmt.Fprintf(w, "binding:   the picker's binding cycle: %d reserved, %d bound; Reserve failed %d, Permit rejected %d, waited %d (%d timed out, %d rejected); PreBind failed %d, Bind failed %d; %d pods activated\n",
		b.Reserved, b.Bound, b.ReserveFailures, b.PermitRejections, b.PermitWaits, b.PermitTimeouts, b.WaitRejections, b.PreBindFailures, b.BindFailures, b.Activations)
}
