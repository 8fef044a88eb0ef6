package app

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
)

// Upstream's scheduling queue keeps a pod that found no node in its
// unschedulable pool until a cluster event that may make it schedulable
// (a queueing hint of a plugin that rejected it says Queue), or until it
// has waited podMaxInUnschedulablePodsDuration, checked every
// unschedulableFlushPeriod. These are upstream's values.
const (
	podMaxInUnschedulable    = 5 * time.Minute
	unschedulableFlushPeriod = 30 * time.Second
)

// eventUnschedulableTimeout labels the moves of the periodic flush, as
// upstream's.
var eventUnschedulableTimeout = framework.EventUnschedulableTimeout

// hintFn is one plugin's queueing hint for one cluster event.
type hintFn struct {
	plugin string             // immutable
	fn     fwk.QueueingHintFn // immutable; never nil
}

// hintMap is a profile's queueing hints: for each event a plugin
// registered (EventsToRegister), its hint functions. Built once by New;
// immutable.
type hintMap map[fwk.ClusterEvent][]hintFn

// buildHintMap gathers the EventsToRegister of a framework's plugins as
// upstream's buildQueueingHintMap does: a missing hint function means
// Queue, and a Pod event stands for the assigned, unscheduled and target
// pod events (framework.UnrollPodEvent).
func buildHintMap(ctx context.Context, fw framework.Framework) (hintMap, error) {
	m := hintMap{}
	var errs error
	for _, e := range fw.EnqueueExtensions() {
		events, err := e.EventsToRegister(ctx)
		if err != nil {
			errs = errors.Join(errs, err)
			continue
		}
		for _, ev := range events {
			fn := ev.QueueingHintFn
			if fn == nil {
				fn = func(klog.Logger, *v1.Pod, any, any) (fwk.QueueingHint, error) { return fwk.Queue, nil }
			}
			h := hintFn{plugin: e.Name(), fn: fn}
			if ev.Event.Resource == fwk.Pod {
				for _, pe := range framework.UnrollPodEvent(ev.Event) {
					m[pe] = append(m[pe], h)
				}
			} else {
				m[ev.Event] = append(m[ev.Event], h)
			}
		}
	}
	return m, errs
}

// flightEvent is a cluster event recorded while an attempt ran.
// Immutable.
type flightEvent struct {
	ev             fwk.ClusterEvent
	oldObj, newObj any
}

// maxFlight bounds the events one attempt records; past it, the pod is
// sent back after its backoff whatever the events.
const maxFlight = 1024

// parked is a pod in the unschedulable pool. Immutable once parked.
type parked struct {
	pod        *v1.Pod          // the pod as of its failed attempt
	rejectors  sets.Set[string] // the plugins that rejected it (Unschedulable)
	pending    sets.Set[string] // the plugins that answered Pending
	since      time.Time        // when it was parked
	backoffEnd time.Time        // when its backoff ends
}

// Queueing strategies of one event for one parked pod, as upstream's.
type strategy int

const (
	skip             strategy = iota // the event cannot help
	afterBackoff                     // move it, to wait out the rest of its backoff
	queueImmediately                 // a Pending plugin said Queue: no backoff
)

// pool is the unschedulable pool: the pods that found no node, waiting
// for a cluster event or the flush.
//
// Contract: safe for concurrent use: the informers' handlers call event,
// the scheduling loop parks, the flush goroutine flushes; all under mu.
// The hint functions run under mu, as upstream's run under the queue's
// lock.
type pool struct {
	queue  workqueue.TypedRateLimitingInterface[string] // immutable; safe for concurrent use
	hints  map[string]hintMap                           // immutable: schedulerName -> the profile's hints
	moves  *prometheus.CounterVec                       // immutable; safe for concurrent use
	logger klog.Logger                                  // immutable
	now    func() time.Time                             // immutable: the clock (time.Now outside tests)
	sync   func() error                                 // immutable: waits until the cache has published the events given to it
	mu     sync.Mutex                                   // guards pods, inFlight, flight, overflow
	pods   map[string]*parked                           // guarded by mu: key -> pod
	// inFlight: an attempt runs; flight: the cluster events since it
	// began (at most maxFlight; overflow: more came). Guarded by mu.
	inFlight, overflow bool
	flight             []flightEvent
}

// len is the number of parked pods.
func (p *pool) len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pods)
}

// begin starts recording the cluster events, for the attempt the
// scheduling loop starts (one at a time): park reads them. end stops.
func (p *pool) begin() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.inFlight, p.flight, p.overflow = true, p.flight[:0], false
}

// end stops recording (idempotent).
func (p *pool) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.endLocked()
}

