// Package errs holds the typed errors of the pod and node state machine,
// shared by the cache's coordinator (package actor, which re-exports them)
// and by what-if forks (package snapshot), so that both return the same
// sentinels and types. It has no state and no goroutines.
package errs

import (
	"errors"
	"fmt"

	"github.com/schedcache/schedcache/nodeinfo"
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
type PodError struct {
	Op   string // "AssumePod", "AddPod", ...
	Key  string // pod UID
	Node string // node name involved, if any
	Err  error
}

func (e *PodError) Error() string {
	if e.Node != "" {
		return fmt.Sprintf("%s pod %s (node %q): %v", e.Op, e.Key, e.Node, e.Err)
	}
	return fmt.Sprintf("%s pod %s: %v", e.Op, e.Key, e.Err)
}
func (e *PodError) Unwrap() error { return e.Err }

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

func (e *NodeError) Error() string { return fmt.Sprintf("%s node %q: %v", e.Op, e.Name, e.Err) }
func (e *NodeError) Unwrap() error { return e.Err }
