package framework

import (
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
)

// Two small hooks let an adapter (kube/fwkadapter) attach derived data to
// the immutable values without this module knowing its types:
//
//   - a pod extension, computed by NewPodInfo on the caller's goroutine
//     (never the coordinator's) and stored in the PodInfo for good, so a
//     value derived from a pod is computed once per pod object;
//   - a NodeInfo memo, one write-once slot per NodeInfo that a reader may
//     fill with a view derived from the NodeInfo's own (immutable) content.
//
// Neither changes anything an accessor of PodInfo or NodeInfo returns.

// podExtension is the registered pod extension function; nil when none.
var podExtension atomic.Pointer[func(*v1.Pod) any]

// SetPodExtension registers fn, which NewPodInfo (and NewPodInfoAnyUID)
// call with each pod; a non-nil result is kept in the PodInfo and returned
// by Extension. fn must be pure, safe for concurrent use and quick for
// pods it has nothing to say about (return nil). A nil fn unregisters.
// PodInfos built before the call have no extension. Safe for concurrent
// use; meant to be called once, from an init function.
func SetPodExtension(fn func(pod *v1.Pod) any) {
	if fn == nil {
		podExtension.Store(nil)
		return
	}
	podExtension.Store(&fn)
}

// podExtensionOf runs the registered extension for pod, nil if none.
func podExtensionOf(pod *v1.Pod) any {
	if fn := podExtension.Load(); fn != nil {
		return (*fn)(pod)
	}
	return nil
}

// Extension returns the value the registered pod extension computed when
// p was built, nil if none was registered or it returned nil.
func (p *PodInfo) Extension() any {
	if p == nil || p.extra == nil {
		return nil
	}
	return p.extra.ext
}

// nodeMemo boxes a memo value so that the slot is one pointer.
type nodeMemo struct{ v any }

// Memo returns the value stored by SetMemo, nil if none.
func (n *NodeInfo) Memo() any {
	if n == nil {
		return nil
	}
	if m := n.memo.Load(); m != nil {
		return m.v
	}
	return nil
}

// SetMemo stores v in n's memo slot unless a value is already there, and
// returns the value the slot holds afterwards (v, or the one stored
// first). The memo must be derived only from n's content, so that every
// reader of n computes an equal value; it is never copied to another
// NodeInfo. Safe for concurrent use; a nil n or v returns v unchanged.
func (n *NodeInfo) SetMemo(v any) any {
	if n == nil || v == nil {
		return v
	}
	if n.memo.CompareAndSwap(nil, &nodeMemo{v: v}) {
		return v
	}
	return n.memo.Load().v
}
