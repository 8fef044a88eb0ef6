package nodeinfo

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
//   - a NodeInfo extension, computed when a NodeInfo is made, before it is
//     published (on the shard's goroutine), and kept in it for good, so a
//     view derived from a node's aggregate is built once per NodeInfo and
//     no published NodeInfo is ever written.
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

// nodeExtension is the registered NodeInfo extension function; nil when
// none.
var nodeExtension atomic.Pointer[func(*NodeInfo) any]

// SetNodeExtension registers fn, which is called with every NodeInfo made
// from then on, before it is shared with anyone (NodeState.Freeze on the
// shard's goroutine, and the copies the With* methods make); a non-nil
// result is kept in the NodeInfo for good and returned by Extension. fn
// must be pure (a function of the NodeInfo's content), safe for concurrent
// use, and must not keep or publish the NodeInfo before it returns. A nil
// fn unregisters. NodeInfos made before the call have no extension. Safe
// for concurrent use.
func SetNodeExtension(fn func(*NodeInfo) any) {
	if fn == nil {
		nodeExtension.Store(nil)
		return
	}
	nodeExtension.Store(&fn)
}

// withExtension runs the registered node extension on n, which nobody else
// holds yet, and returns n.
func (n *NodeInfo) withExtension() *NodeInfo {
	if fn := nodeExtension.Load(); fn != nil {
		n.ext = (*fn)(n)
	}
	return n
}

// Extension returns the value the registered node extension computed when
// n was made, nil if none.
func (n *NodeInfo) Extension() any {
	if n == nil {
		return nil
	}
	return n.ext
}
