package nodeinfo

import (
	"fmt"
	"slices"
	"sync/atomic"
	"unsafe"

	v1 "k8s.io/api/core/v1"
)

// generation is the fallback process-wide generation counter (4.9).
var generation atomic.Int64

// NextGeneration returns the next value of a process-wide counter starting
// at 1 (upstream nextGeneration). Safe for concurrent use. Caches normally
// pass their own source to NewNodeState; this one backs a nil source.
func NextGeneration() int64 { return generation.Add(1) }

// Dirty bits: which parts changed since the last Freeze. Parts not dirty
// are shared with the previous frozen NodeInfo instead of copied.
const (
	dirtyAny     uint8 = 1 << iota // anything at all: the last NodeInfo is stale
	dirtyScalars                   // the requested scalars
	dirtyPorts                     // used ports
	dirtyPVCs                      // PVC reference counts
	dirtyAll     = dirtyAny | dirtyScalars | dirtyPorts | dirtyPVCs
)

// Copy-on-write bits: which slices of a thawed state (NodeInfo.Thaw) are
// still the frozen NodeInfo's. Such a slice is only read; the first write
// copies it (an append to a pod list copies it into the grown slice).
const (
	sharedPods uint8 = 1 << iota
	sharedAff
	sharedAnti
	sharedNonHost
	sharedScalars
	sharedPorts
	sharedPVCs
	sharedAll = sharedPods | sharedAff | sharedAnti | sharedNonHost | sharedScalars | sharedPorts | sharedPVCs
)

// NodeState is owned by exactly one goroutine (a shard): it is not safe for
// concurrent use and is never shared; no method blocks. It is the mutable
// aggregate for one node name (upstream framework.NodeInfo inside the
// cache). What it publishes, through Freeze, is immutable.
type NodeState struct {
	// All fields are owned by the goroutine that owns the NodeState. No
	// slice or map below is ever written while shared with a NodeInfo:
	// allocatable and imageStates are immutable, and the slices a thawed
	// state starts with are the NodeInfo's until copied (shared bits).
	nextGen    func() int64 // the cache's generation source
	generation int64

	node        *v1.Node
	allocatable Resource                     // immutable, rebuilt by SetNode
	imageStates map[string]ImageStateSummary // immutable, replaced by SetImageStates (explicit summaries)
	imageNames  []string                     // immutable, set with imageTable by SetImages (summaries read from a registry version)
	imageTable  *ImageTable                  // immutable, set by SetImages and SetImageTable; nil with imageNames nil: no view

	// Pod lists. Emptied slices keep their capacity (Freeze publishes nil).
	pods                                      []*PodInfo
	podsWithAffinity                          []*PodInfo
	podsWithRequiredAntiAffinity              []*PodInfo
	podsWithRequiredNonHostScopedAntiAffinity []*PodInfo // kept whatever upstream's feature gate (PodHasRequiredNonHostScopedAntiAffinity)

	requested        Resource         // scalars unused: see reqScalars
	reqScalars       []ScalarQuantity // sorted by name, mutable, keys never deleted
	nonZeroRequested Resource         // MilliCPU and Memory only
	usedPorts        []HostPort       // a set
	pvcRefs          []pvcRef         // sorted by key, counts > 0

	last *NodeInfo // the previous Freeze result, nil before the first
	// last's requested.scalars, usedPorts and pvcRefs (immutable, shared
	// with it), kept here so that Freeze shares the unchanged ones without
	// reading last: by the node's next change it has left the cache, and
	// the read was a miss on every synchronous call's path.
	lastScalars []ScalarQuantity
	lastPorts   []HostPort
	lastPVCs    []pvcRef
	dirty       uint8 // dirty* bits since last
	shared      uint8 // shared* bits: slices still a frozen NodeInfo's (Thaw), copied before their first write
}

// NewNodeState returns an empty, nodeless aggregate whose creation takes a
// generation from nextGen (4.9). A nil nextGen means NextGeneration.
func NewNodeState(nextGen func() int64) *NodeState {
	if nextGen == nil {
		nextGen = NextGeneration
	}
	s := &NodeState{nextGen: nextGen, dirty: dirtyAll}
	s.generation = nextGen()
	return s
}

