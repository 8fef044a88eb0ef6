package snapshot

import (
	"github.com/schedcache/schedcache/framework"
	"github.com/schedcache/schedcache/internal/persist"
)

// Builder assembles the next snapshot from the last committed one by
// path-copying what changed. Contract: owned by one goroutine (the
// coordinator); not safe for concurrent use; never blocks. Snapshots it
// committed are immutable and safe for any number of readers.
type Builder struct {
	last  *Snapshot                                  // last committed; immutable
	nodes *persist.VectorEditor[*framework.NodeInfo] // open editors of the current transaction, nil when untouched
	index *persist.MapEditor[int32]
	pvc   *persist.MapEditor[struct{}]
	pods  *persist.MapEditor[PodEntry]
	lists bool // SetLists was called in this transaction
	order []int32
	aff   []int32
	anti  []int32
	err   error
}

// NewBuilder returns a builder whose last snapshot is empty.
func NewBuilder() *Builder { return &Builder{last: &Snapshot{published: true}} }

// Last returns the last committed snapshot.
func (b *Builder) Last() *Snapshot { return b.last }

// SetNode records the frozen entry for slot (nil clears it).
func (b *Builder) SetNode(slot int32, ni *framework.NodeInfo) {
	if b.nodes == nil {
		b.nodes = b.last.nodes.Edit()
	}
	if ni == nil && int(slot) >= b.nodes.Len() {
		return
	}
	b.nodes.Set(int(slot), ni)
}

// Node returns the entry at slot as of this transaction.
func (b *Builder) Node(slot int32) *framework.NodeInfo {
	if b.nodes != nil {
		return b.nodes.Get(int(slot))
	}
	return b.last.nodes.Get(int(slot))
}

// SetIndex maps name to slot; DeleteIndex removes name.
func (b *Builder) SetIndex(name string, slot int32) {
	if b.index == nil {
		b.index = b.last.index.Edit()
	}
	b.index.Set(name, slot)
}

// DeleteIndex removes name from the name index.
func (b *Builder) DeleteIndex(name string) {
	if b.index == nil {
		b.index = b.last.index.Edit()
	}
	b.index.Delete(name)
}

// SetPod records the entry of pod key; DeletePod removes it.
func (b *Builder) SetPod(key string, e PodEntry) {
	if b.pods == nil {
		b.pods = b.last.pods.Edit()
	}
	b.pods.Set(key, e)
}

// DeletePod removes pod key.
func (b *Builder) DeletePod(key string) {
	if b.pods == nil {
		b.pods = b.last.pods.Edit()
	}
	b.pods.Delete(key)
}

// SetPVC adds (used=true) or removes a key of the used-PVC set.
func (b *Builder) SetPVC(key string, used bool) {
	if b.pvc == nil {
		b.pvc = b.last.pvc.Edit()
	}
	if used {
		b.pvc.Set(key, struct{}{})
	} else {
		b.pvc.Delete(key)
	}
}

// SetLists replaces the node list and the two affinity lists. The slices
// are handed over: the caller must never write to them again.
func (b *Builder) SetLists(order, aff, anti []int32, err error) {
	b.lists = true
	b.order, b.aff, b.anti, b.err = order, aff, anti, err
}

// Order returns the node list as of this transaction (read-only).
func (b *Builder) Order() []int32 {
	if b.lists {
		return b.order
	}
	return b.last.order
}

// Commit ends the transaction and returns the new snapshot, which becomes
// Last. nodeCount is the number of node entries (ghosts included).
func (b *Builder) Commit(epoch uint64, nodeCount int) *Snapshot {
	s := *b.last
	s.epoch = epoch
	s.nodeCount = nodeCount
	s.published = true
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
	if b.pods != nil {
		s.pods = b.pods.Done()
		b.pods = nil
	}
	if b.lists {
		s.order, s.aff, s.anti, s.err = b.order, b.aff, b.anti, b.err
		b.lists = false
		b.order, b.aff, b.anti, b.err = nil, nil, nil, nil
	}
	b.last = &s
	return b.last
}
