package fwkadapter

import (
	"errors"
	"fmt"

	"github.com/schedcache/schedcache/nodeinfo"
)

// Errors of the adapter. Match them with errors.Is; the functions that
// return them may wrap them with context.
var (
	// ErrNilSnapshot reports a nil *snapshot.Snapshot given to NewLister,
	// or a method called on a nil *Lister.
	ErrNilSnapshot = errors.New("fwkadapter: nil snapshot")
	// ErrReadOnly reports a mutation asked of a published NodeInfo (a view
	// of a snapshot entry): take its Snapshot() and mutate that copy.
	ErrReadOnly = errors.New("fwkadapter: published NodeInfo is read-only; mutate its Snapshot()")
	// ErrPodNotFound reports a RemovePod for a pod the node does not hold.
	ErrPodNotFound = errors.New("fwkadapter: pod not found on node")
	// ErrNilPod and ErrEmptyUID are the project's errors for a pod without
	// a cache key (nodeinfo.PodKey).
	ErrNilPod   = nodeinfo.ErrNilPod
	ErrEmptyUID = nodeinfo.ErrEmptyUID
)

// PodNotFoundError is what MutableNodeInfo.RemovePod returns for a pod the
// node does not hold; it wraps ErrPodNotFound.
type PodNotFoundError struct {
	Pod  string // namespace/name
	Node string // "" for a nodeless copy
}

func (e *PodNotFoundError) Error() string {
	return fmt.Sprintf("no corresponding pod %s in pods of node %s", e.Pod, e.Node)
}

func (e *PodNotFoundError) Unwrap() error { return ErrPodNotFound }
