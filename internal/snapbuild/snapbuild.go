// Package snapbuild is how the coordinator (package actor) builds the
// snapshots it publishes. Users read snapshots and never build them, so
// package snapshot keeps its builder unexported and registers it here
// from its init; actor, which imports snapshot, gets one from New. This
// is the registration idiom of google.golang.org/grpc/internal: an
// internal package that both sides import, so that the API is visible
// to the module only.
package snapbuild

import (
	"github.com/schedcache/schedcache/podgroup"
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/nodeinfo"
)

// Builder assembles the next snapshot (an S) from the last committed one
// by path-copying what changed: a transaction is the Set and Delete calls
// since the last Commit.
//
// Contract: owned by one goroutine (the coordinator); not safe for
// concurrent use; blocks only where FoldPods says. Snapshots it committed
// are immutable and safe for any number of readers.
type Builder[S any] interface {
	// Last returns the last committed snapshot.
	Last() S
	// SetNode records the frozen entry for slot (nil clears it).
	SetNode(slot int32, ni *nodeinfo.NodeInfo)
	// PrefetchNodes reads, without changing anything, what SetNode of
	// each of slots will copy, with the misses in flight together, so
	// that the SetNodes that follow find them in cache.
	PrefetchNodes(slots []int32)
	// SetIndex maps name to slot; DeleteIndex removes name.
	SetIndex(name string, slot int32)
	DeleteIndex(name string)
	// SetPod records pod key's entry; DeletePod removes it.
	SetPod(key string, pod *v1.Pod, assumed bool)
	DeletePod(key string)
	// SetPVC adds (used) or removes a key of the used-PVC set.
	SetPVC(key string, used bool)
	// SetPVCCum sets claim key's cumulative reference change (0 removes
	// it): the core's running sum of upstream's pending PVC delta.
	SetPVCCum(key string, v int64)
	// SetGroups sets the pod-group table of the next snapshot.
	SetGroups(t podgroup.Table)
	// SetLists replaces the node list and the three affinity lists
	// (affinity, required anti-affinity, required non-host-scoped
	// anti-affinity); the order slice is handed over (never written again
	// by the caller).
	SetLists(order []int32, aff, anti, nonHost immutable.Seq[int32], err error)
	// Lists returns them as of this transaction (read-only).
	Lists() (order []int32, aff, anti, nonHost immutable.Seq[int32], err error)
	// SetImages records the image registry version of this transaction.
	SetImages(t *nodeinfo.ImageTable)
	// SetTree records the zone tree's node count and, when the tree
	// lists names the node list skips, its list by name (immutable).
	SetTree(numNodes int, names []string)
	// SetFoldQueue makes the builder fold its pod log through q, a
	// queue from NewFoldQueue served on another goroutine; nil (the
	// default) folds on the builder's goroutine.
	SetFoldQueue(q FoldQueue)
	// FoldPods keeps the pod log short. A builder with a fold queue
	// must call it in every transaction; it waits for the fold in
	// flight only when the log has reached its bound, and panics with a
	// fold's panic.
	FoldPods()
	// Commit ends the transaction and returns the new snapshot, which
	// becomes Last. nodeCount counts node entries (ghosts included),
	// podCount the pods.
	Commit(epoch uint64, nodeCount, podCount int) S
}

// FoldQueue carries a builder's pod-log folds to the goroutine that runs
// them and their results back. Contract: one goroutine calls Serve, which
// returns after Close (called once, by the owner, after the builder's
// last use) and the fold in flight, if any.
type FoldQueue interface {
	Serve()
	Close()
}

// Set once, by Register, from package snapshot's init; read-only after.
var (
	newBuilder   any // func() Builder[S]
	newFoldQueue func() FoldQueue
)

// Register installs the snapshot package's builder and fold queue. It is
// called once, from an init function.
func Register[S any](builder func() Builder[S], queue func() FoldQueue) {
	newBuilder, newFoldQueue = builder, queue
}

// New returns a builder whose last snapshot is empty. S must be the type
// Register was called with (*snapshot.Snapshot); anything else is a
// programming error of this module, and panics.
func New[S any]() Builder[S] {
	f, ok := newBuilder.(func() Builder[S])
	if !ok {
		panic("snapbuild: no builder registered for this snapshot type")
	}
	return f()
}

// NewFoldQueue returns a queue with no fold in flight.
func NewFoldQueue() FoldQueue { return newFoldQueue() }