func (p *pool) endLocked() {
	clear(p.flight) // drop the objects
	p.inFlight, p.flight, p.overflow = false, p.flight[:0], false
}

// park puts a pod that found no node in the pool, to wait for an event;
// it ends the attempt's recording. If a cluster event that came while
// the attempt ran may make it schedulable (a hint of a plugin that
// rejected it says so: the attempt may have looked before the event),
// it goes back to the queue after its backoff instead, as upstream's
// AddUnschedulableIfNotPresent decides with the pod's in-flight events.
func (p *pool) park(key string, pod *v1.Pod, diag *framework.Diagnosis, backoff time.Duration) {
	now := p.now()
	e := &parked{pod: pod, since: now, backoffEnd: now.Add(backoff)}
	if diag != nil {
		e.rejectors, e.pending = diag.UnschedulablePlugins, diag.PendingPlugins
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	defer p.endLocked()
	moved := p.overflow
	for i := 0; i < len(p.flight) && !moved; i++ {
		f := p.flight[i]
		moved = p.worth(e, f.ev, f.oldObj, f.newObj) != skip
	}
	if moved {
		p.queue.AddAfter(key, backoff)
		return
	}
	p.pods[key] = e
}

// remove takes key out of the pool (its attempt starts, or it is gone
// or bound).
func (p *pool) remove(key string) {
	p.mu.Lock()
	delete(p.pods, key)
	p.mu.Unlock()
}

// update follows an update of a pending pod; false: it is not parked.
// A parked pod takes the new object, and moves if the hints of the
// plugins that rejected it say one of the update's events
// (framework.PodSchedulingPropertiesChange of the target pod) may make
// it schedulable, as upstream's queue.Update.
func (p *pool) update(key string, oldPod, newPod *v1.Pod) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	e, ok := p.pods[key]
	if !ok {
		return false
	}
	ne := *e
	ne.pod = newPod
	p.pods[key] = &ne
	for _, ev := range framework.PodSchedulingPropertiesChange(newPod, oldPod, true) {
		if s := p.worth(&ne, ev, oldPod, newPod); s != skip {
			p.moveLocked(key, &ne, s, ev)
			break
		}
	}
	return true
}

// moveLocked takes a parked pod back to the queue: at once when its
// backoff is over or a Pending plugin asked for it, else when its
// backoff ends. mu is held.
func (p *pool) moveLocked(key string, e *parked, s strategy, ev fwk.ClusterEvent) {
	delete(p.pods, key)
	p.moves.WithLabelValues(ev.Label()).Inc()
	if wait := e.backoffEnd.Sub(p.now()); s == afterBackoff && wait > 0 {
		p.queue.AddAfter(key, wait)
	} else {
		p.queue.Add(key)
	}
	p.logger.V(4).Info("Pod moved back to the queue by a cluster event", "pod", klog.KObj(e.pod), "event", ev.Label())
}

// event moves the parked pods that the cluster event may make
// schedulable (upstream's MoveAllToActiveOrBackoffQueue with queueing
// hints): back to the queue at once if their backoff is over or a
// Pending plugin asked for it, else when it ends.
func (p *pool) event(ev fwk.ClusterEvent, oldObj, newObj any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.inFlight {
		if len(p.flight) < maxFlight {
			p.flight = append(p.flight, flightEvent{ev: ev, oldObj: oldObj, newObj: newObj})
		} else {
			p.overflow = true
		}
	}
	if len(p.pods) == 0 {
		return
	}
	synced := false
	for key, e := range p.pods {
		if s := p.worth(e, ev, oldObj, newObj); s != skip {
			if !synced {
				// The adapter gave the event to the cache just before
				// (chain); node and assigned-pod events are published
				// asynchronously: the moved pod must see it.
				if err := p.sync(); err != nil {
					p.logger.Error(err, "Cache sync before moving pods")
				}
				synced = true
			}
			p.moveLocked(key, e, s, ev)
		}
	}
}

// worth is upstream's isPodWorthRequeuing for one parked pod: a pod no
// plugin rejected (no nodes at all) moves on any event; otherwise only
// the hints of the plugins that rejected it count, an error counting as
// Queue.
func (p *pool) worth(e *parked, ev fwk.ClusterEvent, oldObj, newObj any) strategy {
	if e.rejectors.Len() == 0 && e.pending.Len() == 0 {
		return afterBackoff
	}
	if framework.ClusterEventIsWildCard(ev) {
		return afterBackoff
	}
	out := skip
	for registered, fns := range p.hints[e.pod.Spec.SchedulerName] {
		if !framework.MatchClusterEvents(registered, ev) {
			continue
		}
		for _, h := range fns {
			if !e.rejectors.Has(h.plugin) && !e.pending.Has(h.plugin) {
				continue
			}
			hint, err := h.fn(p.logger, e.pod, oldObj, newObj)
			if err != nil {
				p.logger.Error(err, "Queueing hint failed; moving the pod", "plugin", h.plugin, "event", ev.Label(), "pod", klog.KObj(e.pod))
				hint = fwk.Queue
			}
			if hint == fwk.QueueSkip {
				continue
			}
			if e.pending.Has(h.plugin) {
				return queueImmediately
			}
			out = afterBackoff
		}
	}
	return out
}

