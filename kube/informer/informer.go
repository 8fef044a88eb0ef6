// Package informer attaches a schedcache.Cache to a client-go
// SharedInformerFactory with the semantics of upstream kube-scheduler's
// event handlers (k8s.io/kubernetes v1.37.2 pkg/scheduler/eventhandlers.go,
// the cache side of them):
//
//   - assigned pods (Spec.NodeName set): an add is AddPod; an update of an
//     assigned pod is UpdatePod; an update from unassigned to assigned is a
//     binding and is applied as AddPod (which confirms the assumed pod); a
//     delete is RemovePod;
//   - unassigned pods of the schedulers the adapter is responsible for
//     (WithSchedulerNames or WithResponsibleForPod; by default every
//     scheduler name, as a scheduler whose profiles cover every name) are
//     what upstream's handlers give the scheduling queue; the cache side of
//     those handlers is kept: an add is AddPodGroupMember; an update
//     (skipped, as upstream, when both objects carry the same
//     ResourceVersion) is UpdatePodGroupMember and, if the pod is assumed
//     in the cache and its DeletionTimestamp has just been set, the
//     assumed-pod deletion below; a delete is the assumed-pod deletion if
//     the pod is assumed, else RemovePodGroupMember. The pod-group member
//     calls are made only while the cache's GenericWorkload gate is on
//     and the pod names a scheduling group (upstream's isPodGroupMember;
//     the cache would ignore them otherwise). Unassigned pods of other
//     schedulers are ignored;
//   - the assumed-pod deletion is upstream's handleAssumedPodDeletion
//     without its framework half: the cached pod (GetPod) is removed with
//     RemoveAssumedPod at once, so that it stops holding its node's
//     resources (and leaves its pod group). Upstream first tries the
//     framework's RejectWaitingPod and removes the pod only if it was not
//     waiting on Permit (a rejected waiting pod is forgotten by its own
//     binding cycle). A cache-only adapter has no framework and no
//     waiting pods, so it never rejects one: it always removes the pod. A
//     scheduler that keeps pods waiting on Permit should reject the
//     deleted pod itself; the binding cycle's ForgetPod then finds the pod
//     gone and returns an error, which it can ignore;
//   - a cache.DeletedFinalStateUnknown pod tombstone is RemovePod whatever
//     its (possibly stale) object says, as upstream ("attempting to cleanup
//     anyways"), followed, for a pod the adapter is responsible for, by
//     upstream's unscheduled-pod cleanup: the assumed-pod deletion if the
//     pod is still assumed, else RemovePodGroupMember;
//   - nodes: add, update and delete (tombstones included) map to AddNode,
//     UpdateNode and RemoveNode;
//   - PodGroups (scheduling.k8s.io/v1beta1) and CompositePodGroups
//     (v1alpha3): add, update (skipped on an unchanged ResourceVersion, as
//     upstream) and delete (tombstones included) map to AddPodGroup,
//     UpdatePodGroup and RemovePodGroup, and their CompositePodGroup
//     forms. Attach registers their informers only while the cache's gates
//     are on (schedcache.WithPodGroups; read from Cache.PodGroups), as
//     upstream registers them only with its GenericWorkload and
//     CompositePodGroup feature gates: with the gates off the API group
//     is never watched and nothing is tracked.
//
// Node events and assigned-pod events go through the cache's Async path:
// the informer's handler goroutine does not wait for their publication.
// The cache has no Async form of the pod-group calls and of
// RemoveAssumedPod, so those are synchronous: the handler waits until
// their effect is published (upstream's handlers are synchronous
// throughout). Either way a handler's events are applied in the order it
// made them: a synchronous call is queued behind the Async events not yet
// published. IsAssumedPod and GetPod read the latest published snapshot;
// for an unassigned pod the adapter's earlier calls were synchronous, so
// they see them (after a tombstone's Async RemovePod they may not, which
// leads to the same end state: see DeletePod).
//
// Objects of the wrong type (in events or inside tombstones) and events
// the cache refuses are reported to the error handler (default
// utilruntime.HandleErrorWithLogger, as upstream) and counted; they never
// panic. Failures found when the cache applies an Async event are
// delivered to the cache's async error handler: pass AsyncErrorHandler to
// schedcache.WithAsyncErrorHandler to route them the same way.
package informer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/schedcache/schedcache"
)

