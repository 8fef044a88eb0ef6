// Package informer attaches a schedcache.Cache to a client-go
// SharedInformerFactory with the semantics of upstream kube-scheduler's
// event handlers (k8s.io/kubernetes v1.35.4 pkg/scheduler/eventhandlers.go,
// the cache side of them):
//
//   - pods: only assigned pods (Spec.NodeName set) reach the cache; an
//     update from unassigned to assigned is a binding and is applied as
//     AddPod (which confirms the assumed pod); an update of an assigned pod
//     is UpdatePod; a delete of an assigned pod is RemovePod, and a
//     cache.DeletedFinalStateUnknown tombstone is RemovePod whatever its
//     (possibly stale) object says, as upstream ("attempting to cleanup
//     anyways");
//   - nodes: add, update and delete (tombstones included) map to AddNode,
//     UpdateNode and RemoveNode.
//
// Every event goes through the cache's Async path: the informer's
// handler goroutine never waits for a publication. Objects of the wrong
// type (in events or inside tombstones) and events the cache refuses at
// submission are reported to the error handler (default
// utilruntime.HandleErrorWithLogger, as upstream) and counted; they never
// panic. Failures found when the cache applies an event are delivered to
// the cache's async error handler: pass AsyncErrorHandler to
// schedcache.WithAsyncErrorHandler to route them the same way.
package informer

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
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
	Handler string // "addPod", "updatePod", "deletePod", "addNode", ...
	Want    string // "*v1.Pod" or "*v1.Node"
	Obj     any
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("%s: cannot convert %T to %s: %v", e.Handler, e.Obj, e.Want, ErrWrongType)
}
func (e *TypeError) Unwrap() error { return ErrWrongType }

// EventError reports an event the cache refused at submission (nil
// object, empty UID, closed or failed cache). It wraps the cache's error.
type EventError struct {
	Op  string // the cache call: "AddPod", "UpdatePod", ...
	Key string // namespace/name of the object
	Err error
}

func (e *EventError) Error() string {
	return fmt.Sprintf("scheduler cache %s of %s failed: %v", e.Op, e.Key, e.Err)
}
func (e *EventError) Unwrap() error { return e.Err }

// Option configures Attach.
type Option func(*config)

type config struct {
	logger  klog.Logger
	onError func(error)
}

// WithLogger sets the logger of the default error handler and of the
// handlers' V(3)/V(4) event logs.
func WithLogger(l klog.Logger) Option { return func(c *config) { c.logger = l } }

// WithErrorHandler receives the TypeErrors and EventErrors of the
// handlers, on the informer's handler goroutine (default:
// utilruntime.HandleErrorWithLogger). It must not block for long.
func WithErrorHandler(fn func(error)) Option { return func(c *config) { c.onError = fn } }

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

// Counts is a reading of an Adapter's event counters.
type Counts struct {
	PodAdds, PodUpdates, PodDeletes    int64 // events submitted to the cache
	NodeAdds, NodeUpdates, NodeDeletes int64
	Tombstones                         int64 // DeletedFinalStateUnknown handled (pods and nodes)
	Unassigned                         int64 // pod events ignored: the pod is not assigned
	WrongType                          int64 // callbacks with an object of the wrong type
	SubmitErrors                       int64 // events the cache refused at submission
}

// Adapter is the cache's event handlers on one informer factory.
//
// Contract: the handler methods are called by client-go's informer
// goroutines (any number of them, concurrently); Counts and HasSynced may
// be called from any goroutine. An Adapter owns no goroutine.
type Adapter struct {
	cache   *schedcache.Cache // immutable
	logger  klog.Logger       // immutable
	onError func(error)       // immutable

	podReg, nodeReg cache.ResourceEventHandlerRegistration // immutable after Attach

	// Event counters (atomic). Each informer delivers its events on one
	// goroutine, so the pod counters have one writer and the node counters
	// another: with no contention for xsync.Counter's stripes to relieve,
	// a plain atomic is the cheaper increment (BenchmarkCounterInc; figures
	// in docs/kube-integration.md, "Counters: xsync or atomics").
	podAdds, podUpdates, podDeletes    atomic.Int64
	nodeAdds, nodeUpdates, nodeDeletes atomic.Int64
	tombstones, unassigned, wrongType  atomic.Int64
	submitErrors                       atomic.Int64

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
		o(&cfg)
	}
	return &Adapter{cache: c, logger: cfg.logger, onError: cfg.onError}, nil
}

