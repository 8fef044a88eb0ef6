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
	last   *Snapshot                                  // last committed; immutable
	nodes  *persist.VectorEditor[*framework.NodeInfo] // open editors of the current transaction, nil when untouched
	index  *persist.MapEditor[int32]
	pvc    *persist.MapEditor[struct{}]
	podLog []podChange         // the last snapshot's log, extended in place past its length
	folded map[string]struct{} // scratch for foldPods: keys whose last change is applied
	lists  bool                // SetLists was called in this transaction
	order  []int32
	aff    []int32
	anti   []int32
	err    error
}

// NewBuilder returns a builder whose last snapshot is empty.
func NewBuilder() *Builder { return &Builder{last: &Snapshot{published: true}} }

// foldPods returns the pod trie and log for the next snapshot. Appending to
// the log writes only past the lengths earlier snapshots see; a log over
// podLogFold entries is folded into a new trie and restarted.
func (b *Builder) foldPods() (persist.Map[PodEntry], []podChange) {
	if len(b.podLog) <= podLogFold {
		return b.last.pods, b.podLog
	}
	// Only each key's last change matters: walking the log backwards, a
	// key seen already is skipped, so a pod added and removed within one
	// log (an assume-bind-remove cycle) costs no path copy at all.
	e := b.last.pods.Edit()
	if b.folded == nil {
		b.folded = make(map[string]struct{}, 2*podLogFold)
	}
	for i := len(b.podLog) - 1; i >= 0; i-- {
		c := &b.podLog[i]
		if _, later := b.folded[c.key]; later {
			continue
		}
		b.folded[c.key] = struct{}{}
		if c.gone {
			e.Delete(c.key)
		} else {
			e.Set(c.key, c.e)
		}
	}
	clear(b.folded)
	return e.Done(), make([]podChange, 0, 2*podLogFold)
}

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

// podLogFold is how many pod changes a snapshot's log may hold before the
// builder folds them into the pod trie with one transient edit, so that one
// path copy serves many changes.
const podLogFold = 256

// SetPod records the entry of pod key; DeletePod removes it.
func (b *Builder) SetPod(key string, e PodEntry) {
	b.podLog = append(b.podLog, podChange{key: key, e: e})
}

// DeletePod removes pod key.
func (b *Builder) DeletePod(key string) {
	b.podLog = append(b.podLog, podChange{key: key, gone: true})
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

// Lists returns the node list, the two affinity lists and the list error as
// of this transaction (read-only; SetLists replaces them).
func (b *Builder) Lists() (order, aff, anti []int32, err error) {
	if b.lists {
		return b.order, b.aff, b.anti, b.err
	}
	return b.last.order, b.last.aff, b.last.anti, b.last.err
}

// Commit ends the transaction and returns the new snapshot, which becomes
// Last. nodeCount is the number of node entries (ghosts included), podCount
// the number of pods.
func (b *Builder) Commit(epoch uint64, nodeCount, podCount int) *Snapshot {
	s := *b.last
	s.epoch = epoch
	s.nodeCount = nodeCount
	s.podCount = podCount
	s.pods, s.podLog = b.foldPods()
	b.podLog = s.podLog
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
	if b.lists {
		s.order, s.aff, s.anti, s.err = b.order, b.aff, b.anti, b.err
		b.lists = false
		b.order, b.aff, b.anti, b.err = nil, nil, nil, nil
	}
	b.last = &s
	return b.last
}