var (
	// ErrWrongType is wrapped by the errors reported for an informer
	// callback whose object is not the expected type.
	ErrWrongType = errors.New("informer: object of the wrong type")
	// ErrNilCache is returned by Attach for a nil cache or factory.
	ErrNilCache = errors.New("informer: nil cache or informer factory")
)

// TypeError reports an object of an unexpected type in an informer
// callback (or inside a tombstone). It wraps ErrWrongType.
type TypeError struct {
	Handler string // "addPod", "updatePod", "deletePod", "addNode", "addPodGroup", ...
	Want    string // "*v1.Pod", "*v1.Node", "*v1beta1.PodGroup" or "*v1alpha3.CompositePodGroup"
	Obj     any
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("%s: cannot convert %T to %s: %v", e.Handler, e.Obj, e.Want, ErrWrongType)
}
func (e *TypeError) Unwrap() error { return ErrWrongType }

// EventError reports an event the cache refused: at submission for the
// Async calls (nil object, empty UID, closed or failed cache), or at all
// for the synchronous ones (the pod-group calls, RemoveAssumedPod,
// IsAssumedPod). It wraps the cache's error.
type EventError struct {
	Op  string // the cache call: "AddPod", "UpdatePod", "AddPodGroupMember", ...
	Key string // namespace/name of the object (a node's name)
	Err error
}

func (e *EventError) Error() string {
	return fmt.Sprintf("scheduler cache %s of %s failed: %v", e.Op, e.Key, e.Err)
}
func (e *EventError) Unwrap() error { return e.Err }

// Option configures Attach.
type Option func(*config)

type config struct {
	logger      klog.Logger
	onError     func(error)
	responsible func(*v1.Pod) bool // nil: every scheduler name
}

// WithLogger sets the logger of the default error handler and of the
// handlers' V(3)/V(4)/V(5) event logs.
func WithLogger(l klog.Logger) Option { return func(c *config) { c.logger = l } }

// WithErrorHandler receives the TypeErrors and EventErrors of the
// handlers, on the informer's handler goroutine (default:
// utilruntime.HandleErrorWithLogger). It must not block for long.
func WithErrorHandler(fn func(error)) Option { return func(c *config) { c.onError = fn } }

// WithSchedulerNames makes the adapter responsible only for the unassigned
// pods whose Spec.SchedulerName is one of names: upstream's
// responsibleForPod, true for the names of the scheduler's profiles. The
// names are matched as they are: the API server defaults an empty
// SchedulerName to v1.DefaultSchedulerName, but objects made for a fake
// clientset may keep it empty. With no names the adapter is responsible
// for no unassigned pod. Assigned pods reach the cache whatever their
// scheduler, as upstream. The default (without this option or
// WithResponsibleForPod) is every scheduler name. The later of the two
// options wins.
func WithSchedulerNames(names ...string) Option {
	set := make(map[string]struct{}, len(names))
	for _, n := range names {
		set[n] = struct{}{}
	}
	return func(c *config) {
		c.responsible = func(p *v1.Pod) bool { _, ok := set[p.Spec.SchedulerName]; return ok }
	}
}

// WithResponsibleForPod sets the predicate that selects the unassigned
// pods the adapter is responsible for (see WithSchedulerNames, its usual
// form); nil restores the default, every pod. It is called on the
// informer's handler goroutines, with a non-nil pod, and must not block or
// modify the pod.
func WithResponsibleForPod(fn func(pod *v1.Pod) bool) Option {
	return func(c *config) { c.responsible = fn }
}

// AsyncErrorHandler returns a function for schedcache.WithAsyncErrorHandler
// that routes failures of applied events to onError, as upstream's handlers
// route their cache errors ("Scheduler cache AddPod failed"); nil onError
// means utilruntime.HandleErrorWithLogger with logger.
func AsyncErrorHandler(logger klog.Logger, onError func(error)) func(schedcache.AsyncError) {
	return func(e schedcache.AsyncError) {
		key := ""
		switch {
		case e.Pod != nil:
			key = e.Pod.Namespace + "/" + e.Pod.Name
		case e.Node != nil:
			key = e.Node.Name
		}
		err := &EventError{Op: e.Kind.String(), Key: key, Err: e.Err}
		if onError != nil {
			onError(err)
			return
		}
		utilruntime.HandleErrorWithLogger(logger, err, "Scheduler cache "+e.Kind.String()+" failed", "object", key)
	}
}

