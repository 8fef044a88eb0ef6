package fwkpick

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/schedcache/schedcache/sim"
)

// The binding cycle (sim.BindingCycle): a NodePicker runs its profile's
// Reserve, Permit, PreBind, Bind and PostBind plugins, and Unreserve on
// failure, with upstream's framework runtime (RunReservePluginsReserve,
// RunPermitPlugins and AddWaitingPod, WaitOnPermit, RunPreBindPlugins,
// RunBindPlugins, RunPostBindPlugins, RunReservePluginsUnreserve), in the
// order of upstream's schedulingCycle and bindingCycle, with the cycle
// state of the Pick that chose the node.
//
// The frameworks' clientset is a fake whose pods/binding creations go to
// the simulator's API server (the api function the run hands Bind): the
// profile's Bind plugins, DefaultBinder or another, bind through it as
// they would through a real client, and get its answer, failures
// included.
//
// Waiting on Permit is in simulated time. A pod a Permit plugin tells to
// wait is added to the framework's waiting pods (AddWaitingPod) with wall
// clock timers that never fire (waitForever); the run keeps the timeout,
// the shortest of the plugins', in simulated time and calls Expire, which
// rejects the pod with upstream's timeout message. A wait is over when
// every plugin has allowed it (the waiting pod's pending plugins are
// none: GangScheduling's Allow on the last member, say) or it has been
// rejected (Expire, or a plugin's Reject through a handle the picker
// gave it, see watchHandle); Resolved reports those, in the order they
// began to wait, and WaitOnPermit then returns at once.

// waitForever is the wall-clock timeout of a waiting pod's timers: the
// run times the wait in simulated time (Expire).
const waitForever = 100 * 365 * 24 * time.Hour

// bindState is owned by the NodePicker's goroutine: its binding cycles.
type bindState struct {
	cs        *fake.Clientset         // immutable: the frameworks' clientset; its binding reactor calls api
	api       func() error            // set during RunBindPlugins: the run's API server
	called    bool                    // api was called during RunBindPlugins
	apiErr    error                   // api's answer
	last      *cycleRecord            // the last Pick's cycle, until Reserve takes it
	pods      map[types.UID]*inFlight // reserved pods, until PostBind or Unreserve
	waiting   []types.UID             // pods waiting on Permit, in the order they began
	rejected  map[types.UID]bool      // waits a plugin or Expire rejected
	activated map[types.UID]bool      // pods plugins asked to activate
}

// cycleRecord is immutable: the state of one Pick's cycle.
type cycleRecord struct {
	uid   types.UID
	prof  int
	state fwk.CycleState
}

// inFlight is owned by the NodePicker's goroutine: one reserved pod.
type inFlight struct {
	fw    framework.Framework
	state fwk.CycleState
	node  string
	waits map[string]time.Duration // the Permit plugins' timeouts (waiting pods)
}

// bindInit makes np's binding state.
func (np *NodePicker) bindInit() {
	b := &np.bind
	b.pods, b.rejected, b.activated = map[types.UID]*inFlight{}, map[types.UID]bool{}, map[types.UID]bool{}
	b.cs = fake.NewClientset()
	b.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		if b.api == nil {
			return true, nil, fmt.Errorf("fwkpick: a binding of %s/%s outside a binding cycle", a.GetNamespace(), a.(k8stesting.CreateAction).GetObject().(*v1.Binding).Name)
		}
		b.called = true
		b.apiErr = b.api()
		if b.apiErr != nil {
			return true, nil, b.apiErr
		}
		return true, a.(k8stesting.CreateAction).GetObject(), nil
	})
}

// activator returns np's PodActivator.
func (b *bindState) activator() fwk.PodActivator { return podActivator{b} }

// podActivator records the pods plugins activate, for the run's queue.
type podActivator struct{ b *bindState }

func (a podActivator) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for _, p := range pods {
		if p != nil {
			a.b.activated[p.UID] = true
		}
	}
}

// quiet gives ctx a logger that drops everything: the runtime logs
// every failed binding cycle at error level (a simulated binding
// failure included), which the report counts instead.
func quiet(ctx context.Context) context.Context { return klog.NewContext(ctx, logr.Discard()) }

