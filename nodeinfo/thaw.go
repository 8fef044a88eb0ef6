package nodeinfo

import (
	"reflect"
	"slices"
)

// Thaw returns a new NodeState holding exactly n's aggregate (node object,
// pods and sub-lists in their order, requested and non-zero totals, ports,
// PVC counts, allocatable, image summaries, generation), so that the
// aggregation rules of NodeState (AddPod, RemovePod, SetNode, ...) apply
// to a copy of a frozen entry: a what-if fork (snapshot.Fork) changes a
// published node this way. The new state's later changes take their
// generations from nextGen (nil: NextGeneration). Freeze before any change
// returns n itself. n is not changed: the state starts with n's slices
// and copies each before its first write to it (copy on write), so a
// state that only adds pods copies only the pod lists it appends to, and
// the ports, PVC counts and scalars only if a pod changes them. Cost:
// O(1); a first write to a slice O(its length).
func (n *NodeInfo) Thaw(nextGen func() int64) *NodeState {
	return n.thawOnto(new(NodeState), nextGen, n.podList(), n.affList(), n.antiList(), n.nonHostList(), sharedAll)
}

// ThawInto is Thaw reusing s, a state its owner no longer uses (nil:
// Thaw), so that a caller thawing many entries in turn (a fork's edits)
// allocates neither the state nor, mostly, its pod lists: the pod lists
// are copied into s's own buffers (never into slices s still shared with
// a NodeInfo); the other slices are shared with n until written, as
// Thaw's. What s froze before is not changed. Cost: O(pods of n).
func (n *NodeInfo) ThawInto(s *NodeState, nextGen func() int64) *NodeState {
	if s == nil {
		return n.Thaw(nextGen)
	}
	pods := s.reusePods(s.pods, sharedPods, n.podList())
	aff := s.reusePods(s.podsWithAffinity, sharedAff, n.affList())
	anti := s.reusePods(s.podsWithRequiredAntiAffinity, sharedAnti, n.antiList())
	nonHost := s.reusePods(s.podsWithRequiredNonHostScopedAntiAffinity, sharedNonHost, n.nonHostList())
	return n.thawOnto(s, nextGen, pods, aff, anti, nonHost, sharedScalars|sharedPorts|sharedPVCs)
}

// reusePods returns l, one of s's pod lists (its shared bit: bit), holding
// a copy of from: l's buffer if s owns it, else a new one (a NodeInfo's
// is never written). Pointers past the copy are dropped; past len(l)
// there are none (removals clear the slot they vacate).
func (s *NodeState) reusePods(l []*PodInfo, bit uint8, from []*PodInfo) []*PodInfo {
	if s.shared&bit != 0 {
		l = nil
	}
	if len(l) > len(from) {
		clear(l[len(from):])
	}
	return append(l[:0], from...)
}

// thawOnto overwrites s with n's aggregate, its pod lists given (n's own,
// shared, or copies), shared the slices s starts sharing with n.
func (n *NodeInfo) thawOnto(s *NodeState, nextGen func() int64, pods, aff, anti, nonHost []*PodInfo, shared uint8) *NodeState {
	if nextGen == nil {
		nextGen = NextGeneration
	}
	*s = NodeState{
		nextGen:                      nextGen,
		generation:                   n.generation,
		node:                         n.node,
		allocatable:                  n.allocatable,
		imageStates:                  n.imageStates,
		pods:                         pods,
		podsWithAffinity:             aff,
		podsWithRequiredAntiAffinity: anti,
		requested:                    n.requested,
		reqScalars:                   n.requested.scalars,
		nonZeroRequested:             Resource{MilliCPU: n.nonZeroCPU, Memory: n.nonZeroMem},
		usedPorts:                    n.usedPorts,
		pvcRefs:                      n.pvcRefs,
		imageNames:                   n.imageNames,
		imageTable:                   n.imageTable,
		last:                         n,
		lastScalars:                  n.requested.scalars,
		lastPorts:                    n.usedPorts,
		lastPVCs:                     n.pvcRefs,
		shared:                       shared,
	}
	s.podsWithRequiredNonHostScopedAntiAffinity = nonHost
	s.requested.scalars = nil
	return s
}