// Node returns the node object, nil if nodeless.
func (s *NodeState) Node() *v1.Node { return s.node }

// NumPods returns the number of pods on the entry.
func (s *NodeState) NumPods() int { return len(s.pods) }

// Generation returns the entry's current generation.
func (s *NodeState) Generation() int64 { return s.generation }

func (s *NodeState) bump() { s.generation = s.nextGen() }

// AddPod aggregates p (4.5): appends it to the pod list and the sub-lists
// it qualifies for, adds its requests, non-zero requests, host ports (a
// set) and PVC references, and bumps the generation. A nil p is ignored. It
// allocates only to grow the lists or for scalars, ports and PVCs.
func (s *NodeState) AddPod(p *PodInfo) {
	if p == nil {
		return
	}
	s.pods = s.appendPod(s.pods, sharedPods, p)
	if p.affinity {
		s.podsWithAffinity = s.appendPod(s.podsWithAffinity, sharedAff, p)
	}
	if p.antiAffinity {
		s.podsWithRequiredAntiAffinity = s.appendPod(s.podsWithRequiredAntiAffinity, sharedAnti, p)
	}
	if p.nonHostAnti {
		s.podsWithRequiredNonHostScopedAntiAffinity = s.appendPod(s.podsWithRequiredNonHostScopedAntiAffinity, sharedNonHost, p)
	}
	s.update(p, 1)
	s.dirty |= dirtyAny
}

// appendPod appends p to l, the pod list whose shared bit is bit: a shared
// list is clipped first, so that append copies it into a new array.
func (s *NodeState) appendPod(l []*PodInfo, bit uint8, p *PodInfo) []*PodInfo {
	if s.shared&bit != 0 {
		s.shared &^= bit
		return append(l[:len(l):len(l)], p)
	}
	return append(l, p)
}

// own copies the slices of the shared bits in bits, which become the
// state's own.
func (s *NodeState) own(bits uint8) {
	bits &= s.shared
	if bits == 0 {
		return
	}
	s.shared &^= bits
	if bits&sharedPods != 0 {
		s.pods = slices.Clone(s.pods)
	}
	if bits&sharedAff != 0 {
		s.podsWithAffinity = slices.Clone(s.podsWithAffinity)
	}
	if bits&sharedAnti != 0 {
		s.podsWithRequiredAntiAffinity = slices.Clone(s.podsWithRequiredAntiAffinity)
	}
	if bits&sharedNonHost != 0 {
		s.podsWithRequiredNonHostScopedAntiAffinity = slices.Clone(s.podsWithRequiredNonHostScopedAntiAffinity)
	}
	if bits&sharedScalars != 0 {
		s.reqScalars = slices.Clone(s.reqScalars)
	}
	if bits&sharedPorts != 0 {
		s.usedPorts = slices.Clone(s.usedPorts)
	}
	if bits&sharedPVCs != 0 {
		s.pvcRefs = slices.Clone(s.pvcRefs)
	}
}

// RemoveHostPorts removes ports from the used host ports, as upstream's
// NodeInfo removes a pod's ports from its set whether or not another pod
// still uses them; ports not in the set are skipped. It reports whether
// anything was removed (the generation is bumped only then).
func (s *NodeState) RemoveHostPorts(ports []HostPort) bool {
	removed := false
	for _, hp := range ports {
		j := slices.Index(s.usedPorts, hp)
		if j < 0 {
			continue
		}
		if !removed {
			s.own(sharedPorts)
			removed = true
		}
		last := len(s.usedPorts) - 1
		s.usedPorts[j] = s.usedPorts[last]
		s.usedPorts[last] = HostPort{}
		s.usedPorts = s.usedPorts[:last]
	}
	if removed {
		s.dirty |= dirtyAny | dirtyPorts
		s.bump()
	}
	return removed
}

