// Package snapshot holds the immutable, consistent views of the cache that
// the coordinator publishes through an atomic.Pointer.
//
// A Snapshot is a value built once and never changed: node entries live in a
// persistent vector indexed by slot, names map to slots through a persistent
// hash trie, and pods through another. Publishing after a change path-copies
// only what changed, so old snapshots stay valid and cheap to keep.
package snapshot

import (
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/internal/nodelists"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/nodetree"
)

var (
	// ErrNodeInfoNotFound is returned by Get for a name that has no node
	// object in the snapshot (as upstream's lister).
	ErrNodeInfoNotFound = errors.New("schedcache: nodeinfo not found")
	// ErrInconsistentList means the node list did not have as many entries
	// as the zone tree has nodes (upstream UpdateSnapshot reports the same).
	ErrInconsistentList = nodelists.ErrInconsistentList
	// ErrPublished is returned by operations that would change a snapshot
	// obtained from Cache.Snapshot; published snapshots are read-only.
	ErrPublished = errors.New("schedcache: published snapshots are read-only")
)

// NotFoundError is the error Get returns; it wraps ErrNodeInfoNotFound.
type NotFoundError struct{ Name string }

func (e *NotFoundError) Error() string {
	return fmt.Sprintf("nodeinfo not found for node name %q", e.Name)
}
func (e *NotFoundError) Unwrap() error { return ErrNodeInfoNotFound }

// InconsistentListError describes a node list whose length differs from the
// zone tree's node count. It wraps ErrInconsistentList.
type InconsistentListError = nodelists.InconsistentListError

// PodEntry is what a snapshot records of a pod: the stored object and
// whether it is assumed.
type PodEntry struct {
	Pod     *v1.Pod
	Assumed bool
}

// Snapshot is a consistent, immutable view of the cache: it reflects exactly
// a prefix of the coordinator's operation order (up to Epoch).
//
// Contract: a Snapshot obtained from Cache.Snapshot is never modified by
// anyone and may be read by any number of goroutines for as long as they
// like; no method blocks or allocates except where it says it copies. A
// Snapshot made with NewEmptySnapshot is owned by its creator, who may
// refresh it with Cache.UpdateSnapshot (not concurrently with its readers,
// exactly as upstream).
type Snapshot struct {
	epoch     uint64
	nodes     immutable.Vector[*nodeinfo.NodeInfo] // by slot; nil for nodeless or free slots
	index     immutable.Map[int32]                 // name -> slot, entries with a node object
	order     []int32                              // slots in zone-tree order; shared, never written (here, not in ls: every At reads it)
	ls        *nodeLists                           // the affinity lists, list error and tree count; nil: none (lists); immutable, shared by the snapshots with these lists
	pvc       immutable.Map[struct{}]              // used PVC keys "namespace/name"
	aux       *aux                                 // rarely changing extras (pvcref.go); nil: none. One pointer keeps the snapshot in its size class
	pods      immutable.Map[PodEntry]              // pod key (UID) -> entry, up to the changes in podLog
	podLog    []podChange                          // pod changes after pods, oldest first; a prefix of a log shared with later snapshots, never written below its length
	podSum    []uint64                             // podHash of each podLog key; shared and written like podLog
	podCount  int32                                // pods held (assumed included); 32 bits, like nodeCount, to keep the snapshot small
	nodeCount int32                                // NodeInfo entries, ghosts and nodeless included
	images    *nodeinfo.ImageTable                 // the image registry at this epoch; entries show their node's counts as of its last change
	published bool                                 // true for snapshots handed out by the cache, and for a fork's (fork.go)
	over      immutable.Map[podOver]               // a fork's pod changes over pods and podLog (fork.go); empty in the cache's snapshots
	li        *listIndex                           // order's slot -> position table, built on first use (forks); shared by the snapshots with this order; nil in snapshots a caller owns
	pc        *pvcIndex                            // used-PVC counts, built on first use (forks); one per published snapshot; nil in others
	logIx     *podLogIndex                         // index of podLog, built on demand (forks); shared by the snapshots with this pods+podLog (a fork's keep their base's); nil in snapshots a caller owns
	ll        *longLived                           // nil unless refreshed by UpdateFrom; owned with the snapshot
}

