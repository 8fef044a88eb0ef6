package sim

import (
	"container/heap"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
)

// The scheduling queue of a phases run in the deterministic engine: the
// simulator's rendering of kube-scheduler v1.37.2's PriorityQueue, with
// its default settings, for the pods of createPods phases.
//
//   - activeQ is ordered as PrioritySort orders it: higher priority
//     first, then the earlier queue timestamp (when the pod was last
//     added to the queue), then insertion order (upstream leaves equal
//     keys to its heap; a fixed order keeps runs reproducible).
//   - A pod found unschedulable goes to the unschedulable pods with its
//     attempt counted; a failed binding (an error, upstream) goes to the
//     error backoff queue. Each attempt's backoff is 1 s doubling up to
//     10 s (podInitialBackoffDuration, podMaxBackoffDuration), counted
//     from the pod's timestamp and truncated to whole seconds
//     (SchedulerPopFromBackoffQ's ordering window); the backoff queues
//     are flushed once a second, at whole seconds, so a pod leaves
//     backoff at the first whole second after its expiry's.
//   - A cluster event (a node added, a node whose scheduling properties
//     changed, an assigned pod deleted, completions included) moves every
//     unschedulable pod to the backoff queue if it is still backing off,
//     else to activeQ: upstream's MoveAllToActiveOrBackoffQueue with every
//     queueing hint answering Queue (upstream asks each rejecting
//     plugin's hint; the simulator does not keep the rejecting plugins).
//   - Every 30 s the pods unschedulable for more than 5 minutes are moved
//     the same way (podMaxInUnschedulablePodsDuration).
//   - With activeQ empty, a scheduler takes the backoff queue's first pod
//     at once (SchedulerPopFromBackoffQ, on by default), never the error
//     backoff queue's.
//   - A pod with scheduling gates waits, gated, until an ungatePods phase
//     removes them (the SchedulingGates PreEnqueue plugin); events do not
//     move it.

// Upstream v1.37.2's queue defaults (pkg/scheduler/backend/queue).
const (
	podInitialBackoff     = time.Second
	podMaxBackoff         = 10 * time.Second
	podMaxInUnschedulable = 5 * time.Minute
	unschedulableFlush    = 30 * time.Second // flushUnschedulablePodsLeftover's period
	backoffWindow         = time.Second      // backoffQOrderingWindowDuration
)

// qWhere is where a phase pod stands in the queue.
type qWhere uint8

const (
	qNone       qWhere = iota // not queued: in flight, bound, settled for good or gone
	qActive                   // activeQ
	qBackoff                  // the backoff queue (unschedulable before)
	qErrBackoff               // the error backoff queue (failed bindings)
	qUnsched                  // the unschedulable pods
	qGated                    // gated (spec.schedulingGates)
	qPreGated                 // held by a PreEnqueue plugin of the picker (podgroups.go)
)

// queueInfo is owned by the event loop: a phase pod's queue bookkeeping.
type queueInfo struct {
	where   qWhere
	idx     int           // its index in its heap or in the unschedulable list
	seq     uint64        // insertion order, the last tie-break
	ts      time.Duration // upstream's Timestamp: when it was last added to the queue
	unsched int           // attempts found unschedulable (UnschedulableCount)
	errs    int           // consecutive failed bindings (ConsecutiveErrorsCount)
	expiry  time.Duration // its backoff's end, aligned to the window (set when it fails)
}

// podHeap is a min-heap of phase pods by less; each pod's q.idx is its
// index.
type podHeap struct {
	pods []*phasePod
	less func(a, b *phasePod) bool
}

func (h *podHeap) Len() int           { return len(h.pods) }
func (h *podHeap) Less(i, j int) bool { return h.less(h.pods[i], h.pods[j]) }
func (h *podHeap) Swap(i, j int) {
	h.pods[i], h.pods[j] = h.pods[j], h.pods[i]
	h.pods[i].q.idx, h.pods[j].q.idx = i, j
}
func (h *podHeap) Push(x any) {
	pp := x.(*phasePod)
	pp.q.idx = len(h.pods)
	h.pods = append(h.pods, pp)
}
func (h *podHeap) Pop() any {
	n := len(h.pods) - 1
	pp := h.pods[n]
	h.pods[n] = nil
	h.pods = h.pods[:n]
	return pp
}