// Counts is a reading of an Adapter's event counters. Each counter of a
// cache call counts the calls the cache accepted; a refused one counts in
// SubmitErrors instead.
type Counts struct {
	PodAdds, PodUpdates, PodDeletes    int64 // AddPod, UpdatePod, RemovePod (tombstones included)
	NodeAdds, NodeUpdates, NodeDeletes int64 // AddNode, UpdateNode, RemoveNode
	// Unassigned pods of the adapter's schedulers in a pod group:
	// AddPodGroupMember, UpdatePodGroupMember, RemovePodGroupMember.
	MemberAdds, MemberUpdates, MemberDeletes int64
	// Assumed pods deleted from the cluster: RemoveAssumedPod.
	AssumedPodDeletes int64
	// PodGroup and CompositePodGroup events: AddPodGroup, UpdatePodGroup,
	// RemovePodGroup and their CompositePodGroup forms.
	PodGroupAdds, PodGroupUpdates, PodGroupDeletes                            int64
	CompositePodGroupAdds, CompositePodGroupUpdates, CompositePodGroupDeletes int64
	// Tombstones counts the DeletedFinalStateUnknown handled (every
	// resource).
	Tombstones int64
	// Unassigned counts events of unassigned pods that needed no cache
	// call: pods of schedulers the adapter is not responsible for, pods in
	// no pod group (or with the GenericWorkload gate off), except assumed
	// ones being deleted.
	Unassigned int64
	// Unchanged counts update events skipped, as upstream, because both
	// objects carry the same ResourceVersion (unassigned pods, pod groups,
	// composite pod groups: resyncs).
	Unchanged    int64
	WrongType    int64 // callbacks with an object of the wrong type
	SubmitErrors int64 // events the cache refused (see EventError)
}

// Adapter is the cache's event handlers on one informer factory.
//
// Contract: the handler methods are called by client-go's informer
// goroutines (any number of them, concurrently); Counts and HasSynced may
// be called from any goroutine. An Adapter owns no goroutine.
type Adapter struct {
	cache       *schedcache.Cache  // immutable
	logger      klog.Logger        // immutable
	onError     func(error)        // immutable
	responsible func(*v1.Pod) bool // immutable; nil: every pod
	// The cache's GenericWorkload and CompositePodGroup gates, read once
	// from Cache.PodGroups (they never change); immutable.
	genericWorkload, compositePodGroup bool

	// immutable after Attach; pgReg and cpgReg stay nil unless their gate
	// is on.
	podReg, nodeReg, pgReg, cpgReg cache.ResourceEventHandlerRegistration

	// Event counters (atomic). Each informer delivers its events on one
	// goroutine, so each resource's counters have one writer (the shared
	// ones a few, rarely at once): with no contention for
	// xsync.Counter's stripes to relieve, a plain atomic is the cheaper
	// increment (BenchmarkCounterInc; figures in docs/kube-integration.md,
	// "Counters: xsync or atomics").
	podAdds, podUpdates, podDeletes              atomic.Int64
	nodeAdds, nodeUpdates, nodeDeletes           atomic.Int64
	memberAdds, memberUpdates, memberDeletes     atomic.Int64
	assumedDeletes                               atomic.Int64
	pgAdds, pgUpdates, pgDeletes                 atomic.Int64
	cpgAdds, cpgUpdates, cpgDeletes              atomic.Int64
	tombstones, unassigned, unchanged, wrongType atomic.Int64
	submitErrors                                 atomic.Int64

	syncMu sync.Mutex // serialises the one Sync of HasSynced
	synced bool       // guarded by syncMu: the initial lists are applied
}

// New returns the handlers for c without registering them (tests call
// them directly; Attach registers them).
func New(c *schedcache.Cache, opts ...Option) (*Adapter, error) {
	if c == nil {
		return nil, ErrNilCache
	}
	cfg := config{logger: klog.Background()}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	gates := c.PodGroups()
	return &Adapter{cache: c, logger: cfg.logger, onError: cfg.onError, responsible: cfg.responsible,
		genericWorkload: gates.GenericWorkloadEnabled(), compositePodGroup: gates.CompositePodGroupEnabled()}, nil
}

