package actor

import (
	"runtime"
	"unsafe"
)

// prefetch reads, without changing anything, the state that applying ops
// will read: each pod op's record in the pod map, the record's entry and
// PodInfo, and for a pod being added the bytes of its node name and the
// entry they name. In a large cluster each of these is a cache miss, and
// applying an op misses on them one after another; here each stage is a
// loop whose iterations do not depend on each other, so the processor
// keeps many of the misses of a chunk in flight at once, and the ops then
// find their state in cache. It has no effect on what the ops do.
func (c *core) prefetch(ops []*Op) {
	if len(ops) < prefetchMin {
		return
	}
	if prefetchHook != nil {
		prefetchHook()
	}
	var recs [prefetchChunk]*podRecord
	var ents [prefetchChunk]*entry
	var sink uintptr
	// Stage 1: the pod map (its group and slot).
	for i, op := range ops {
		switch op.Kind {
		case OpAssumePod, OpAddPod, OpUpdatePod, OpRemovePod, OpForgetPod, OpFinishBinding, OpRemoveAssumedPod:
			recs[i] = c.pods[op.Key]
		}
	}
	// Stage 2: the records, and the node names of pods being added.
	for i, op := range ops {
		if r := recs[i]; r != nil {
			ents[i] = r.entry
			sink += uintptr(unsafe.Pointer(r.info))
		}
		if op.Info != nil {
			if name := op.Info.NodeName(); len(name) > 0 {
				sink += uintptr(name[0])
			}
		}
	}
	// Stage 3: the entries and stored PodInfos of cached pods, and the
	// node map for pods being added.
	for i, op := range ops {
		if e := ents[i]; e != nil {
			sink += uintptr(e.pods)
		}
		if r := recs[i]; r != nil {
			sink += uintptr(unsafe.Pointer(r.info.Pod()))
		}
		if op.Info != nil {
			if e := c.nodes[op.Info.NodeName()]; e != nil {
				sink += uintptr(e.pods)
			}
		}
	}
	runtime.KeepAlive(sink) // keeps the loads
}

// prefetchHook, if non-nil, runs at the start of every prefetch that loads
// anything. Tests set it to make a prefetch panic.
var prefetchHook func()

const (
	// prefetchChunk is the number of ops prefetched, then applied, at a
	// time: at most the chunk's state is loaded ahead (a few KB).
	prefetchChunk = 32
	// prefetchMin is the smallest chunk worth a prefetch: a lone
	// synchronous call has no other op's misses to overlap with, and its
	// lookups would just run twice.
	prefetchMin = 4
)