// Attach registers the cache's handlers on f's pod and node informers (as
// upstream's addAllEventHandlers does for the cache). Start f afterwards
// and wait for HasSynced (or WaitForSync).
func Attach(c *schedcache.Cache, f informers.SharedInformerFactory, opts ...Option) (*Adapter, error) {
	if f == nil {
		return nil, ErrNilCache
	}
	a, err := New(c, opts...)
	if err != nil {
		return nil, err
	}
	if a.podReg, err = f.Core().V1().Pods().Informer().AddEventHandler(a.PodHandler()); err != nil {
		return nil, err
	}
	if a.nodeReg, err = f.Core().V1().Nodes().Informer().AddEventHandler(a.NodeHandler()); err != nil {
		_ = f.Core().V1().Pods().Informer().RemoveEventHandler(a.podReg)
		return nil, err
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

// HasSynced reports whether both informers have delivered their initial
// lists to the handlers and the cache has applied them. The first call
// that finds the handlers synced waits for the cache (one Sync: until the
// events queued so far are published); later calls are one load.
func (a *Adapter) HasSynced() bool {
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	if a.synced {
		return true
	}
	if a.podReg == nil || a.nodeReg == nil || !a.podReg.HasSynced() || !a.nodeReg.HasSynced() {
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
		Tombstones: a.tombstones.Load(), Unassigned: a.unassigned.Load(), WrongType: a.wrongType.Load(),
		SubmitErrors: a.submitErrors.Load(),
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

func podKey(p *v1.Pod) string {
	if p == nil {
		return "<nil>"
	}
	return p.Namespace + "/" + p.Name
}

// AddPod is the pod informer's add callback.
func (a *Adapter) AddPod(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod == nil {
		a.wrongTypeErr("addPod", "*v1.Pod", obj)
		return
	}
	if !assignedPod(pod) {
		a.unassigned.Add(1)
		return
	}
	a.logger.V(3).Info("Add event for scheduled pod", "pod", klog.KObj(pod))
	a.submitted("AddPod", podKey(pod), a.cache.AddPodAsync(pod), &a.podAdds)
}

// UpdatePod is the pod informer's update callback: an assigned old pod is
// UpdatePod; an unassigned old pod with an assigned new one is a binding,
// applied as AddPod; two unassigned pods are not the cache's business.
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
	default:
		a.unassigned.Add(1)
	}
}

// DeletePod is the pod informer's delete callback. A tombstone's object
// may be stale, so it is removed whether or not it says it is assigned.
func (a *Adapter) DeletePod(obj any) {
	var pod *v1.Pod
	switch t := obj.(type) {
	case *v1.Pod:
		if t == nil {
			a.wrongTypeErr("deletePod", "*v1.Pod", obj)
			return
		}
		if !assignedPod(t) {
			a.unassigned.Add(1)
			return
		}
		pod = t
	case cache.DeletedFinalStateUnknown:
		p, ok := t.Obj.(*v1.Pod)
		if !ok || p == nil {
			a.wrongTypeErr("deletePod", "*v1.Pod", t.Obj)
			return
		}
		a.tombstones.Add(1)
		pod = p
	default:
		a.wrongTypeErr("deletePod", "*v1.Pod", obj)
		return
	}
	a.logger.V(3).Info("Delete event for scheduled pod", "pod", klog.KObj(pod))
	a.submitted("RemovePod", podKey(pod), a.cache.RemovePodAsync(pod), &a.podDeletes)
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
