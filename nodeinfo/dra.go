package nodeinfo

import (
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// draNodeAllocatableResources mirrors upstream's DRANodeAllocatableResources
// feature gate (alpha in v1.37, off by default): while it is on, the
// PodInfos built include the quantities of the pod status's
// nodeAllocatableResourceClaimStatuses in their requests (semantics 4.2).
var draNodeAllocatableResources atomic.Bool

// SetDRANodeAllocatableResources turns on or off, for every PodInfo built
// from then on in the process (NewPodInfo, NewPodInfoAnyUID, and so every
// cache and snapshot call that takes a pod), what upstream's
// DRANodeAllocatableResources feature gate does to a pod's requests: with
// it on, the quantities of status.nodeAllocatableResourceClaimStatuses
// (each mapping's quantity, and each overhead's perPod plus perContainer
// times the claim's number of containers) are added to the pod's
// requests and non-zero requests exactly as upstream v1.37.2's
// PodInfo.CalculateResource adds them (k8s.io/component-helpers
// resource.PodRequests with UseDRANodeAllocatableResourceClaimStatus).
// Off by default, as upstream's gate. Set it with the gate, before the
// cache gets pods: a PodInfo keeps the amounts computed when it was built,
// and a pod's removal subtracts those, so a change takes effect pod by pod
// as pods are added or updated. Safe for concurrent use.
func SetDRANodeAllocatableResources(on bool) { draNodeAllocatableResources.Store(on) }

// DRANodeAllocatableResources reports the setting of
// SetDRANodeAllocatableResources.
func DRANodeAllocatableResources() bool { return draNodeAllocatableResources.Load() }

// loadDRAClaims sets r to what upstream's addDRANodeAllocatableClaimResources
// (k8s.io/component-helpers v0.37.2) adds to a resource list for pod: for
// every claim status, each mapping with a quantity, and for each overhead
// perPod (if set) plus perContainer (if set) times the number of the
// claim's containers, that sum being added, and so its name present, even
// where it is zero. Every claim counts once, whichever containers
// reference it, init containers included. The cpu0/memory0 slots mirror
// cpu/memory where present: the amounts are added to the aggregation
// after the non-zero defaults, so they join the defaulted totals as they
// are. Names that never reach a Resource are dropped, as everywhere here.
// Amounts are exact (upstream's Quantity arithmetic is too).
func (r *reqList) loadDRAClaims(pod *v1.Pod) {
	r.reset()
	for i := range pod.Status.NodeAllocatableResourceClaimStatuses {
		cs := &pod.Status.NodeAllocatableResourceClaimStatuses[i]
		for j := range cs.Mapping {
			if m := &cs.Mapping[j]; m.Quantity != nil {
				r.addQuantity(m.Name, m.Quantity)
			}
		}
		for j := range cs.Overhead {
			o := &cs.Overhead[j]
			var q resource.Quantity
			if o.PerPod != nil {
				q.Add(*o.PerPod)
			}
			if o.PerContainer != nil && len(cs.Containers) > 0 {
				per := o.PerContainer.DeepCopy()
				per.Mul(int64(len(cs.Containers))) // exact: past int64 it goes to inf.Dec
				q.Add(per)
			}
			r.addQuantity(o.Name, &q)
		}
	}
	if r.present(slotCPU) {
		r.setFixed(slotCPU0, r.fixed[slotCPU])
	}
	if r.present(slotMemory) {
		r.setFixed(slotMemory0, r.fixed[slotMemory])
	}
}

// addQuantity adds q to name's entry (absent counts as zero; upstream
// addResourceList on one name), dropping names that never reach a
// Resource. The cpu0/memory0 slots are not touched.
func (r *reqList) addQuantity(name v1.ResourceName, q *resource.Quantity) {
	switch slot := fixedSlot(name); {
	case slot == slotCPU:
		r.addFixed(slotCPU, loadNumChecked(q, resource.Milli))
	case slot >= 0:
		r.addFixed(slot, loadNumChecked(q, 0))
	case IsScalarResourceName(name):
		r.addScalar(name, loadNumChecked(q, 0))
	}
}