// RemovePod removes the pod with key exactly as upstream NodeInfo.RemovePod
// given a removal pod object whose classification is (affinity,
// antiAffinity, nonHostAntiAffinity): if affinity, key is removed from
// PodsWithAffinity (the last element moves into its slot); if
// antiAffinity, likewise from PodsWithRequiredAntiAffinity; if
// nonHostAntiAffinity, likewise from
// PodsWithRequiredNonHostScopedAntiAffinity; then from Pods. Found: its own
// PodInfo's contribution is subtracted and the generation bumped. Not
// found: an error wrapping ErrPodNotOnNode; totals and generation are
// unchanged, though the sub-list removals above stand (as upstream). An
// empty key returns ErrEmptyUID and changes nothing.
func (s *NodeState) RemovePod(key string, affinity, antiAffinity, nonHostAntiAffinity bool) error {
	return s.removePod(key, nil, affinity, antiAffinity, nonHostAntiAffinity)
}

// RemovePodInfo is RemovePod for the key of stored, when the caller knows
// the PodInfo it added: the pod list is searched by pointer, which reads no
// pod object, and by key only if stored is not in it. The result is that of
// RemovePod(stored.Key(), ...): a node's pod list never holds a key twice.
func (s *NodeState) RemovePodInfo(stored *PodInfo, affinity, antiAffinity, nonHostAntiAffinity bool) error {
	if stored == nil {
		return ErrNilPod
	}
	return s.removePod(stored.Key(), stored, affinity, antiAffinity, nonHostAntiAffinity)
}

func (s *NodeState) removePod(key string, stored *PodInfo, affinity, antiAffinity, nonHostAntiAffinity bool) error {
	if key == "" {
		return ErrEmptyUID
	}
	var ok bool
	// The affinity sub-lists may hold stale entries of a key (upstream
	// searches them by the caller's pod object), so they are always
	// searched by key, first match, as upstream.
	if affinity && indexOfPod(s.podsWithAffinity, key) >= 0 {
		s.own(sharedAff)
		if s.podsWithAffinity, ok = removePodFromSlice(s.podsWithAffinity, key); ok {
			s.dirty |= dirtyAny
		}
	}
	if antiAffinity && indexOfPod(s.podsWithRequiredAntiAffinity, key) >= 0 {
		s.own(sharedAnti)
		if s.podsWithRequiredAntiAffinity, ok = removePodFromSlice(s.podsWithRequiredAntiAffinity, key); ok {
			s.dirty |= dirtyAny
		}
	}
	if nonHostAntiAffinity && indexOfPod(s.podsWithRequiredNonHostScopedAntiAffinity, key) >= 0 {
		s.own(sharedNonHost)
		if s.podsWithRequiredNonHostScopedAntiAffinity, ok = removePodFromSlice(s.podsWithRequiredNonHostScopedAntiAffinity, key); ok {
			s.dirty |= dirtyAny
		}
	}
	i := -1
	if stored != nil {
		i = slices.Index(s.pods, stored)
	}
	if i < 0 {
		i = indexOfPod(s.pods, key)
	}
	if i < 0 {
		name := "<no node>"
		if s.node != nil {
			name = s.node.Name
		}
		return fmt.Errorf("%w: pod %q, node %q", ErrPodNotOnNode, key, name)
	}
	s.own(sharedPods)
	p := s.pods[i]
	s.pods = removePodAt(s.pods, i)
	s.update(p, -1)
	s.dirty |= dirtyAny
	return nil
}

// indexOfPod returns the index of the first PodInfo with key, skipping
// entries with an empty key (upstream skips pods whose key errors).
func indexOfPod(s []*PodInfo, key string) int {
	for i, p := range s {
		if k := p.Key(); k == key && k != "" {
			return i
		}
	}
	return -1
}

// removePodFromSlice removes the first PodInfo with key by moving the last
// element into its slot; the slice keeps its capacity.
func removePodFromSlice(s []*PodInfo, key string) ([]*PodInfo, bool) {
	i := indexOfPod(s, key)
	if i < 0 {
		return s, false
	}
	return removePodAt(s, i), true
}