// nodeLists is the part of a snapshot that changes only when its
// affinity lists, its list error or its zone tree's count do: apart, so
// that a snapshot that changes none of them (most: a pod event changes
// one node) copies one pointer, not 112 bytes, and its allocation fits a
// smaller size class. The node list itself stays in the snapshot: At and
// NumNodes read it on every call, which spares them a dependent load.
// Immutable: a nodeLists is never written once a snapshot holds it; a
// change makes a new one. Shared by every snapshot with these lists.
type nodeLists struct {
	aff       immutable.Seq[int32] // order filtered to nodes with affinity pods, by list position
	anti      immutable.Seq[int32] // order filtered to nodes with required anti-affinity pods, by list position
	nonHost   immutable.Seq[int32] // order filtered to nodes with required non-host-scoped anti-affinity pods, by list position
	err       error                // list/tree inconsistency, reported by UpdateSnapshot
	treeNodes int                  // nodes in the zone tree
	treeNames []string             // the tree's list by name when it names nodes order lacks (a name without a node entry); nil otherwise; shared, never written
}

// noLists is the lists of a snapshot without any (s.ls nil: the zero
// Snapshot, NewEmptySnapshot); immutable.
var noLists nodeLists

// lists returns s's node lists (read-only).
func (s *Snapshot) lists() *nodeLists {
	if s.ls == nil {
		return &noLists
	}
	return s.ls
}

// listIndex maps a node list's slots to their positions in it. It is built
// once, on first use (listPos), and then immutable; the snapshots that
// share a list (order) share it.
type listIndex struct {
	once     sync.Once
	pos      []int32 // slot -> position in the list, -1 if not listed; written once, in once
	dup      bool    // the list holds a slot twice (a name the zone tree lists in two zones); written once, in once
	treeOnce sync.Once
	tree     *nodetree.Overlay // an overlay without changes of the zone tree the list was listed from; written once, in treeOnce, then only read (shared by forks' levels: immutable)
	treeErr  error             // ErrForkListInconsistent if the list cannot be a tree's; written once, in treeOnce
}

// listPos returns the slot -> list position table of s's list (the last
// position of a slot listed twice) and whether a slot is listed twice,
// building them (O(n)) on the first call for that list; nil if s has no
// table.
func (s *Snapshot) listPos() ([]int32, bool) {
	li := s.li
	if li == nil {
		return nil, false
	}
	li.once.Do(func() { li.pos, li.dup = positions(s.order) })
	return li.pos, li.dup
}

// listTree returns the zone tree s's list was listed from, as an overlay
// without changes (immutable, shared by every fork of the list), rebuilt
// on the first call for that list (O(n)): the list is the tree's
// round-robin interleave of its zones, so adding the listed nodes in list
// order gives back the zones in their order and each zone's names in
// theirs. A list no tree gives (an *InconsistentListError, names without
// entries, a name listed twice) returns ErrForkListInconsistent.
func (s *Snapshot) listTree() (*nodetree.Overlay, error) {
	li := s.li
	if li == nil {
		li = new(listIndex)
	}
	li.treeOnce.Do(func() {
		if s.lists().err != nil || s.lists().treeNames != nil || s.lists().treeNodes != len(s.order) {
			li.treeErr = ErrForkListInconsistent
			return
		}
		t := nodetree.New()
		for _, slot := range s.order {
			t.AddID(s.nodes.Get(int(slot)).Node(), slot)
		}
		ids, _ := t.AppendIDs(make([]int32, 0, len(s.order)))
		if !slices.Equal(ids, s.order) {
			li.treeErr = ErrForkListInconsistent
			return
		}
		li.tree = nodetree.NewOverlay(t) // t is never changed again
	})
	return li.tree, li.treeErr
}

// pvcIndex holds the snapshot's PVC reference counts (claim -> references
// by pods, upstream v1.37's usedPVCRefCounts), built once, on first use
// (pvcCounts), or set by Fork from a refreshed snapshot's counts.
type pvcIndex struct {
	once   sync.Once
	counts immutable.Map[int32] // written once, in once
}

