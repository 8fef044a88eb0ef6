package snapshot

import (
	"runtime"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/internal/snapbuild"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/podgroup"
)

// builder is the snapbuild.Builder of *Snapshot: it assembles the next
// snapshot from the last committed one by path-copying what changed.
// Contract: owned by one goroutine (the coordinator); not safe for
// concurrent use; blocks only where FoldPods says. Snapshots it committed
// are immutable and safe for any number of readers.
type builder struct {
	last  *Snapshot                                   // last committed; immutable
	nodes *immutable.VectorEditor[*nodeinfo.NodeInfo] // open editors of the current transaction, nil when untouched
	index *immutable.MapEditor[int32]
	pvc   *immutable.MapEditor[struct{}]
	cum   *immutable.MapEditor[int64]
	eds   struct { // the editors' memory, reused by every transaction
		nodes immutable.VectorEditor[*nodeinfo.NodeInfo]
		index immutable.MapEditor[int32]
		pvc   immutable.MapEditor[struct{}]
		cum   immutable.MapEditor[int64]
	}
	pods      immutable.Map[PodEntry] // the pod trie of the transaction: the last snapshot's, or the fold of its log
	podLog    []podChange             // pod changes after pods: the last snapshot's log extended in place past its length, or a new log after a fold
	podSum    []uint64                // podHash of each podLog key, kept alongside podLog
	foldq     *foldQueue              // nil: folds run in FoldPods
	foldLen   int                     // > 0: a fold of podLog[:foldLen] onto pods is in flight
	foldStale bool                    // a fold is in flight whose log was folded by foldHere since: its result is dropped
	lists     bool                    // SetLists was called in this transaction
	order     []int32
	aff       immutable.Seq[int32]
	anti      immutable.Seq[int32]
	nonHost   immutable.Seq[int32]
	err       error
	images    *nodeinfo.ImageTable
	groups    podgroup.Table // SetGroups' table, valid when groupsSet
	groupsSet bool
	tree      bool // SetTree was called in this transaction
	treeN     int
	treeNms   []string
}

func init() {
	snapbuild.Register(
		func() snapbuild.Builder[*Snapshot] { return newBuilder() },
		func() snapbuild.FoldQueue { return newFoldQueue() })
}

// newBuilder returns a builder whose last snapshot is empty.
func newBuilder() *builder { return &builder{last: &Snapshot{published: true}} }

// Last returns the last committed snapshot.
func (b *builder) Last() *Snapshot { return b.last }

// SetNode records the frozen entry for slot (nil clears it).
func (b *builder) SetNode(slot int32, ni *nodeinfo.NodeInfo) {
	if b.nodes == nil {
		b.last.nodes.EditInto(&b.eds.nodes)
		b.nodes = &b.eds.nodes
	}
	if ni == nil && int(slot) >= b.nodes.Len() {
		return
	}
	b.nodes.Set(int(slot), ni)
}

// PrefetchNodes reads, without changing anything, what SetNode of each of
// slots will copy (the vector leaves that hold them), with the misses in
// flight together, so that the SetNodes that follow find them in cache.
// The coordinator calls it while the shards freeze the epoch's entries.
func (b *builder) PrefetchNodes(slots []int32) {
	var sink uintptr
	for _, slot := range slots {
		if b.nodes != nil {
			sink += b.nodes.PrefetchLeaf(int(slot))
		} else {
			sink += b.last.nodes.PrefetchLeaf(int(slot))
		}
	}
	runtime.KeepAlive(sink) // keeps the loads
}

// SetIndex maps name to slot; DeleteIndex removes name.
func (b *builder) SetIndex(name string, slot int32) {
	b.openIndex()
	b.index.Set(name, slot)
}

// openIndex opens the name-index editor of the transaction, if it is not.
func (b *builder) openIndex() {
	if b.index == nil {
		b.last.index.EditInto(&b.eds.index)
		b.index = &b.eds.index
	}
}

// DeleteIndex removes name from the name index.
func (b *builder) DeleteIndex(name string) {
	b.openIndex()
	b.index.Delete(name)
}

// podLogFold is how many pod changes the log may hold before the builder
// folds them into the pod trie with one transient edit, so that one path
// copy serves many changes (the larger the fold, the more changes share the
// upper nodes of the trie). A lookup scans the log's hashes, a dense
// []uint64, before it walks the trie. podLogCap is a new log's capacity;
// podLogMax is the length at which the builder stops waiting for its fold
// in flight and folds the log itself (FoldPods).
const (
	podLogFold = 1024
	podLogCap  = 2 * podLogFold
	podLogMax  = 8 * podLogFold
)