// keepCycle records the state of a Pick's cycle that chose a node for
// pod, for the binding cycle that follows.
func (np *NodePicker) keepCycle(pod *v1.Pod, prof int, state fwk.CycleState) {
	np.bind.last = &cycleRecord{uid: pod.UID, prof: prof, state: state}
}

var _ sim.BindingCycle = (*NodePicker)(nil)

// Reserve implements sim.BindingCycle: upstream's assumeAndReserve (the
// run has assumed the pod) and the Permit step of prepareForBindingCycle.
func (np *NodePicker) Reserve(ctx context.Context, pod *v1.Pod, node string) (res sim.PermitResult, err error) {
	ctx = quiet(ctx)
	b := &np.bind
	if np.done.Load() {
		return res, ErrClosed
	}
	var state fwk.CycleState
	prof := -1
	if l := b.last; l != nil && l.uid == pod.UID {
		state, prof = l.state, l.prof
	}
	b.last = nil
	if prof < 0 {
		// A pod bound without a Pick of this picker (the simulator's
		// preemption stand-in): a fresh cycle state.
		if prof, err = np.p.profileFor(pod); err != nil {
			return res, err
		}
		state = framework.NewCycleState()
	}
	if _, err := state.Read(framework.PodsToActivateKey); err != nil {
		state.Write(framework.PodsToActivateKey, framework.NewPodsToActivate())
	}
	fw := np.fws[prof]
	in := &inFlight{fw: fw, state: state, node: node}
	defer func() {
		if r := recover(); r != nil {
			res, err = sim.PermitResult{}, &sim.AttemptError{Reason: "plugin-panic", Err: recovered("", "Reserve/Permit", r)}
		}
	}()
	if st := fw.RunReservePluginsReserve(ctx, state, pod, node); !st.IsSuccess() {
		fw.RunReservePluginsUnreserve(ctx, state, pod, node)
		return sim.PermitResult{Failed: true, Stage: "reserve", Rejected: st.IsRejected(), Plugin: st.Plugin(), Message: st.Message()}, nil
	}
	waits, st := fw.RunPermitPlugins(ctx, state, pod, node)
	switch {
	case st.IsWait():
		forever := make(map[string]time.Duration, len(waits))
		for pl := range waits {
			forever[pl] = waitForever
		}
		fw.AddWaitingPod(pod, forever)
		in.waits = waits
		b.pods[pod.UID] = in
		b.waiting = append(b.waiting, pod.UID)
		pl, d := shortestWait(waits)
		np.activatePending(state)
		return sim.PermitResult{Wait: true, Timeout: d, Plugin: pl, Message: st.Message()}, nil
	case !st.IsSuccess():
		fw.RunReservePluginsUnreserve(ctx, state, pod, node)
		return sim.PermitResult{Failed: true, Stage: "permit", Rejected: st.IsRejected(), Plugin: st.Plugin(), Message: st.Message()}, nil
	}
	b.pods[pod.UID] = in
	np.activatePending(state)
	return sim.PermitResult{}, nil
}

// shortestWait returns the plugin with the shortest timeout (the first
// by name among equals) and its timeout.
func shortestWait(waits map[string]time.Duration) (string, time.Duration) {
	names := make([]string, 0, len(waits))
	for pl := range waits {
		names = append(names, pl)
	}
	slices.Sort(names)
	best := ""
	for _, pl := range names {
		if best == "" || waits[pl] < waits[best] {
			best = pl
		}
	}
	return best, waits[best]
}

// activatePending moves the pods the cycle's plugins stashed in
// PodsToActivate to the activations (upstream activates them at the end
// of a successful scheduling cycle and of a binding cycle).
func (np *NodePicker) activatePending(state fwk.CycleState) {
	c, err := state.Read(framework.PodsToActivateKey)
	if err != nil {
		return
	}
	s, ok := c.(*framework.PodsToActivate)
	if !ok {
		return
	}
	s.Lock()
	defer s.Unlock()
	for k, p := range s.Map {
		if p != nil {
			np.bind.activated[p.UID] = true
		}
		delete(s.Map, k)
	}
}