// NumPodsWithAffinity returns the length of the affinity sub-list.
func (s *NodeState) NumPodsWithAffinity() int { return len(s.podsWithAffinity) }

// NumPodsWithRequiredAntiAffinity returns the length of the required
// anti-affinity sub-list.
func (s *NodeState) NumPodsWithRequiredAntiAffinity() int {
	return len(s.podsWithRequiredAntiAffinity)
}

// NumPodsWithRequiredNonHostScopedAntiAffinity returns the length of the
// required non-host-scoped anti-affinity sub-list.
func (s *NodeState) NumPodsWithRequiredNonHostScopedAntiAffinity() int {
	return len(s.podsWithRequiredNonHostScopedAntiAffinity)
}

// PVCRefCount returns how many of the entry's pods reference the claim key.
func (s *NodeState) PVCRefCount(key string) int {
	if i, ok := findPVC(s.pvcRefs, key); ok {
		return s.pvcRefs[i].count
	}
	return 0
}

// NewNodeStateInto is NewNodeState reusing s, a state its owner no longer
// uses (nil: NewNodeState), so that a caller making entries in turn (a
// fork's node adds) allocates no state: s's pod-list buffers are kept,
// emptied, unless a NodeInfo still shares them (Thaw); everything else
// starts empty. What s froze before is not changed.
func NewNodeStateInto(s *NodeState, nextGen func() int64) *NodeState {
	if s == nil {
		return NewNodeState(nextGen)
	}
	if nextGen == nil {
		nextGen = NextGeneration
	}
	pods := s.reusePods(s.pods, sharedPods, nil)
	aff := s.reusePods(s.podsWithAffinity, sharedAff, nil)
	anti := s.reusePods(s.podsWithRequiredAntiAffinity, sharedAnti, nil)
	nonHost := s.reusePods(s.podsWithRequiredNonHostScopedAntiAffinity, sharedNonHost, nil)
	*s = NodeState{nextGen: nextGen, dirty: dirtyAll, pods: pods, podsWithAffinity: aff, podsWithRequiredAntiAffinity: anti,
		podsWithRequiredNonHostScopedAntiAffinity: nonHost}
	s.generation = nextGen()
	return s
}

// Same reports whether s's aggregate is exactly n's (node object, pods and
// sub-lists in their order, requested and non-zero totals, ports, PVC
// counts, allocatable, image summaries), its generation aside: freezing s
// would give a copy of n. A fork thaws an entry, changes it and may change
// it back (add a pod, then remove it); such an entry keeps n instead of a
// new copy. Cost: O(pods + ports + claims + scalars); no allocation.
func (s *NodeState) Same(n *NodeInfo) bool {
	if n == nil || s.node != n.node || s.imageTable != n.imageTable ||
		!sameMap(s.imageStates, n.imageStates) || !sameSlice(s.imageNames, n.imageNames) {
		return false
	}
	r, q := &s.requested, &n.requested
	if r.MilliCPU != q.MilliCPU || r.Memory != q.Memory || r.EphemeralStorage != q.EphemeralStorage ||
		r.AllowedPodNumber != q.AllowedPodNumber || !slices.Equal(s.reqScalars, q.scalars) ||
		s.nonZeroRequested.MilliCPU != n.nonZeroCPU || s.nonZeroRequested.Memory != n.nonZeroMem ||
		!s.allocatable.Equal(n.allocatable) {
		return false
	}
	return slices.Equal(s.pods, n.podList()) &&
		slices.Equal(s.podsWithAffinity, n.affList()) &&
		slices.Equal(s.podsWithRequiredAntiAffinity, n.antiList()) &&
		slices.Equal(s.podsWithRequiredNonHostScopedAntiAffinity, n.nonHostList()) &&
		slices.Equal(s.usedPorts, n.usedPorts) && slices.Equal(s.pvcRefs, n.pvcRefs)
}

// sameSlice reports whether a and b are the same slice (same array and
// length): image name lists are shared, never copied, so identity is
// equality here.
func sameSlice(a, b []string) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// sameMap reports whether a and b are the same map (both nil included):
// explicit image summaries are replaced, never edited.
func sameMap(a, b map[string]ImageStateSummary) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