// activeLess is PrioritySort's Less with a fixed last tie-break.
func activeLess(a, b *phasePod) bool {
	pa, pb := priority(a.pod), priority(b.pod)
	if pa != pb {
		return pa > pb
	}
	if a.q.ts != b.q.ts {
		return a.q.ts < b.q.ts
	}
	return a.q.seq < b.q.seq
}

// backoffLess orders the backoff queue: the earlier expiry, then as
// activeQ (upstream's lessBackoffCompletedWithPriority).
func backoffLess(a, b *phasePod) bool {
	if a.q.expiry != b.q.expiry {
		return a.q.expiry < b.q.expiry
	}
	return activeLess(a, b)
}

// errBackoffLess orders the error backoff queue: the earlier expiry, then
// insertion order.
func errBackoffLess(a, b *phasePod) bool {
	if a.q.expiry != b.q.expiry {
		return a.q.expiry < b.q.expiry
	}
	return a.q.seq < b.q.seq
}

// podQueue is owned by the event loop: the scheduling queue (see above).
type podQueue struct {
	active, backoff, errBackoff podHeap
	unsched                     []*phasePod // the unschedulable pods; q.idx is the index
	gated                       int         // pods gated
	seq                         uint64      // the next insertion's seq
}

func newPodQueue() podQueue {
	return podQueue{active: podHeap{less: activeLess}, backoff: podHeap{less: backoffLess}, errBackoff: podHeap{less: errBackoffLess}}
}

// backoffFor is upstream's calculateBackoffDuration for one pod: the
// initial backoff doubled per attempt after the first, at most the
// maximum; zero before any attempt.
func backoffFor(count int) time.Duration {
	if count <= 0 {
		return 0
	}
	d := podInitialBackoff
	for i := 1; i < count; i++ {
		if d >= podMaxBackoff/2 {
			return podMaxBackoff
		}
		d *= 2
	}
	return min(d, podMaxBackoff)
}

// alignDown truncates t to the backoff window.
func alignDown(t time.Duration) time.Duration { return t - t%backoffWindow }

// backingOff says whether pp's backoff is not over at now (upstream's
// isEntityBackingoff: the expiry is not before now's window).
func (pp *phasePod) backingOff(now time.Duration) bool {
	if pp.q.unsched == 0 && pp.q.errs == 0 {
		return false
	}
	return pp.q.expiry >= alignDown(now)
}

// flushAt is when the flush that ends pp's backoff runs: the first whole
// second after its expiry's window.
func (pp *phasePod) flushAt() time.Duration { return pp.q.expiry + backoffWindow }

// len is the pods a scheduler could take now or after their backoff.
func (q *podQueue) len() int { return q.active.Len() + q.backoff.Len() + q.errBackoff.Len() }

// addActive puts pp in activeQ; fresh: a new arrival, stamped now.
func (q *podQueue) addActive(pp *phasePod, now time.Duration, fresh bool) {
	if fresh {
		pp.q.ts = now
	}
	pp.q.seq = q.seq
	q.seq++
	pp.q.where = qActive
	heap.Push(&q.active, pp)
}

// pop removes and returns the pod a scheduler takes: activeQ's first, or
// with activeQ empty the backoff queue's first; nil when both are empty.
func (q *podQueue) pop() *phasePod {
	var pp *phasePod
	switch {
	case q.active.Len() > 0:
		pp = heap.Pop(&q.active).(*phasePod)
	case q.backoff.Len() > 0:
		pp = heap.Pop(&q.backoff).(*phasePod)
	default:
		return nil
	}
	pp.q.where = qNone
	return pp
}

// failed records an attempt of pp that ended at now: unschedulable, or,
// with errored, a failed binding; it sets the pod's timestamp and backoff
// expiry. The caller then places the pod (unschedulable or backoffError).
func (pp *phasePod) failed(now time.Duration, errored bool) {
	if errored {
		pp.q.errs++
	} else {
		pp.q.unsched++
		pp.q.errs = 0
	}
	count := pp.q.unsched
	if pp.q.errs > 0 {
		count = pp.q.errs
	}
	pp.q.ts = now
	pp.q.expiry = alignDown(now + backoffFor(count))
}