// Resolved implements sim.BindingCycle.
func (np *NodePicker) Resolved() []types.UID {
	b := &np.bind
	var out []types.UID
	kept := b.waiting[:0]
	for _, uid := range b.waiting {
		in := b.pods[uid]
		if in == nil {
			continue
		}
		if np.p.takeRejected(uid) {
			b.rejected[uid] = true
		}
		wp := in.fw.GetWaitingPod(uid)
		if wp == nil || b.rejected[uid] || len(wp.GetPendingPlugins()) == 0 {
			out = append(out, uid)
			continue
		}
		kept = append(kept, uid)
	}
	clear(b.waiting[len(kept):])
	b.waiting = kept
	return out
}

// Expire implements sim.BindingCycle: the waiting pod is rejected as
// upstream's timer rejects it.
func (np *NodePicker) Expire(pod *v1.Pod, plugin string) {
	b := &np.bind
	in := b.pods[pod.UID]
	if in == nil {
		return
	}
	if wp := in.fw.GetWaitingPod(pod.UID); wp != nil {
		wp.Reject(plugin, fmt.Sprintf("rejected due to timeout after waiting %v at plugin %v", in.waits[plugin], plugin))
	}
	b.rejected[pod.UID] = true
}

// Bind implements sim.BindingCycle: upstream's bindingCycle from
// WaitOnPermit to the Bind plugins (without PreBindPreFlights, whose
// outcome only updates the pod's nominated node name for other
// components).
func (np *NodePicker) Bind(ctx context.Context, pod *v1.Pod, node string, api func() error) (res sim.BindResult, err error) {
	ctx = quiet(ctx)
	b := &np.bind
	in := b.pods[pod.UID]
	if in == nil {
		return res, fmt.Errorf("%w: Bind of pod %s/%s, not reserved", sim.ErrPicker, pod.Namespace, pod.Name)
	}
	if wp := in.fw.GetWaitingPod(pod.UID); wp != nil && !b.rejected[pod.UID] && len(wp.GetPendingPlugins()) > 0 {
		return res, fmt.Errorf("%w: Bind of pod %s/%s, still waiting on Permit", sim.ErrPicker, pod.Namespace, pod.Name)
	}
	delete(b.rejected, pod.UID)
	defer func() {
		b.api, b.called, b.apiErr = nil, false, nil
		if r := recover(); r != nil {
			res, err = sim.BindResult{Stage: "bind", Message: recovered("", "binding cycle", r).Error()}, nil
		}
	}()
	fail := func(stage string, st *fwk.Status) sim.BindResult {
		return sim.BindResult{Stage: stage, Rejected: st.IsRejected(), Plugin: st.Plugin(), Message: st.Message()}
	}
	if st := in.fw.WaitOnPermit(ctx, pod); !st.IsSuccess() {
		return fail("permit", st), nil
	}
	if st := in.fw.RunPreBindPlugins(ctx, in.state, pod, node); !st.IsSuccess() {
		return fail("prebind", st), nil
	}
	b.api = api
	st := in.fw.RunBindPlugins(ctx, in.state, pod, node)
	b.cs.ClearActions() // the fake keeps a copy of every request otherwise
	res = sim.BindResult{Called: b.called, APIErr: b.apiErr}
	if !st.IsSuccess() {
		r := fail("bind", st)
		r.Called, r.APIErr = res.Called, res.APIErr
		return r, nil
	}
	return res, nil
}

// PostBind implements sim.BindingCycle.
func (np *NodePicker) PostBind(ctx context.Context, pod *v1.Pod, node string) {
	ctx = quiet(ctx)
	in := np.bind.release(pod.UID)
	if in == nil {
		return
	}
	defer func() { _ = recover() }() // PostBind is informational: a panic there changes nothing
	in.fw.RunPostBindPlugins(ctx, in.state, pod, node)
	np.activatePending(in.state)
}

// release ends the binding cycle of pod uid (PostBind or Unreserve): it
// returns its in-flight state, nil if none, and forgets it and any
// rejection of its wait.
func (b *bindState) release(uid types.UID) *inFlight {
	in := b.pods[uid]
	if in != nil {
		delete(b.pods, uid)
		delete(b.rejected, uid)
	}
	return in
}

// Unreserve implements sim.BindingCycle.
func (np *NodePicker) Unreserve(ctx context.Context, pod *v1.Pod, node string) {
	ctx = quiet(ctx)
	in := np.bind.release(pod.UID)
	if in == nil {
		return
	}
	defer func() { _ = recover() }() // Unreserve returns nothing to fail with
	in.fw.RunReservePluginsUnreserve(ctx, in.state, pod, node)
}