// Attach registers the cache's handlers on f's pod and node informers,
// and, while the cache's gates are on, on its PodGroup (GenericWorkload)
// and CompositePodGroup (CompositePodGroup) informers, as upstream's
// addAllEventHandlers does for the cache. Start f afterwards and wait for
// HasSynced (or WaitForSync). With a gate on, the cluster must serve the
// API version watched (scheduling.k8s.io/v1beta1 PodGroups,
// v1alpha3 CompositePodGroups), or HasSynced never becomes true, as
// upstream's handlers never sync.
func Attach(c *schedcache.Cache, f informers.SharedInformerFactory, opts ...Option) (*Adapter, error) {
	if f == nil {
		return nil, ErrNilCache
	}
	a, err := New(c, opts...)
	if err != nil {
		return nil, err
	}
	type registration struct {
		inf cache.SharedIndexInformer
		reg *cache.ResourceEventHandlerRegistration
		h   cache.ResourceEventHandler
	}
	regs := []registration{
		{f.Core().V1().Pods().Informer(), &a.podReg, a.PodHandler()},
		{f.Core().V1().Nodes().Informer(), &a.nodeReg, a.NodeHandler()},
	}
	if a.genericWorkload {
		regs = append(regs, registration{f.Scheduling().V1beta1().PodGroups().Informer(), &a.pgReg, a.PodGroupHandler()})
	}
	if a.compositePodGroup {
		regs = append(regs, registration{f.Scheduling().V1alpha3().CompositePodGroups().Informer(), &a.cpgReg, a.CompositePodGroupHandler()})
	}
	for i, r := range regs {
		if *r.reg, err = r.inf.AddEventHandler(r.h); err != nil {
			for _, done := range regs[:i] {
				_ = done.inf.RemoveEventHandler(*done.reg)
				*done.reg = nil
			}
			*r.reg = nil
			return nil, err
		}
	}
	return a, nil
}

// PodHandler returns the pod callbacks.
func (a *Adapter) PodHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: a.AddPod, UpdateFunc: a.UpdatePod, DeleteFunc: a.DeletePod}
}

// NodeHandler returns the node callbacks.
func (a *Adapter) NodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: a.AddNode, UpdateFunc: a.UpdateNode, DeleteFunc: a.DeleteNode}
}

// PodGroupHandler returns the PodGroup callbacks.
func (a *Adapter) PodGroupHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: a.AddPodGroup, UpdateFunc: a.UpdatePodGroup, DeleteFunc: a.DeletePodGroup}
}

// CompositePodGroupHandler returns the CompositePodGroup callbacks.
func (a *Adapter) CompositePodGroupHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{AddFunc: a.AddCompositePodGroup, UpdateFunc: a.UpdateCompositePodGroup, DeleteFunc: a.DeleteCompositePodGroup}
}

// HasSynced reports whether every informer Attach registered on has
// delivered its initial list to the handlers and the cache has applied
// them. The first call that finds the handlers synced waits for the cache
// (one Sync: until the events queued so far are published); later calls
// are one load.
func (a *Adapter) HasSynced() bool {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	if a.synced {
		return true
	}
	if a.podReg == nil || a.nodeReg == nil || !a.podReg.HasSynced() || !a.nodeReg.HasSynced() {
		return false
	}
	if (a.pgReg != nil && !a.pgReg.HasSynced()) || (a.cpgReg != nil && !a.cpgReg.HasSynced()) {
		return false
	}
	if err := a.cache.Sync(); err != nil {
		return false
	}
	a.synced = true
	return true
}

// Counts reads the event counters.
func (a *Adapter) Counts() Counts {
	return Counts{
		PodAdds: a.podAdds.Load(), PodUpdates: a.podUpdates.Load(), PodDeletes: a.podDeletes.Load(),
		NodeAdds: a.nodeAdds.Load(), NodeUpdates: a.nodeUpdates.Load(), NodeDeletes: a.nodeDeletes.Load(),
		MemberAdds: a.memberAdds.Load(), MemberUpdates: a.memberUpdates.Load(), MemberDeletes: a.memberDeletes.Load(),
		AssumedPodDeletes: a.assumedDeletes.Load(),
		PodGroupAdds:      a.pgAdds.Load(), PodGroupUpdates: a.pgUpdates.Load(), PodGroupDeletes: a.pgDeletes.Load(),
		CompositePodGroupAdds: a.cpgAdds.Load(), CompositePodGroupUpdates: a.cpgUpdates.Load(),
		CompositePodGroupDeletes: a.cpgDeletes.Load(),
		Tombstones:               a.tombstones.Load(), Unassigned: a.unassigned.Load(), Unchanged: a.unchanged.Load(),
		WrongType: a.wrongType.Load(), SubmitErrors: a.submitErrors.Load(),
	}
}