// pvcCounts returns the snapshot's PVC reference counts: a refreshed
// snapshot's own (they may carry upstream's pending delta), else the sum
// over the listed nodes (sumListed), built (O(listed nodes x their claims))
// on the first call for a published snapshot, on every call for others.
func (s *Snapshot) pvcCounts() immutable.Map[int32] {
	if s.ll != nil && s.ll.pvc != nil {
		return s.ll.pvc.counts
	}
	build := func() immutable.Map[int32] {
		return sumDistinct(s.order, func(slot int32) *nodeinfo.NodeInfo { return s.nodes.Get(int(slot)) })
	}
	pc := s.pc
	if pc == nil {
		return build()
	}
	pc.once.Do(func() { pc.counts = build() })
	return pc.counts
}

// podLogIndex maps each key of a snapshot's pod log to the position of
// its newest change there: a pure function of the snapshot's (immutable)
// podLog, so any number of readers may share it. It is built at most once
// (sync.Once), on demand: by a fork that has looked up more than
// podLogScans keys of its base (a fork looks up every pod it changes), and
// is immutable after. Until it is built, lookups scan the log.
type podLogIndex struct {
	once  sync.Once
	ready atomic.Bool      // idx is built; set once, in once, after idx
	idx   map[string]int32 // key -> newest position in podLog; built once on first use (sync.Once); immutable after
}

// podLogScans is how many linear scans of a base's pod log a fork makes
// before it builds the base's podLogIndex: a scan costs about a nanosecond
// per log entry, a build some tens, so the build pays for itself after a
// few dozen lookups.
const podLogScans = 32

// podLogIndexMin is the shortest pod log worth indexing.
const podLogIndexMin = 64

// indexPodLog builds s's podLogIndex if s has one and it is not built
// (O(len(podLog)) once per snapshot, shared by every reader).
func (s *Snapshot) indexPodLog() {
	ix := s.logIx
	if ix == nil || len(s.podLog) < podLogIndexMin {
		return
	}
	ix.once.Do(func() {
		m := make(map[string]int32, len(s.podLog))
		for i := range s.podLog {
			m[s.podLog[i].key] = int32(i)
		}
		ix.idx = m
		ix.ready.Store(true)
	})
}

// positions returns slot -> position in order (-1 for slots not in it;
// the last position of a slot listed twice) and whether a slot is listed
// twice.
func positions(order []int32) ([]int32, bool) {
	n := int32(0)
	for _, sl := range order {
		n = max(n, sl+1)
	}
	pos := make([]int32, n)
	for i := range pos {
		pos[i] = -1
	}
	dup := false
	for i, sl := range order {
		dup = dup || pos[sl] >= 0
		pos[sl] = int32(i)
	}
	return pos, dup
}

// NewEmptySnapshot returns an empty snapshot owned by the caller.
func NewEmptySnapshot() *Snapshot { return &Snapshot{} }

// Epoch returns the sequence number of the last operation this snapshot
// includes. Later snapshots have larger or equal epochs.
func (s *Snapshot) Epoch() uint64 { return s.epoch }

// Err reports the node-list inconsistency upstream's UpdateSnapshot would
// have returned for this state, or nil.
func (s *Snapshot) Err() error { return s.lists().err }

// CopyFrom makes s an independent copy of src in O(1) (structure is shared,
// nothing is mutable). It fails with ErrPublished if s is a published snapshot.
func (s *Snapshot) CopyFrom(src *Snapshot) error {
	if s.published {
		return ErrPublished
	}
	*s = *src
	s.published = false
	s.ll = src.ll.clone()
	s.li, s.pc, s.logIx = nil, nil, nil
	return nil
}

// NodeInfos returns s; it exists for upstream's SharedLister shape.
func (s *Snapshot) NodeInfos() *Snapshot { return s }

// StorageInfos returns s; it exists for upstream's SharedLister shape.
func (s *Snapshot) StorageInfos() *Snapshot { return s }

// NumNodes returns the length of the node list.
func (s *Snapshot) NumNodes() int { return len(s.order) }