// Activated implements sim.BindingCycle.
func (np *NodePicker) Activated() []types.UID {
	b := &np.bind
	if len(b.activated) == 0 {
		return nil
	}
	out := make([]types.UID, 0, len(b.activated))
	for uid := range b.activated {
		out = append(out, uid)
	}
	clear(b.activated)
	slices.Sort(out)
	return out
}

// watchFactory wraps an out-of-tree plugin's factory: the plugin gets a
// handle whose waiting pods report their rejections to p, so that a wait
// a plugin rejects ends in simulated time too. (In-tree plugins reject no
// waiting pod: upstream's preemption executor and event handlers do,
// which the simulator replaces.)
func (p *Picker) watchFactory(f frameworkruntime.PluginFactory) frameworkruntime.PluginFactory {
	return func(ctx context.Context, args runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
		return f(ctx, args, watchHandle{Handle: h, p: p})
	}
}

// takeRejected says whether a plugin rejected uid's wait, and forgets it.
func (p *Picker) takeRejected(uid types.UID) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.rejectedWaits[uid] {
		return false
	}
	delete(p.rejectedWaits, uid)
	return true
}

func (p *Picker) noteRejected(uid types.UID) {
	p.mu.Lock()
	p.rejectedWaits[uid] = true
	p.mu.Unlock()
}

// watchHandle is a framework handle whose waiting pods report rejections.
type watchHandle struct {
	fwk.Handle
	p *Picker // immutable
}

func (h watchHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	wp := h.Handle.GetWaitingPod(uid)
	if wp == nil {
		return nil
	}
	return watchedPod{WaitingPod: wp, p: h.p}
}

func (h watchHandle) IterateOverWaitingPods(cb func(fwk.WaitingPod)) {
	h.Handle.IterateOverWaitingPods(func(wp fwk.WaitingPod) { cb(watchedPod{WaitingPod: wp, p: h.p}) })
}

func (h watchHandle) RejectWaitingPod(uid types.UID) bool {
	ok := h.Handle.RejectWaitingPod(uid)
	if ok {
		h.p.noteRejected(uid)
	}
	return ok
}

// watchedPod is a waiting pod whose rejection is reported.
type watchedPod struct {
	fwk.WaitingPod
	p *Picker // immutable
}

func (w watchedPod) Reject(plugin, msg string) bool {
	ok := w.WaitingPod.Reject(plugin, msg)
	if ok {
		w.p.noteRejected(w.GetPod().UID)
	}
	return ok
}

func (w watchedPod) Preempt(plugin, msg string) bool {
	ok := w.WaitingPod.Preempt(plugin, msg)
	if ok {
		w.p.noteRejected(w.GetPod().UID)
	}
	return ok
}

var _ sim.Enqueuer = (*NodePicker)(nil)

// PreEnqueue implements sim.Enqueuer: the PreEnqueue plugins of pod's
// profile, in order, as upstream's queue runs them; the first that does
// not admit the pod holds it (an error status holds it too, as upstream's
// queue logs it and gates the pod).
func (np *NodePicker) PreEnqueue(ctx context.Context, pod *v1.Pod) (ok bool, plugin string, err error) {
	if np.done.Load() {
		return false, "", ErrClosed
	}
	prof, err := np.p.profileFor(pod)
	if err != nil {
		return true, "", nil // no profile: the attempt reports it
	}
	ctx = quiet(ctx)
	for _, pl := range np.fws[prof].PreEnqueuePlugins() {
		st := func() (st *fwk.Status) {
			defer func() {
				if r := recover(); r != nil {
					st = fwk.AsStatus(recovered(pl.Name(), "PreEnqueue", r))
				}
			}()
			return pl.PreEnqueue(ctx, pod)
		}()
		if !st.IsSuccess() {
			return false, pl.Name(), nil
		}
	}
	return true, "", nil
}

var _ sim.PodGroupPicker = (*Picker)(nil)

// PodGroups implements sim.PodGroupPicker: whether the GenericWorkload
// feature gate was on when New built the picker (its profiles then run
// GangScheduling, and the frameworks read the run's pod groups).
func (p *Picker) PodGroups() bool { return p.genericWorkload }