// unschedulable puts pp, just failed, with the unschedulable pods.
func (q *podQueue) unschedulable(pp *phasePod) {
	pp.q.where = qUnsched
	pp.q.idx = len(q.unsched)
	q.unsched = append(q.unsched, pp)
}

// backoffError puts pp, whose binding just failed, in the error backoff
// queue.
func (q *podQueue) backoffError(pp *phasePod) {
	pp.q.seq = q.seq
	q.seq++
	pp.q.where = qErrBackoff
	heap.Push(&q.errBackoff, pp)
}

// requeue moves pp (out of every queue) to the backoff queue if it is
// backing off at now, else to activeQ; it says whether it went to the
// backoff queue.
func (q *podQueue) requeue(pp *phasePod, now time.Duration) bool {
	if pp.backingOff(now) {
		pp.q.seq = q.seq
		q.seq++
		pp.q.where = qBackoff
		heap.Push(&q.backoff, pp)
		return true
	}
	q.addActive(pp, now, false)
	return false
}

// remove takes pp out of whatever queue holds it.
func (q *podQueue) remove(pp *phasePod) {
	switch pp.q.where {
	case qActive:
		heap.Remove(&q.active, pp.q.idx)
	case qBackoff:
		heap.Remove(&q.backoff, pp.q.idx)
	case qErrBackoff:
		heap.Remove(&q.errBackoff, pp.q.idx)
	case qUnsched:
		q.dropUnsched(pp)
	case qGated:
		q.gated--
	case qPreGated:
		// held in phaseRun.preGated, which skips pods no longer there
	}
	pp.q.where = qNone
}

// dropUnsched removes pp from the unschedulable list (swap-delete).
func (q *podQueue) dropUnsched(pp *phasePod) {
	i, last := pp.q.idx, len(q.unsched)-1
	q.unsched[i] = q.unsched[last]
	q.unsched[i].q.idx = i
	q.unsched[last] = nil
	q.unsched = q.unsched[:last]
}

// takeUnsched removes and returns the unschedulable pods that keep(pp)
// selects, in list order.
func (q *podQueue) takeUnsched(keep func(*phasePod) bool) []*phasePod {
	var out []*phasePod
	k := 0
	for _, pp := range q.unsched {
		if keep(pp) {
			pp.q.where = qNone
			out = append(out, pp)
			continue
		}
		pp.q.idx = k
		q.unsched[k] = pp
		k++
	}
	clear(q.unsched[k:])
	q.unsched = q.unsched[:k]
	return out
}

// flushBackoff moves the pods whose backoff is over at now (a flush at
// a whole second) from both backoff queues to activeQ, and returns how
// many.
func (q *podQueue) flushBackoff(now time.Duration) int {
	n := 0
	for _, h := range []*podHeap{&q.backoff, &q.errBackoff} {
		for h.Len() > 0 && !h.pods[0].backingOff(now) {
			pp := heap.Pop(h).(*phasePod)
			q.addActive(pp, now, false)
			n++
		}
	}
	return n
}

// nodeEventful says whether a node update is a cluster event for the
// queue: its schedulable, allocatable, labels, taints or the status of a
// condition changed (upstream's nodeSchedulingPropertiesChange, without
// the annotations and declared features the simulator never changes);
// heartbeats are not.
func nodeEventful(old, cur *v1.Node) bool {
	if old == nil || cur == nil {
		return true
	}
	if old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		!equality.Semantic.DeepEqual(old.Status.Allocatable, cur.Status.Allocatable) ||
		!equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		!equality.Semantic.DeepEqual(old.Spec.Taints, cur.Spec.Taints) {
		return true
	}
	if len(old.Status.Conditions) != len(cur.Status.Conditions) {
		return true
	}
	for i := range old.Status.Conditions {
		a, b := old.Status.Conditions[i], cur.Status.Conditions[i]
		if a.Type != b.Type || a.Status != b.Status {
			return true
		}
	}
	return false
}