func (a *Adapter) report(err error, msg string, kv ...any) {
	if a.onError != nil {
		a.onError(err)
		return
	}
	utilruntime.HandleErrorWithLogger(a.logger, err, msg, kv...)
}

func (a *Adapter) wrongTypeErr(handler, want string, obj any) {
	a.wrongType.Add(1)
	a.report(&TypeError{Handler: handler, Want: want, Obj: obj}, "Cannot convert to "+want, "obj", obj)
}

// submitted counts a cache call's outcome: c for an accepted call, a
// reported EventError for a refused one.
func (a *Adapter) submitted(op, key string, err error, c *atomic.Int64) {
	if err == nil {
		c.Add(1)
		return
	}
	a.submitErrors.Add(1)
	a.report(&EventError{Op: op, Key: key, Err: err}, "Scheduler cache "+op+" failed", "object", key)
}

// assignedPod selects pods that are assigned (scheduled and running), as
// upstream's filter.
func assignedPod(pod *v1.Pod) bool { return len(pod.Spec.NodeName) != 0 }

// responsibleFor is upstream's responsibleForPod.
func (a *Adapter) responsibleFor(pod *v1.Pod) bool {
	return a.responsible == nil || a.responsible(pod)
}

// member is upstream's isPodGroupMember (the cache's own test): the
// GenericWorkload gate on and a scheduling group named.
func (a *Adapter) member(pod *v1.Pod) bool {
	return a.genericWorkload && pod.Spec.SchedulingGroup != nil
}

func objKey(namespace, name string) string { return namespace + "/" + name }

func podKey(p *v1.Pod) string {
	if p == nil {
		return "<nil>"
	}
	return objKey(p.Namespace, p.Name)
}

// AddPod is the pod informer's add callback: AddPod for an assigned pod,
// AddPodGroupMember for an unassigned pod-group member of the adapter's
// schedulers.
func (a *Adapter) AddPod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod == nil {
		a.wrongTypeErr("addPod", "*v1.Pod", obj)
		return
	}
	if assignedPod(pod) {
		a.logger.V(3).Info("Add event for scheduled pod", "pod", klog.KObj(pod))
		a.submitted("AddPod", podKey(pod), a.cache.AddPodAsync(pod), &a.podAdds)
		return
	}
	if !a.responsibleFor(pod) || !a.member(pod) {
		a.unassigned.Add(1)
		return
	}
	a.logger.V(3).Info("Add event for unscheduled pod", "pod", klog.KObj(pod))
	a.submitted("AddPodGroupMember", podKey(pod), a.cache.AddPodGroupMember(pod), &a.memberAdds)
}

// UpdatePod is the pod informer's update callback: an assigned old pod is
// UpdatePod; an unassigned old pod with an assigned new one is a binding,
// applied as AddPod; two unassigned pods of the adapter's schedulers are
// upstream's updatePodInSchedulingQueue (see updateUnscheduled).
func (a *Adapter) UpdatePod(oldObj, newObj any) {
	oldPod, ok := oldObj.(*v1.Pod)
	if !ok || oldPod == nil {
		a.wrongTypeErr("updatePod", "*v1.Pod", oldObj)
		return
	}
	newPod, ok := newObj.(*v1.Pod)
	if !ok || newPod == nil {
		a.wrongTypeErr("updatePod", "*v1.Pod", newObj)
		return
	}
	switch {
	case assignedPod(oldPod):
		a.logger.V(4).Info("Update event for scheduled pod", "pod", klog.KObj(oldPod))
		a.submitted("UpdatePod", podKey(oldPod), a.cache.UpdatePodAsync(oldPod, newPod), &a.podUpdates)
	case assignedPod(newPod):
		a.logger.V(3).Info("Add event for scheduled pod", "pod", klog.KObj(newPod))
		a.submitted("AddPod", podKey(newPod), a.cache.AddPodAsync(newPod), &a.podAdds)
	case a.responsibleFor(oldPod):
		a.updateUnscheduled(oldPod, newPod)
	default:
		a.unassigned.Add(1)
	}
}