// At returns the i-th node of the list (zone-tree order), or nil when i is
// out of range. It does not allocate.
func (s *Snapshot) At(i int) *nodeinfo.NodeInfo {
	if i < 0 || i >= len(s.order) {
		return nil
	}
	return s.nodes.Get(int(s.order[i]))
}

// Range calls fn for each node of the list in order until fn returns false.
func (s *Snapshot) Range(fn func(i int, n *nodeinfo.NodeInfo) bool) {
	for i, slot := range s.order {
		if !fn(i, s.nodes.Get(int(slot))) {
			return
		}
	}
}

func (s *Snapshot) resolve(slots []int32) []*nodeinfo.NodeInfo {
	if slots == nil {
		return nil
	}
	out := make([]*nodeinfo.NodeInfo, len(slots))
	for i, slot := range slots {
		out[i] = s.nodes.Get(int(slot))
	}
	return out
}

// resolveSeq is resolve for an affinity list: nil for an empty one, as
// upstream's list of a snapshot that never had such a node.
func (s *Snapshot) resolveSeq(slots immutable.Seq[int32]) []*nodeinfo.NodeInfo {
	if slots.Len() == 0 {
		return nil
	}
	out := make([]*nodeinfo.NodeInfo, 0, slots.Len())
	slots.All(func(slot int32) bool {
		out = append(out, s.nodes.Get(int(slot)))
		return true
	})
	return out
}

// List returns a new slice of the nodes in zone-tree order. It costs
// O(nodes); use At or Range to read without copying. The error is nil.
func (s *Snapshot) List() ([]*nodeinfo.NodeInfo, error) { return s.resolve(s.order), nil }

// HavePodsWithAffinityList returns a new slice of the nodes, in list order,
// that hold at least one pod with pod affinity or anti-affinity.
func (s *Snapshot) HavePodsWithAffinityList() ([]*nodeinfo.NodeInfo, error) {
	return s.resolveSeq(s.lists().aff), nil
}

// HavePodsWithRequiredAntiAffinityList returns a new slice of the nodes, in
// list order, that hold at least one pod with required anti-affinity.
func (s *Snapshot) HavePodsWithRequiredAntiAffinityList() ([]*nodeinfo.NodeInfo, error) {
	return s.resolveSeq(s.lists().anti), nil
}

// NumNodesWithAffinity returns the length of HavePodsWithAffinityList
// without copying it.
func (s *Snapshot) NumNodesWithAffinity() int { return s.lists().aff.Len() }

// NumNodesWithRequiredAntiAffinity returns the length of
// HavePodsWithRequiredAntiAffinityList without copying it.
func (s *Snapshot) NumNodesWithRequiredAntiAffinity() int { return s.lists().anti.Len() }

// HavePodsWithRequiredNonHostScopedAntiAffinityList returns a new slice of
// the nodes, in list order, that hold at least one pod with a required
// anti-affinity term whose topology key is not kubernetes.io/hostname
// (upstream v1.37's list of the same name). Upstream fills it only while
// its alpha feature gate InterPodAffinityHostnameFastPath is on; this
// module has no feature gates and always keeps it, as it keeps the
// per-node sub-list (nodeinfo.PodHasRequiredNonHostScopedAntiAffinity): an
// adapter with the gate off shows it empty.
func (s *Snapshot) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]*nodeinfo.NodeInfo, error) {
	return s.resolveSeq(s.lists().nonHost), nil
}

// NumNodesWithRequiredNonHostScopedAntiAffinity returns the length of
// HavePodsWithRequiredNonHostScopedAntiAffinityList without copying it.
func (s *Snapshot) NumNodesWithRequiredNonHostScopedAntiAffinity() int {
	return s.lists().nonHost.Len()
}

// Get returns the node named name if it has a node object, else a
// *NotFoundError.
func (s *Snapshot) Get(name string) (*nodeinfo.NodeInfo, error) {
	if slot, ok := s.index.Get(name); ok {
		if ni := s.nodes.Get(int(slot)); ni != nil {
			return ni, nil
		}
	}
	return nil, &NotFoundError{Name: name}
}

// IsPVCUsedByPods reports whether a pod on a listed node uses the claim key
// ("namespace/name").
func (s *Snapshot) IsPVCUsedByPods(key string) bool {
	_, ok := s.usedPVCs().Get(key)
	return ok
}

