package nodeinfo

import v1 "k8s.io/api/core/v1"

// NewPodInfoAnyUID is NewPodInfo without the UID requirement (an empty UID
// gives an empty Key). Upstream's NewSnapshot aggregates every pod whatever
// its UID; nothing keyed by UID may use such a PodInfo. It returns
// ErrNilPod for a nil pod and a *QuantityError as NewPodInfo.
func NewPodInfoAnyUID(pod *v1.Pod) (*PodInfo, error) {
	if pod == nil {
		return nil, ErrNilPod
	}
	return newPodInfo(pod)
}

// WithImageStates returns a copy of n whose image summaries are images (an
// immutable map handed over by the caller); everything else is shared
// but the extension, computed again for the copy.
func (n *NodeInfo) WithImageStates(images map[string]ImageStateSummary) *NodeInfo {
	c := n.copyFields()
	c.imageStates, c.imageNames, c.imageTable = images, nil, nil
	return c.withExtension()
}

// copyFields returns a copy of n sharing everything but the extension,
// which the caller computes once it has changed what it changes.
func (n *NodeInfo) copyFields() *NodeInfo {
	return &NodeInfo{
		node:        n.node,
		podBuf:      n.podBuf,
		nAff:        n.nAff,
		nAnti:       n.nAnti,
		nNonHost:    n.nNonHost,
		requested:   n.requested,
		nonZeroCPU:  n.nonZeroCPU,
		nonZeroMem:  n.nonZeroMem,
		allocatable: n.allocatable,
		usedPorts:   n.usedPorts,
		pvcRefs:     n.pvcRefs,
		imageStates: n.imageStates,
		imageNames:  n.imageNames,
		imageTable:  n.imageTable,
		generation:  n.generation,
	}
}