// updateUnscheduled is the cache side of upstream's
// updatePodInSchedulingQueue: an update carrying the same ResourceVersion
// is skipped; a member is updated in its pod group; an assumed pod whose
// deletion has just started is removed (handleAssumedPodDeletion).
func (a *Adapter) updateUnscheduled(oldPod, newPod *v1.Pod) {
	if oldPod.ResourceVersion == newPod.ResourceVersion {
		a.unchanged.Add(1)
		return
	}
	called := false
	if a.member(newPod) {
		a.logger.V(4).Info("Update event for unscheduled pod", "pod", klog.KObj(newPod))
		a.submitted("UpdatePodGroupMember", podKey(newPod), a.cache.UpdatePodGroupMember(a.logger, oldPod, newPod), &a.memberUpdates)
		called = true
	}
	// Upstream checks IsAssumedPod first and then the deletion; only the
	// pair matters to the cache, and the deletion test is the cheaper.
	if newPod.DeletionTimestamp != nil && oldPod.DeletionTimestamp == nil && a.isAssumed(newPod) {
		called = a.handleAssumedPodDeletion(newPod) || called
	}
	if !called {
		a.unassigned.Add(1)
	}
}

// isAssumed is IsAssumedPod, its refusal (an empty UID) reported and
// taken as false, as upstream.
func (a *Adapter) isAssumed(pod *v1.Pod) bool {
	assumed, err := a.cache.IsAssumedPod(pod)
	if err != nil {
		a.submitErrors.Add(1)
		a.report(&EventError{Op: "IsAssumedPod", Key: podKey(pod), Err: err}, "Failed to check whether pod is assumed", "pod", klog.KObj(pod))
	}
	return assumed
}

// handleAssumedPodDeletion is the cache side of upstream's
// handleAssumedPodDeletion: the pod the cache holds (which names the node
// it was assumed on) is removed with RemoveAssumedPod. There is no
// waiting pod to reject here (see the package doc). It reports whether
// it called the cache.
func (a *Adapter) handleAssumedPodDeletion(pod *v1.Pod) bool {
	cached, err := a.cache.GetPod(pod)
	if err != nil {
		// Not an error: the binding cycle may have finished or forgotten
		// the pod since.
		a.logger.V(5).Info("Assumed pod was already forgotten", "pod", klog.KObj(pod))
		return false
	}
	a.logger.V(3).Info("Delete event for assumed pod", "pod", klog.KObj(cached))
	a.submitted("RemoveAssumedPod", podKey(cached), a.cache.RemoveAssumedPod(a.logger, cached), &a.assumedDeletes)
	return true
}

// deleteUnscheduled is the cache side of upstream's
// deletePodFromSchedulingQueue for a pod removed from the cluster: an
// assumed pod goes through handleAssumedPodDeletion, any other leaves its
// pod group. It reports whether it called the cache.
func (a *Adapter) deleteUnscheduled(pod *v1.Pod) bool {
	if a.isAssumed(pod) {
		return a.handleAssumedPodDeletion(pod)
	}
	if !a.member(pod) {
		return false
	}
	a.logger.V(3).Info("Delete event for unscheduled pod", "pod", klog.KObj(pod))
	a.submitted("RemovePodGroupMember", podKey(pod), a.cache.RemovePodGroupMember(pod), &a.memberDeletes)
	return true
}

// DeletePod is the pod informer's delete callback. An assigned pod is
// RemovePod; an unassigned pod of the adapter's schedulers is
// deleteUnscheduled. A tombstone's object may be stale, so it is removed
// with RemovePod whether or not it says it is assigned, and, for a pod of
// the adapter's schedulers, deleteUnscheduled follows, as upstream. That
// RemovePod is Async, so deleteUnscheduled's IsAssumedPod may still see
// the pod assumed; RemoveAssumedPod, queued behind the RemovePod, then
// finds the pod gone and does nothing, and RemovePod has taken it out of
// its group: the end state is upstream's.
func (a *Adapter) DeletePod(obj any) {
	switch t := obj.(type) {
	case *v1.Pod:
		if t == nil {
			a.wrongTypeErr("deletePod", "*v1.Pod", obj)
			return
		}
		if assignedPod(t) {
			a.logger.V(3).Info("Delete event for scheduled pod", "pod", klog.KObj(t))
			a.submitted("RemovePod", podKey(t), a.cache.RemovePodAsync(t), &a.podDeletes)
			return
		}
		if !a.responsibleFor(t) || !a.deleteUnscheduled(t) {
			a.unassigned.Add(1)
		}
	case cache.DeletedFinalStateUnknown:
		p, ok := t.Obj.(*v1.Pod)
		if !ok || p == nil {
			a.wrongTypeErr("deletePod", "*v1.Pod", t.Obj)
			return
		}
		a.tombstones.Add(1)
		a.logger.V(3).Info("Delete event for scheduled pod", "pod", klog.KObj(p))
		a.submitted("RemovePod", podKey(p), a.cache.RemovePodAsync(p), &a.podDeletes)
		if a.responsibleFor(p) {
			a.deleteUnscheduled(p)
		}
	default:
		a.wrongTypeErr("deletePod", "*v1.Pod", obj)
	}
}