// removePodAt moves the last element into slot i and truncates.
func removePodAt(s []*PodInfo, i int) []*PodInfo {
	last := len(s) - 1
	s[i] = s[last]
	s[last] = nil
	return s[:last]
}

// update adds (sign 1) or subtracts (sign -1) p's contribution and bumps
// the generation. Totals use two's-complement arithmetic, so a removal
// exactly undoes its add.
func (s *NodeState) update(p *PodInfo, sign int64) {
	s.requested.MilliCPU += sign * p.requests.MilliCPU
	s.requested.Memory += sign * p.requests.Memory
	s.requested.EphemeralStorage += sign * p.requests.EphemeralStorage
	if s.shared != 0 {
		var bits uint8
		if len(p.requests.scalars) > 0 {
			bits |= sharedScalars
		}
		if len(p.HostPorts()) > 0 {
			bits |= sharedPorts
		}
		if len(p.PVCKeys()) > 0 {
			bits |= sharedPVCs
		}
		s.own(bits)
	}
	for _, sq := range p.requests.scalars {
		i, ok := findScalar(s.reqScalars, sq.Name)
		if ok {
			s.reqScalars[i].Value += sign * sq.Value
		} else {
			s.reqScalars = slices.Insert(s.reqScalars, i, ScalarQuantity{Name: sq.Name, Value: sign * sq.Value})
		}
	}
	if len(p.requests.scalars) > 0 {
		s.dirty |= dirtyScalars
	}
	s.nonZeroRequested.MilliCPU += sign * p.non0CPU
	s.nonZeroRequested.Memory += sign * p.non0Mem

	for _, hp := range p.HostPorts() {
		j := slices.Index(s.usedPorts, hp)
		if sign > 0 && j < 0 {
			s.usedPorts = append(s.usedPorts, hp)
		} else if sign < 0 && j >= 0 {
			last := len(s.usedPorts) - 1
			s.usedPorts[j] = s.usedPorts[last]
			s.usedPorts[last] = HostPort{}
			s.usedPorts = s.usedPorts[:last]
		}
	}
	if len(p.HostPorts()) > 0 {
		s.dirty |= dirtyPorts
	}

	for _, key := range p.PVCKeys() {
		i, ok := findPVC(s.pvcRefs, key)
		switch {
		case sign > 0 && ok:
			s.pvcRefs[i].count++
		case sign > 0:
			s.pvcRefs = slices.Insert(s.pvcRefs, i, pvcRef{key: key, count: 1})
		case ok:
			s.pvcRefs[i].count--
			if s.pvcRefs[i].count <= 0 {
				s.pvcRefs = slices.Delete(s.pvcRefs, i, i+1)
			}
		}
	}
	if len(p.PVCKeys()) > 0 {
		s.dirty |= dirtyPVCs
	}
	s.bump()
}

// SetNode stores node, recomputes Allocatable from scratch from
// node.Status.Allocatable (4.4) and bumps the generation. A nil node is
// stored as nil with a zero Allocatable (upstream would panic).
func (s *NodeState) SetNode(node *v1.Node) {
	s.node = node
	if node != nil {
		s.allocatable = NewResource(node.Status.Allocatable)
	} else {
		s.allocatable = Resource{}
	}
	s.bump()
	s.dirty |= dirtyAny
}

// ClearNode drops the node object (upstream RemoveNode) and bumps the
// generation; Allocatable and image states stay, invisible.
func (s *NodeState) ClearNode() {
	s.node = nil
	s.bump()
	s.dirty |= dirtyAny
}

// SetImageStates replaces the image summaries with m, which the caller
// hands over: it becomes shared with frozen NodeInfos and must never be
// mutated afterwards. It does not bump the generation (4.9).
func (s *NodeState) SetImageStates(m map[string]ImageStateSummary) {
	s.imageStates, s.imageNames, s.imageTable = m, nil, nil
	s.dirty |= dirtyAny
}

