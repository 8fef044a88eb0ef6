// Package errs holds the typed errors of the pod and node state machine,
// shared by the cache's coordinator (package actor, which re-exports them)
// and by what-if forks (package snapshot), so that both return the same
// sentinels and types. It has no state and no goroutines.
package errs

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/nodetree"
)

// Sentinel errors of the pod and node state machine (package actor and the
// root package re-export them). Match them with errors.Is.
var (
	ErrPodAlreadyCached = errors.New("schedcache: pod is already in the cache")
	ErrPodAlreadyAdded  = errors.New("schedcache: pod was already in added state")
	ErrPodNotFound      = errors.New("schedcache: pod is not in the cache")
	ErrPodAssumed       = errors.New("schedcache: assumed pods cannot be updated")
	ErrPodNotAssumed    = errors.New("schedcache: pod is not assumed")
	ErrPodNodeMismatch  = errors.New("schedcache: pod names another node than the cached pod")
	ErrCorrupted        = errors.New("schedcache: operation would corrupt the cache")
	// ErrEmptyNodeName: AssumePod and AddPod accept a pod without a node
	// name (it is cached on a nodeless entry named "", as upstream); it is
	// kept for operations that need a target node.
	ErrEmptyNodeName = errors.New("schedcache: pod has an empty node name")
	// ErrUIDMismatch: UpdatePod's new pod has another UID than the old one
	// and that UID is already cached as another pod (a rename to a free UID
	// is accepted, as upstream).
	ErrUIDMismatch  = errors.New("schedcache: new pod's UID is already cached as another pod")
	ErrNodeNotFound = errors.New("schedcache: node not found")
	// ErrNodeNameMismatch: UpdateNode's old node has another name, and the
	// zone change would drop that other, live node from the zone order (a
	// differing name that touches no other node is accepted, as upstream).
	ErrNodeNameMismatch = errors.New("schedcache: old node names another live node that the zone change would unlist")
	// ErrTooManyPods: the pod's node entry already holds
	// nodeinfo.MaxPodsPerNode pods; one more could overflow its totals.
	// It wraps nodeinfo.ErrQuantityOverflow.
	ErrTooManyPods = fmt.Errorf("schedcache: node already holds %d pods, the most its totals are safe for: %w",
		nodeinfo.MaxPodsPerNode, nodeinfo.ErrQuantityOverflow)
)

// PodError is returned by pod operations. It wraps one of the sentinels.
//
// Where upstream v1.37.2's cache returns an error for the same refusal,
// Error() is upstream's text, word for word (Obj set: the cache's calls
// set it); otherwise it names the operation, pod, node and cause.
type PodError struct {
	Op     string // "AssumePod", "AddPod", ...
	Key    string // pod UID
	Node   string // node name involved, if any
	Err    error
	Obj    string // the caller's pod as upstream prints it (klog.KObj: "namespace/name", or "name"); "" when unknown
	Stored string // ErrPodNodeMismatch: the cached pod's node
}

func (e *PodError) Error() string {
	if s, ok := e.upstream(); ok {
		return s
	}
	if e.Node != "" {
		return fmt.Sprintf("%s pod %s (node %q): %v", e.Op, e.Key, e.Node, e.Err)
	}
	return fmt.Sprintf("%s pod %s: %v", e.Op, e.Key, e.Err)
}
func (e *PodError) Unwrap() error { return e.Err }

// upstream returns upstream v1.37.2's text for e, if upstream has one.
func (e *PodError) upstream() (string, bool) {
	if e.Obj == "" {
		return "", false
	}
	var f string
	switch {
	case e.Op == "AssumePod" && e.Err == ErrPodAlreadyCached:
		f = "pod %v(%v) is in the cache, so can't be assumed"
	case (e.Op == "ForgetPod" || e.Op == "RemoveAssumedPod") && e.Err == ErrPodNodeMismatch:
		return fmt.Sprintf("pod %v(%v) was assumed on %v but assigned to %v", e.Key, e.Obj, e.Node, e.Stored), true
	case (e.Op == "ForgetPod" || e.Op == "RemoveAssumedPod") && e.Err == ErrPodNotAssumed:
		f = "pod %v(%v) is not assumed, so it cannot be removed or forgotten"
	case e.Op == "AddPod" && e.Err == ErrPodAlreadyAdded:
		f = "pod %v(%v) was already in added state"
	case e.Op == "UpdatePod" && e.Err == ErrPodNotFound:
		f = "pod %v(%v) is not added to scheduler cache, so cannot be updated"
	case e.Op == "UpdatePod" && e.Err == ErrPodAssumed:
		f = "assumed pod %v(%v) should not be updated"
	case e.Op == "RemovePod" && e.Err == ErrPodNotFound:
		f = "pod %v(%v) is not found in scheduler cache, so cannot be removed from it"
	case e.Op == "GetPod" && e.Err == ErrPodNotFound:
		f = "pod %v(%v) does not exist in scheduler cache"
	default:
		return "", false
	}
	return fmt.Sprintf(f, e.Key, e.Obj), true
}

// Named sets the Obj of a *PodError err (the caller's pod, as upstream
// names it) if it has none, and returns err.
func Named(err error, pod *v1.Pod) error {
	if pe, ok := err.(*PodError); ok && pe.Obj == "" && pod != nil {
		pe.Obj = KObj(pod.Namespace, pod.Name)
	}
	return err
}

// KObj returns pod's name as upstream's klog.KObj prints it:
// "namespace/name", or "name" without a namespace; "" for nil.
func KObj(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// CorruptionError is returned where upstream exits the process: the call
// names another node than the cached pod's. The cache state is unchanged.
// It wraps ErrCorrupted.
type CorruptionError struct {
	Op         string
	Key        string
	CachedNode string
	GivenNode  string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("%s pod %s: cached on node %q but the call names node %q: %v",
		e.Op, e.Key, e.CachedNode, e.GivenNode, ErrCorrupted)
}
func (e *CorruptionError) Unwrap() error { return ErrCorrupted }

// NodeError is returned by node operations. It wraps one of the sentinels.
type NodeError struct {
	Op   string
	Name string
	Err  error
}

// Error is upstream v1.37.2's text where upstream's cache refuses the same
// call (RemoveNode and GetNode of an unknown node), else it names the
// operation, node and cause.
func (e *NodeError) Error() string {
	var nz *nodetree.NotInZoneError
	if e.Op == "RemoveNode" && errors.As(e.Err, &nz) {
		return nz.Error() // upstream returns its node tree's error
	}
	if e.Err == ErrNodeNotFound {
		switch e.Op {
		case "RemoveNode":
			return fmt.Sprintf("node %v is not found", e.Name)
		case "GetNode":
			return fmt.Sprintf("node %v does not exist in scheduler cache", e.Name)
		}
	}
	return fmt.Sprintf("%s node %q: %v", e.Op, e.Name, e.Err)
}
func (e *NodeError) Unwrap() error { return e.Err }