// AddNode is the node informer's add callback.
func (a *Adapter) AddNode(obj any) {
	node, ok := obj.(*v1.Node)
	if !ok || node == nil {
		a.wrongTypeErr("addNode", "*v1.Node", obj)
		return
	}
	a.logger.V(3).Info("Add event for node", "node", klog.KObj(node))
	a.submitted("AddNode", node.Name, a.cache.AddNodeAsync(node), &a.nodeAdds)
}

// UpdateNode is the node informer's update callback.
func (a *Adapter) UpdateNode(oldObj, newObj any) {
	oldNode, ok := oldObj.(*v1.Node)
	if !ok || oldNode == nil {
		a.wrongTypeErr("updateNode", "*v1.Node", oldObj)
		return
	}
	newNode, ok := newObj.(*v1.Node)
	if !ok || newNode == nil {
		a.wrongTypeErr("updateNode", "*v1.Node", newObj)
		return
	}
	a.logger.V(4).Info("Update event for node", "node", klog.KObj(newNode))
	a.submitted("UpdateNode", newNode.Name, a.cache.UpdateNodeAsync(oldNode, newNode), &a.nodeUpdates)
}

// DeleteNode is the node informer's delete callback (tombstones included).
func (a *Adapter) DeleteNode(obj any) {
	var node *v1.Node
	switch t := obj.(type) {
	case *v1.Node:
		node = t
	case cache.DeletedFinalStateUnknown:
		n, ok := t.Obj.(*v1.Node)
		if !ok || n == nil {
			a.wrongTypeErr("deleteNode", "*v1.Node", t.Obj)
			return
		}
		a.tombstones.Add(1)
		node = n
	}
	if node == nil {
		a.wrongTypeErr("deleteNode", "*v1.Node", obj)
		return
	}
	a.logger.V(3).Info("Delete event for node", "node", klog.KObj(node))
	a.submitted("RemoveNode", node.Name, a.cache.RemoveNodeAsync(node), &a.nodeDeletes)
}

const (
	wantPodGroup  = "*v1beta1.PodGroup"
	wantComposite = "*v1alpha3.CompositePodGroup"
)

// AddPodGroup is the PodGroup informer's add callback: AddPodGroup.
func (a *Adapter) AddPodGroup(obj any) {
	pg, ok := obj.(*schedulingv1beta1.PodGroup)
	if !ok || pg == nil {
		a.wrongTypeErr("addPodGroup", wantPodGroup, obj)
		return
	}
	a.logger.V(3).Info("Add event for pod group", "podGroup", klog.KObj(pg))
	a.submitted("AddPodGroup", objKey(pg.Namespace, pg.Name), a.cache.AddPodGroup(pg), &a.pgAdds)
}

// UpdatePodGroup is the PodGroup informer's update callback: UpdatePodGroup,
// skipped when both objects carry the same ResourceVersion, as upstream.
func (a *Adapter) UpdatePodGroup(oldObj, newObj any) {
	oldPG, ok := oldObj.(*schedulingv1beta1.PodGroup)
	if !ok || oldPG == nil {
		a.wrongTypeErr("updatePodGroup", wantPodGroup, oldObj)
		return
	}
	newPG, ok := newObj.(*schedulingv1beta1.PodGroup)
	if !ok || newPG == nil {
		a.wrongTypeErr("updatePodGroup", wantPodGroup, newObj)
		return
	}
	if oldPG.ResourceVersion == newPG.ResourceVersion {
		a.unchanged.Add(1)
		return
	}
	a.logger.V(4).Info("Update event for pod group", "podGroup", klog.KObj(newPG))
	a.submitted("UpdatePodGroup", objKey(newPG.Namespace, newPG.Name), a.cache.UpdatePodGroup(a.logger, oldPG, newPG), &a.pgUpdates)
}

