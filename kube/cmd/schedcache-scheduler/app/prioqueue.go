package app

import (
	"container/heap"

	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// prioQueue orders the scheduling queue as upstream's PrioritySort, the
// default profile's QueueSort plugin: the pod of higher spec.priority
// first, then the one queued first. It is the workqueue's underlying
// Queue (workqueue.TypedQueueConfig.Queue): the workqueue calls it under
// its own lock, so it needs none, and keeps its dirty and processing sets
// (an item is in it at most once).
//
// A pod's priority is read when its key is pushed, from the pod
// informer's store (filled before the informer's handlers run, so a
// queued pod is there); a key whose pod is gone counts as priority 0 and
// is dropped by the loop when popped.
type prioQueue struct {
	prio func(key string) int32 // immutable; safe for concurrent use
	seq  uint64                 // guarded by the workqueue's lock: pushes so far
	h    prioHeap               // guarded by the workqueue's lock
}

var _ workqueue.Queue[string] = (*prioQueue)(nil)

// newPrioQueue orders keys by prio.
func newPrioQueue(prio func(key string) int32) *prioQueue { return &prioQueue{prio: prio} }

// podPriority reads a pod's priority through lister: spec.priority, 0
// when unset or when the pod is not in the store (upstream's
// corev1helpers.PodPriority).
func podPriority(lister corev1listers.PodLister) func(key string) int32 {
	return func(key string) int32 {
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			return 0
		}
		pod, err := lister.Pods(ns).Get(name)
		if err != nil || pod.Spec.Priority == nil {
			return 0
		}
		return *pod.Spec.Priority
	}
}

// Touch: an item added again while queued keeps its place (the
// workqueue's FIFO does the same; upstream keeps a queued pod's
// timestamp).
func (q *prioQueue) Touch(string) {}

func (q *prioQueue) Push(key string) {
	q.seq++
	heap.Push(&q.h, prioItem{key: key, prio: q.prio(key), seq: q.seq})
}

func (q *prioQueue) Len() int { return len(q.h) }

func (q *prioQueue) Pop() string { return heap.Pop(&q.h).(prioItem).key }

// prioItem is a queued key, its pod's priority and its arrival.
type prioItem struct {
	key  string
	prio int32
	seq  uint64
}

// prioHeap is a container/heap of prioItems, PrioritySort's order.
type prioHeap []prioItem

func (h prioHeap) Len() int { return len(h) }
func (h prioHeap) Less(i, j int) bool {
	return h[i].prio > h[j].prio || (h[i].prio == h[j].prio && h[i].seq < h[j].seq)
}
func (h prioHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *prioHeap) Push(x any)   { *h = append(*h, x.(prioItem)) }
func (h *prioHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}