// SetImages makes the entry's image summaries those of v's names read from
// v's registry version (v is immutable; nil: none). It does not bump the
// generation.
func (s *NodeState) SetImages(v *ImageView) {
	s.imageStates, s.imageNames, s.imageTable = nil, nil, nil
	if v != nil {
		s.imageNames, s.imageTable = v.Names, v.Table
	}
	s.dirty |= dirtyAny
}

// SetImageTable makes the entry's image summaries its names read from t
// (a clone of the entry taken at another registry version, as the cache
// makes of a node whose pods change): nothing changes for an entry with
// explicit summaries (SetImageStates), without image names, or already
// reading t. It does not bump the generation.
func (s *NodeState) SetImageTable(t *ImageTable) {
	if s.imageStates != nil || len(s.imageNames) == 0 || s.imageTable == t {
		return
	}
	s.imageTable = t
	s.dirty |= dirtyAny
}

// Freeze returns an immutable copy of the entry (3.6). The pod slices are
// copied, into the NodeInfo's own allocation; other parts unchanged since
// the previous Freeze are shared with the previous result, and if nothing
// changed at all the previous result itself is returned. Nothing the
// NodeState does afterwards changes a returned NodeInfo.
func (s *NodeState) Freeze() *NodeInfo {
	if s.last != nil && s.dirty&dirtyAny == 0 {
		return s.last
	}
	if s.last == nil {
		s.dirty = dirtyAll
	}
	// The pod slices are copied even when they did not change: they share
	// one allocation with the NodeInfo, and sharing the previous copy would
	// keep the whole previous NodeInfo alive.
	np, na, nr, nh := len(s.pods), len(s.podsWithAffinity), len(s.podsWithRequiredAntiAffinity), len(s.podsWithRequiredNonHostScopedAntiAffinity)
	total := np + na + nr + nh
	n, buf := newFrozen(total)
	*n = NodeInfo{
		node:        s.node,
		requested:   s.requested,
		nonZeroCPU:  s.nonZeroRequested.MilliCPU,
		nonZeroMem:  s.nonZeroRequested.Memory,
		allocatable: s.allocatable,
		imageStates: s.imageStates,
		generation:  s.generation,
	}
	n.imageNames, n.imageTable = s.imageNames, s.imageTable
	if total > 0 {
		copy(buf, s.pods)
		copy(buf[np:], s.podsWithAffinity)
		copy(buf[np+na:], s.podsWithRequiredAntiAffinity)
		copy(buf[np+na+nr:], s.podsWithRequiredNonHostScopedAntiAffinity)
		n.podBuf, n.nAff, n.nAnti, n.nNonHost = buf, int32(na), int32(nr), int32(nh)
	}
	if s.dirty&dirtyScalars != 0 {
		if len(s.reqScalars) > 0 {
			n.requested.scalars = slices.Clone(s.reqScalars)
		}
	} else {
		n.requested.scalars = s.lastScalars
	}
	if s.dirty&dirtyPorts != 0 {
		if len(s.usedPorts) > 0 {
			n.usedPorts = slices.Clone(s.usedPorts)
		}
	} else {
		n.usedPorts = s.lastPorts
	}
	if s.dirty&dirtyPVCs != 0 {
		if len(s.pvcRefs) > 0 {
			n.pvcRefs = slices.Clone(s.pvcRefs)
		}
	} else {
		n.pvcRefs = s.lastPVCs
	}
	n.withExtension()
	s.last = n
	s.lastScalars, s.lastPorts, s.lastPVCs = n.requested.scalars, n.usedPorts, n.pvcRefs
	s.dirty = 0
	return n
}

// Clone is Freeze (upstream Dump clones).
func (s *NodeState) Clone() *NodeInfo { return s.Freeze() }

// newFrozen returns a NodeInfo and a pod buffer of length total, in one
// allocation up to maxFrozenPods pods (a node's usual share), else in two.
// The single allocation is the smallest of frozenAllocs that holds total
// pods: each fills one of the allocator's size classes exactly, so that
// no byte of the class is wasted.
func newFrozen(total int) (*NodeInfo, []*PodInfo) {
	switch {
	case total == 0:
		return new(NodeInfo), nil
	case total <= maxFrozenPods:
		return frozenAllocs[frozenClass[total]].alloc(total)
	}
	return new(NodeInfo), make([]*PodInfo, total)
}

