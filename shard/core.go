// Package shard owns per-node state. Every node entry lives in exactly one
// shard; a shard's state is touched only by the goroutine that owns it.
//
// Core is the deterministic, single-threaded state machine (tested directly);
// Shard is the goroutine around it, reached only over channels.
package shard

import (
	"fmt"
	"runtime"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/nodeinfo"
)

// Kind names a mutation of one node entry.
type Kind uint8

const (
	// Create makes a new, empty, nodeless entry at Slot.
	Create Kind = iota + 1
	// Delete drops the entry at Slot.
	Delete
	// AddPod aggregates Pod into the entry.
	AddPod
	// RemovePod removes the pod with Key; Affinity, AntiAffinity and
	// NonHostAnti say whether the affinity sub-lists are searched
	// (upstream uses the pod object passed to the removal for that
	// decision).
	RemovePod
	// SetNode stores Node and recomputes Allocatable.
	SetNode
	// ClearNode drops the node object (RemoveNode); pods stay.
	ClearNode
	// SetImages replaces the entry's image view with Images.
	SetImages
)

func (k Kind) String() string {
	switch k {
	case Create:
		return "Create"
	case Delete:
		return "Delete"
	case AddPod:
		return "AddPod"
	case RemovePod:
		return "RemovePod"
	case SetNode:
		return "SetNode"
	case ClearNode:
		return "ClearNode"
	case SetImages:
		return "SetImages"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Mutation is one change to one node entry, sent by the coordinator. It is
// a plain value; the objects it points to are immutable.
type Mutation struct {
	Kind         Kind
	Slot         int32
	Pod          *nodeinfo.PodInfo   // AddPod; RemovePod: the stored PodInfo, if known (found by pointer)
	Key          string              // RemovePod
	Affinity     bool                // RemovePod
	AntiAffinity bool                // RemovePod
	NonHostAnti  bool                // RemovePod: the required non-host-scoped anti-affinity sub-list
	Node         *v1.Node            // SetNode
	Images       *nodeinfo.ImageView // SetImages; immutable once sent
}

// Frozen is a published copy of one entry: Info is nil when the entry was
// deleted or has no node object (such entries never reach snapshots).
type Frozen struct {
	Slot int32
	Info *nodeinfo.NodeInfo
}

// InvariantError reports a mutation that contradicts the entry's state: the
// coordinator predicted every outcome, so this means the cache is corrupted.
type InvariantError struct {
	Mutation Kind
	Slot     int32
	Err      error
}

func (e *InvariantError) Error() string {
	return fmt.Sprintf("shard: %s on slot %d: %v", e.Mutation, e.Slot, e.Err)
}

func (e *InvariantError) Unwrap() error { return e.Err }

// Core is the state of one shard. Contract: not safe for concurrent use; it
// is owned by one goroutine (the Shard's, or a test's). Apply never blocks.
//
// Entries are indexed by slot in a slice: the coordinator hands out slots
// densely (freed slots are reused), so a slot finds its entry without
// hashing, and the slice's length is the largest slot in use plus one
// (shared by all shards: a shard's slice has holes where other shards'
// slots are).
type Core struct {
	slots   []slotEntry  // slot -> entry; owned by the shard goroutine
	n       int          // entries held (non-nil states in slots); owned by the shard goroutine
	dirty   []int32      // slots changed since the last Flush, first change first; owned by the shard goroutine
	nextGen func() int64 // the cache's generation source (atomic; shared)
	frozen  []Frozen     // reused Flush result; valid until the next Flush
}

// slotEntry is one slot of a shard: its state (nil when the shard holds no
// entry there) and whether it is in Core.dirty.
type slotEntry struct {
	state *nodeinfo.NodeState
	dirty bool
}

// NewCore returns an empty shard core drawing generations from nextGen.
func NewCore(nextGen func() int64) *Core {
	return &Core{nextGen: nextGen}
}

// Len returns the number of entries the shard holds.
func (c *Core) Len() int { return c.n }

// state returns the entry at slot, or nil.
func (c *Core) state(slot int32) *nodeinfo.NodeState {
	if slot < 0 || int(slot) >= len(c.slots) {
		return nil
	}
	return c.slots[slot].state
}

// Apply applies muts in order. It stops at the first mutation that
// contradicts the state and returns an *InvariantError; the mutations before
// it stay applied.
func (c *Core) Apply(muts []Mutation) error {
	for start := 0; start < len(muts); start += prefetchChunk {
		chunk := muts[start:min(start+prefetchChunk, len(muts))]
		c.prefetch(chunk)
		for i := range chunk {
			if err := c.apply(&chunk[i]); err != nil {
				return &InvariantError{Mutation: chunk[i].Kind, Slot: chunk[i].Slot, Err: err}
			}
		}
	}
	return nil
}

const (
	// prefetchChunk is the number of mutations prefetched, then applied, at
	// a time.
	prefetchChunk = 64
	// prefetchMin is the smallest batch worth a prefetch (a synchronous
	// call's mutations have nothing to overlap with).
	prefetchMin = 4
)

// prefetch reads, without changing anything, what applying muts and then
// freezing their entries will read: each entry's state, its pod lists and
// the PodInfo a removal subtracts. In a large cluster each is a cache
// miss, and applying the mutations one by one would wait for them one
// after another; here each stage is a loop whose
// iterations do not depend on each other, so the processor keeps the
// misses of many entries in flight at once. It has no effect on the state.
func (c *Core) prefetch(muts []Mutation) {
	if len(muts) < prefetchMin {
		return
	}
	var sink uintptr
	for i := range muts {
		m := &muts[i]
		if s := c.state(m.Slot); s != nil {
			sink += s.PrefetchHead()
		}
		if m.Kind == RemovePod && m.Pod != nil {
			sink += uintptr(m.Pod.Requests().MilliCPU)
		}
	}
	for i := range muts {
		if s := c.state(muts[i].Slot); s != nil {
			sink += s.PrefetchLists()
		}
	}
	runtime.KeepAlive(sink) // keeps the loads
}

var (
	errExists  = fmt.Errorf("entry already exists")
	errMissing = fmt.Errorf("no such entry")
	errSlot    = fmt.Errorf("negative slot")
)

func (c *Core) apply(m *Mutation) error {
	if m.Slot < 0 {
		return errSlot
	}
	if m.Kind == Create {
		if c.state(m.Slot) != nil {
			return errExists
		}
		if need := int(m.Slot) + 1; need > len(c.slots) {
			c.slots = slices.Grow(c.slots, need-len(c.slots))[:need]
		}
		c.slots[m.Slot].state = nodeinfo.NewNodeState(c.nextGen)
		c.n++
		c.markDirty(m.Slot)
		return nil
	}
	s := c.state(m.Slot)
	if s == nil {
		return errMissing
	}
	switch m.Kind {
	case Delete:
		c.slots[m.Slot].state = nil
		c.n--
	case AddPod:
		s.AddPod(m.Pod)
	case RemovePod:
		var err error
		if m.Pod != nil && m.Pod.Key() == m.Key {
			err = s.RemovePodInfo(m.Pod, m.Affinity, m.AntiAffinity, m.NonHostAnti)
		} else {
			err = s.RemovePod(m.Key, m.Affinity, m.AntiAffinity, m.NonHostAnti)
		}
		if err != nil {
			return err
		}
	case SetNode:
		s.SetNode(m.Node)
	case ClearNode:
		s.ClearNode()
	case SetImages:
		s.SetImages(m.Images)
	default:
		return fmt.Errorf("unknown mutation %v", m.Kind)
	}
	c.markDirty(m.Slot)
	return nil
}

func (c *Core) markDirty(slot int32) {
	if e := &c.slots[slot]; !e.dirty {
		e.dirty = true
		c.dirty = append(c.dirty, slot)
	}
}

// Flush freezes every entry changed since the previous Flush and returns
// them in the order they were first changed. The returned slice is reused by
// the next Flush; the NodeInfos in it are immutable and may be kept.
func (c *Core) Flush() []Frozen {
	c.frozen = c.frozen[:0]
	for _, slot := range c.dirty {
		f := Frozen{Slot: slot}
		e := &c.slots[slot]
		if e.state != nil && e.state.Node() != nil {
			f.Info = e.state.Freeze()
		}
		c.frozen = append(c.frozen, f)
		e.dirty = false
	}
	c.dirty = c.dirty[:0]
	return c.frozen
}

// Get returns an immutable clone of the entry at slot, nodeless entries
// included, or nil if there is none.
func (c *Core) Get(slot int32) *nodeinfo.NodeInfo {
	if s := c.state(slot); s != nil {
		return s.Clone()
	}
	return nil
}

// Dump returns immutable clones of every entry, nodeless ones included.
func (c *Core) Dump() map[int32]*nodeinfo.NodeInfo {
	out := make(map[int32]*nodeinfo.NodeInfo, c.n)
	for slot, e := range c.slots {
		if e.state != nil {
			out[int32(slot)] = e.state.Clone()
		}
	}
	return out
}