// NumUsedPVCs returns the size of the used-PVC set.
func (s *Snapshot) NumUsedPVCs() int { return s.usedPVCs().Len() }

// RangeUsedPVCs calls fn for each used PVC key until fn returns false.
func (s *Snapshot) RangeUsedPVCs(fn func(key string) bool) {
	s.usedPVCs().Range(func(k string, _ struct{}) bool { return fn(k) })
}

// usedPVCs is the used-PVC set: the claims counted above 0.
func (s *Snapshot) usedPVCs() immutable.Map[struct{}] {
	return s.pvc
}

// podChange is one entry of the pod log: key's entry from then on, or its
// removal.
type podChange struct {
	key  string
	e    PodEntry
	gone bool
}

// podSeed seeds podHash.
var podSeed = maphash.MakeSeed()

// podHash is the hash of a pod key in the pod log.
func podHash(key string) uint64 { return maphash.String(podSeed, key) }

// Pod returns the entry for pod key (the UID).
func (s *Snapshot) Pod(key string) (PodEntry, bool) {
	if s.over.Len() > 0 {
		if o, ok := s.over.Get(key); ok {
			return o.e, !o.gone
		}
	}
	return s.podUnder(key)
}

// podUnder is Pod without a fork's changes: the pod log (through its
// index if built), then the trie.
func (s *Snapshot) podUnder(key string) (PodEntry, bool) {
	if ix := s.logIx; ix != nil && ix.ready.Load() {
		if i, ok := ix.idx[key]; ok {
			c := &s.podLog[i]
			return c.e, !c.gone
		}
		return s.pods.Get(key)
	}
	if len(s.podSum) > 0 {
		h := podHash(key)
		for i := len(s.podSum) - 1; i >= 0; i-- {
			if s.podSum[i] == h {
				if c := &s.podLog[i]; c.key == key {
					return c.e, !c.gone
				}
			}
		}
	}
	return s.pods.Get(key)
}

// PodCount returns the number of pods the cache held (assumed included).
func (s *Snapshot) PodCount() int { return int(s.podCount) }

// RangePods calls fn for each pod until fn returns false, in no set order.
func (s *Snapshot) RangePods(fn func(key string, e PodEntry) bool) {
	var seen map[string]struct{}
	if n := len(s.podLog) + s.over.Len(); n > 0 {
		seen = make(map[string]struct{}, n)
	}
	stopped := false
	s.over.Range(func(k string, o podOver) bool {
		seen[k] = struct{}{}
		if !o.gone && !fn(k, o.e) {
			stopped = true
		}
		return !stopped
	})
	if stopped {
		return
	}
	for i := len(s.podLog) - 1; i >= 0; i-- {
		c := &s.podLog[i]
		if _, ok := seen[c.key]; ok {
			continue
		}
		seen[c.key] = struct{}{}
		if !c.gone && !fn(c.key, c.e) {
			return
		}
	}
	s.pods.Range(func(k string, e PodEntry) bool {
		if _, ok := seen[k]; ok {
			return true
		}
		return fn(k, e)
	})
}

// NodeCount returns the number of node entries the cache held, ghosts and
// nodeless entries included (upstream's Cache.NodeCount).
func (s *Snapshot) NodeCount() int { return int(s.nodeCount) }

// affinityFlags reports whether the entry at slot holds pods with
// affinity, pods with required anti-affinity and pods with required
// non-host-scoped anti-affinity (nodelists.Affinity's flags).
func (s *Snapshot) affinityFlags(slot int32) (aff, anti, nonHost bool) {
	return listFlags(s.nodes.Get(int(slot)))
}

// listFlags reports whether ni's affinity sub-lists are non-empty: which
// of the snapshot's three affinity lists it belongs in.
func listFlags(ni *nodeinfo.NodeInfo) (aff, anti, nonHost bool) {
	return ni.NumPodsWithAffinity() > 0, ni.NumPodsWithRequiredAntiAffinity() > 0, ni.NumPodsWithRequiredNonHostScopedAntiAffinity() > 0
}