// frozenAllocs are the single allocations of a NodeInfo and its pods, by
// capacity: a NodeInfo (288 bytes) and k pointers is 288+8k bytes, plus
// the 8-byte header the allocator puts before a pointerful object over
// 512 bytes; each k below makes that a size class of the Go allocator
// (320, 352, ..., 512, 576, ..., 1024). TestFrozenAllocsFillSizeClasses
// keeps them so when NodeInfo changes.
var frozenAllocs = [...]struct {
	pods  int
	alloc func(total int) (*NodeInfo, []*PodInfo)
}{
	{4, frozenWith[[4]*PodInfo]}, {8, frozenWith[[8]*PodInfo]}, {12, frozenWith[[12]*PodInfo]},
	{16, frozenWith[[16]*PodInfo]}, {20, frozenWith[[20]*PodInfo]}, {24, frozenWith[[24]*PodInfo]},
	{28, frozenWith[[28]*PodInfo]}, {35, frozenWith[[35]*PodInfo]}, {43, frozenWith[[43]*PodInfo]},
	{51, frozenWith[[51]*PodInfo]}, {59, frozenWith[[59]*PodInfo]}, {75, frozenWith[[75]*PodInfo]},
	{91, frozenWith[[91]*PodInfo]},
}

// maxFrozenPods is the largest pod count newFrozen allocates with its
// NodeInfo.
const maxFrozenPods = 91

// frozenClass[total] is the index in frozenAllocs of the smallest that
// holds total pods (1 <= total <= maxFrozenPods); immutable after init.
var frozenClass = func() (c [maxFrozenPods + 1]uint8) {
	k := 0
	for total := 1; total <= maxFrozenPods; total++ {
		for frozenAllocs[k].pods < total {
			k++
		}
		c[total] = uint8(k)
	}
	return c
}()

// frozenWith allocates a NodeInfo and an array A of *PodInfo together and
// returns the first total elements of the array. A must be [k]*PodInfo
// with k >= total (frozenAllocs guarantees it); the array keeps its type,
// so the collector scans it as pointers.
func frozenWith[A any](total int) (*NodeInfo, []*PodInfo) {
	p := new(struct {
		n NodeInfo
		b A
	})
	if uintptr(total)*unsafe.Sizeof((*PodInfo)(nil)) > unsafe.Sizeof(p.b) {
		panic(fmt.Sprintf("schedcache: frozen pod buffer of %d bytes for %d pods", unsafe.Sizeof(p.b), total))
	}
	return &p.n, unsafe.Slice((**PodInfo)(unsafe.Pointer(&p.b)), total)
}

// The two Prefetch methods read, without changing anything, the memory that
// changing and then freezing s will read, so that a batch of changes to
// many states can first load all of them with the cache misses in flight
// together: call PrefetchHead for every state of the batch, then
// PrefetchLists for every one, then make the changes. Each returns a value
// computed from what it read, which the caller keeps (so that the loads are
// not removed). Neither has any effect on s.

// PrefetchHead reads s itself.
func (s *NodeState) PrefetchHead() uintptr {
	return uintptr(len(s.pods)) + uintptr(len(s.podsWithAffinity)) + uintptr(s.requested.MilliCPU) + uintptr(s.dirty)
}

// PrefetchLists reads one word per cache line of the pod lists (Freeze
// does not read the previous Freeze result).
func (s *NodeState) PrefetchLists() uintptr {
	var sum uintptr
	for _, l := range [...][]*PodInfo{s.pods, s.podsWithAffinity, s.podsWithRequiredAntiAffinity, s.podsWithRequiredNonHostScopedAntiAffinity} {
		for i := 0; i < len(l); i += cacheLinePtrs {
			sum += uintptr(unsafe.Pointer(l[i]))
		}
	}
	return sum
}

// cacheLinePtrs is the number of pointers in a 64-byte cache line.
const cacheLinePtrs = int(64 / unsafe.Sizeof(uintptr(0)))
