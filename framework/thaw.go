package framework

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
	if nextGen == nil {
		nextGen = NextGeneration
	}
	s := &NodeState{
		nextGen:                      nextGen,
		generation:                   n.generation,
		node:                         n.node,
		allocatable:                  n.allocatable,
		imageStates:                  n.imageStates,
		pods:                         n.pods,
		podsWithAffinity:             n.podsWithAffinity,
		podsWithRequiredAntiAffinity: n.podsWithRequiredAntiAffinity,
		requested:                    n.requested,
		reqScalars:                   n.requested.scalars,
		nonZeroRequested:             n.nonZeroRequested,
		usedPorts:                    n.usedPorts,
		pvcRefs:                      n.pvcRefs,
		last:                         n,
		shared:                       sharedAll,
	}
	s.requested.scalars = nil
	if n.imageNames != nil || n.imageTable != nil {
		s.images = &ImageView{Names: n.imageNames, Table: n.imageTable}
	}
	return s
}

// NumPodsWithAffinity returns the length of the affinity sub-list.
func (s *NodeState) NumPodsWithAffinity() int { return len(s.podsWithAffinity) }

// NumPodsWithRequiredAntiAffinity returns the length of the required
// anti-affinity sub-list.
func (s *NodeState) NumPodsWithRequiredAntiAffinity() int {
	return len(s.podsWithRequiredAntiAffinity)
}

// PVCRefCount returns how many of the entry's pods reference the claim key.
func (s *NodeState) PVCRefCount(key string) int {
	if i, ok := findPVC(s.pvcRefs, key); ok {
		return s.pvcRefs[i].count
	}
	return 0
}