// SetPod records the entry of pod key; DeletePod removes it.
func (b *builder) SetPod(key string, pod *v1.Pod, assumed bool) {
	b.podLog = append(b.podLog, podChange{key: key, e: PodEntry{Pod: pod, Assumed: assumed}})
	b.podSum = append(b.podSum, podHash(key))
}

// DeletePod removes pod key.
func (b *builder) DeletePod(key string) {
	b.podLog = append(b.podLog, podChange{key: key, gone: true})
	b.podSum = append(b.podSum, podHash(key))
}

// SetGroups sets the pod-group table of the transaction.
func (b *builder) SetGroups(t podgroup.Table) { b.groups, b.groupsSet = t, true }

// SetPVCCum sets claim key's cumulative reference change; 0 removes it.
func (b *builder) SetPVCCum(key string, v int64) {
	if b.cum == nil {
		cumOf(b.last).EditInto(&b.eds.cum)
		b.cum = &b.eds.cum
	}
	if v != 0 {
		b.cum.Set(key, v)
	} else {
		b.cum.Delete(key)
	}
}

// SetPVC adds (used=true) or removes a key of the used-PVC set.
func (b *builder) SetPVC(key string, used bool) {
	if b.pvc == nil {
		b.last.pvc.EditInto(&b.eds.pvc)
		b.pvc = &b.eds.pvc
	}
	if used {
		b.pvc.Set(key, struct{}{})
	} else {
		b.pvc.Delete(key)
	}
}

// SetLists replaces the node list and the three affinity lists. The order
// slice is handed over: the caller must never write to it again.
func (b *builder) SetLists(order []int32, aff, anti, nonHost immutable.Seq[int32], err error) {
	b.lists = true
	b.order, b.aff, b.anti, b.nonHost, b.err = order, aff, anti, nonHost, err
}

// SetImages records the image registry version of this transaction.
func (b *builder) SetImages(t *nodeinfo.ImageTable) { b.images = t }

// SetTree records the zone tree's node count and, when the tree lists
// names the node list skips, the tree's list by name (immutable once set).
func (b *builder) SetTree(numNodes int, names []string) {
	b.tree, b.treeN, b.treeNms = true, numNodes, names
}

// Lists returns the node list, the three affinity lists and the list error
// as of this transaction (read-only; SetLists replaces them).
func (b *builder) Lists() (order []int32, aff, anti, nonHost immutable.Seq[int32], err error) {
	if b.lists {
		return b.order, b.aff, b.anti, b.nonHost, b.err
	}
	l := b.last.lists()
	return b.last.order, l.aff, l.anti, l.nonHost, l.err
}

// Commit ends the transaction and returns the new snapshot, which becomes
// Last. nodeCount is the number of node entries (ghosts included), podCount
// the number of pods.
func (b *builder) Commit(epoch uint64, nodeCount, podCount int) *Snapshot {
	// The snapshot and its two lazily built indexes in one allocation.
	p := &struct {
		s  Snapshot
		pc pvcIndex
		lx podLogIndex
	}{s: *b.last}
	s := &p.s
	s.epoch = epoch
	s.nodeCount = int32(nodeCount) // a cache holds fewer than 2^31 of each
	s.podCount = int32(podCount)
	if b.foldq == nil {
		b.FoldPods()
	}
	s.pods, s.podLog, s.podSum = b.pods, b.podLog, b.podSum
	s.published = true
	s.pc, s.logIx = &p.pc, &p.lx // built by the first fork that needs them
	if b.nodes != nil {
		s.nodes = b.nodes.Done()
		b.nodes = nil
	}
	if b.index != nil {
		s.index = b.index.Done()
		b.index = nil
	}
	if b.pvc != nil {
		s.pvc = b.pvc.Done()
		b.pvc = nil
	}
	if b.cum != nil {
		a := auxOf(b.last)
		a.pvcCum = b.cum.Done()
		s.aux = &a
		b.cum = nil
	}
	if b.groupsSet {
		a := auxOf(s)
		a.groups = b.groups
		s.aux = &a
		b.groups, b.groupsSet = podgroup.Table{}, false
	}
	s.images = b.images
	if b.tree || b.lists {
		ls := *s.lists() // the last snapshot's, never written: a change gets a new one
		if b.tree {
			ls.treeNodes, ls.treeNames = b.treeN, b.treeNms
			b.tree, b.treeNms = false, nil
		}
		if b.lists {
			s.order, ls.aff, ls.anti, ls.nonHost, ls.err = b.order, b.aff, b.anti, b.nonHost, b.err
			s.li = new(listIndex) // built by the first fork that needs it
			b.lists = false
			b.order, b.aff, b.anti, b.nonHost, b.err = nil, immutable.Seq[int32]{}, immutable.Seq[int32]{}, immutable.Seq[int32]{}, nil
		}
		s.ls = &ls
	}
	b.last = s
	return s
}