// flush moves the pods parked longer than podMaxInUnschedulable
// (upstream's flushUnschedulablePodsLeftover).
func (p *pool) flush() {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	for key, e := range p.pods {
		if now.Sub(e.since) < podMaxInUnschedulable {
			continue
		}
		delete(p.pods, key)
		p.moves.WithLabelValues(eventUnschedulableTimeout.Label()).Inc()
		p.queue.Add(key)
	}
}

// runFlush flushes every unschedulableFlushPeriod until ctx ends.
func (p *pool) runFlush(ctx context.Context) {
	t := time.NewTicker(unschedulableFlushPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			p.flush()
		}
	}
}

// ---- the informers' events ----

// podHandler follows every pod: the pending pods of the profiles are
// queued (and their nominations followed); assigned pods' additions,
// changes and deletions, and pending pods' deletions, are cluster events
// for the pool, as upstream's event handlers send them.
func (sc *Scheduler) podHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			pod, ok := obj.(*v1.Pod)
			if !ok {
				return
			}
			if pod.Spec.NodeName != "" {
				sc.pool.event(framework.EventAssignedPodAdd, nil, pod)
				return
			}
			if sc.responsible(pod) {
				sc.nom.Observe(pod)
			}
			sc.onPod(pod)
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Pod)
			pod, ok2 := newObj.(*v1.Pod)
			if !ok1 || !ok2 {
				return
			}
			switch {
			case pod.Spec.NodeName != "" && old.Spec.NodeName == "":
				sc.dropPending(pod)
				sc.pool.event(framework.EventAssignedPodAdd, nil, pod)
				return
			case pod.Spec.NodeName != "":
				for _, ev := range framework.PodSchedulingPropertiesChange(pod, old, false) {
					sc.pool.event(ev, old, pod)
				}
				return
			}
			if !sc.responsible(pod) {
				sc.dropPending(pod)
				return
			}
			sc.nom.Observe(pod)
			key, err := cache.MetaNamespaceKeyFunc(pod)
			if err != nil {
				return
			}
			if old.ResourceVersion == pod.ResourceVersion {
				return // a resync: nothing changed
			}
			// A parked pod moves only if the hints of the plugins that
			// rejected it say its update may help, as upstream's
			// queue.Update decides; its status (this scheduler's own
			// condition patch) changes nothing.
			if sc.pool.update(key, old, pod) {
				return
			}
			sc.onPod(pod)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			pod, ok := obj.(*v1.Pod)
			if !ok {
				return
			}
			if pod.Spec.NodeName != "" {
				sc.pool.event(framework.EventAssignedPodDelete, pod, nil)
				return
			}
			sc.dropPending(pod)
			sc.pool.event(framework.EventUnscheduledPodDelete, pod, nil)
		},
	}
}

// dropPending forgets a pod that is no longer pending (or no longer
// this scheduler's): its place in the pool and its nomination.
func (sc *Scheduler) dropPending(pod *v1.Pod) {
	sc.nom.DeleteNominatedPodIfExists(pod)
	if key, err := cache.MetaNamespaceKeyFunc(pod); err == nil {
		sc.pool.remove(key)
	}
}

// nodeHandler sends the node events to the pool, as upstream's: an
// addition, the scheduling properties an update changed
// (framework.NodeSchedulingPropertiesChange), a deletion.
func (sc *Scheduler) nodeHandler() cache.ResourceEventHandler {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if n, ok := obj.(*v1.Node); ok {
				sc.pool.event(fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Add}, nil, n)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			old, ok1 := oldObj.(*v1.Node)
			n, ok2 := newObj.(*v1.Node)
			if !ok1 || !ok2 {
				return
			}
			for _, ev := range framework.NodeSchedulingPropertiesChange(n, old) {
				sc.pool.event(ev, old, n)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*v1.Node); ok {
				sc.pool.event(fwk.ClusterEvent{Resource: fwk.Node, ActionType: fwk.Delete}, n, nil)
			}
		},
	}
}