// DeletePodGroup is the PodGroup informer's delete callback (tombstones
// included): RemovePodGroup.
func (a *Adapter) DeletePodGroup(obj any) {
	var pg *schedulingv1beta1.PodGroup
	switch t := obj.(type) {
	case *schedulingv1beta1.PodGroup:
		pg = t
	case cache.DeletedFinalStateUnknown:
		p, ok := t.Obj.(*schedulingv1beta1.PodGroup)
		if !ok || p == nil {
			a.wrongTypeErr("deletePodGroup", wantPodGroup, t.Obj)
			return
		}
		a.tombstones.Add(1)
		pg = p
	}
	if pg == nil {
		a.wrongTypeErr("deletePodGroup", wantPodGroup, obj)
		return
	}
	a.logger.V(3).Info("Delete event for pod group", "podGroup", klog.KObj(pg))
	a.submitted("RemovePodGroup", objKey(pg.Namespace, pg.Name), a.cache.RemovePodGroup(a.logger, pg), &a.pgDeletes)
}

// AddCompositePodGroup is the CompositePodGroup informer's add callback:
// AddCompositePodGroup.
func (a *Adapter) AddCompositePodGroup(obj any) {
	cpg, ok := obj.(*schedulingv1alpha3.CompositePodGroup)
	if !ok || cpg == nil {
		a.wrongTypeErr("addCompositePodGroup", wantComposite, obj)
		return
	}
	a.logger.V(3).Info("Add event for composite pod group", "compositePodGroup", klog.KObj(cpg))
	a.submitted("AddCompositePodGroup", objKey(cpg.Namespace, cpg.Name), a.cache.AddCompositePodGroup(a.logger, cpg), &a.cpgAdds)
}

// UpdateCompositePodGroup is the CompositePodGroup informer's update
// callback: UpdateCompositePodGroup, skipped when both objects carry the
// same ResourceVersion, as upstream.
func (a *Adapter) UpdateCompositePodGroup(oldObj, newObj any) {
	oldCPG, ok := oldObj.(*schedulingv1alpha3.CompositePodGroup)
	if !ok || oldCPG == nil {
		a.wrongTypeErr("updateCompositePodGroup", wantComposite, oldObj)
		return
	}
	newCPG, ok := newObj.(*schedulingv1alpha3.CompositePodGroup)
	if !ok || newCPG == nil {
		a.wrongTypeErr("updateCompositePodGroup", wantComposite, newObj)
		return
	}
	if oldCPG.ResourceVersion == newCPG.ResourceVersion {
		a.unchanged.Add(1)
		return
	}
	a.logger.V(4).Info("Update event for composite pod group", "compositePodGroup", klog.KObj(newCPG))
	a.submitted("UpdateCompositePodGroup", objKey(newCPG.Namespace, newCPG.Name),
		a.cache.UpdateCompositePodGroup(a.logger, oldCPG, newCPG), &a.cpgUpdates)
}

// DeleteCompositePodGroup is the CompositePodGroup informer's delete
// callback (tombstones included): RemoveCompositePodGroup.
func (a *Adapter) DeleteCompositePodGroup(obj any) {
	var cpg *schedulingv1alpha3.CompositePodGroup
	switch t := obj.(type) {
	case *schedulingv1alpha3.CompositePodGroup:
		cpg = t
	case cache.DeletedFinalStateUnknown:
		c, ok := t.Obj.(*schedulingv1alpha3.CompositePodGroup)
		if !ok || c == nil {
			a.wrongTypeErr("deleteCompositePodGroup", wantComposite, t.Obj)
			return
		}
		a.tombstones.Add(1)
		cpg = c
	}
	if cpg == nil {
		a.wrongTypeErr("deleteCompositePodGroup", wantComposite, obj)
		return
	}
	a.logger.V(3).Info("Delete event for composite pod group", "compositePodGroup", klog.KObj(cpg))
	a.submitted("RemoveCompositePodGroup", objKey(cpg.Namespace, cpg.Name), a.cache.RemoveCompositePodGroup(a.logger, cpg), &a.cpgDeletes)
}
