package nodeinfo

import (
	v1 "k8s.io/api/core/v1"
)

// PodInfo is immutable after NewPodInfo, so it is safe for concurrent use
// and may be shared by any number of NodeStates, NodeInfos and goroutines;
// no method blocks. It is a pod plus everything the node aggregation needs
// from it, computed once by NewPodInfo. Methods are nil-safe.
type PodInfo struct {
	// All fields are written only by NewPodInfo.
	// The layout is kept small (96 bytes): a cache holds one per pod.
	pod          *v1.Pod // shared with the caller; never mutated here; Key is its UID
	requests     Resource
	non0CPU      int64
	non0Mem      int64
	extra        *podExtra // nil for the common pod without host ports or PVCs
	affinity     bool
	antiAffinity bool
	nonHostAnti  bool // a required anti-affinity term whose topology key is not the hostname
}

// podExtra holds what few pods have. Read-only after NewPodInfo.
type podExtra struct {
	hostPorts []HostPort // nil when none
	pvcKeys   []string   // nil when none
	ext       any        // the registered pod extension's value (ext.go), nil when none
}

// NewPodInfo computes the PodInfo of pod (semantics 4.2–4.8). It returns
// ErrNilPod or ErrEmptyUID for a pod without a key, and a *QuantityError
// (wrapping ErrQuantityOverflow) for a pod one of whose amounts is beyond
// MaxPodQuantity. It is pure (it reads pod, never writes it, and keeps no
// state), so callers may run it on any goroutine; pod must not be mutated
// afterwards.
func NewPodInfo(pod *v1.Pod) (*PodInfo, error) {
	if _, err := PodKey(pod); err != nil {
		return nil, err
	}
	return newPodInfo(pod)
}

func newPodInfo(pod *v1.Pod) (*PodInfo, error) {
	p := computePodInfo(pod)
	if err := checkQuantities(p); err != nil {
		return nil, err
	}
	return p, nil
}

func computePodInfo(pod *v1.Pod) *PodInfo {
	p := &PodInfo{
		pod:          pod,
		affinity:     PodHasAffinity(pod),
		antiAffinity: PodHasRequiredAntiAffinity(pod),
		nonHostAnti:  PodHasRequiredNonHostScopedAntiAffinity(pod),
	}
	if hp, pvc, ext := hostPortsOf(pod), pvcKeysOf(pod), podExtensionOf(pod); hp != nil || pvc != nil || ext != nil {
		p.extra = &podExtra{hostPorts: hp, pvcKeys: pvc, ext: ext}
	}
	p.requests, p.non0CPU, p.non0Mem = podRequests(pod)
	return p
}

// Pod returns the pod. Callers must not mutate it.
func (p *PodInfo) Pod() *v1.Pod {
	if p == nil {
		return nil
	}
	return p.pod
}

// Key returns the pod's cache key, string(pod.UID).
func (p *PodInfo) Key() string {
	if p == nil || p.pod == nil {
		return ""
	}
	return string(p.pod.UID)
}

// NodeName returns pod.Spec.NodeName.
func (p *PodInfo) NodeName() string {
	if p == nil || p.pod == nil {
		return ""
	}
	return p.pod.Spec.NodeName
}

// Requests returns the pod's contribution to a node's Requested (4.2):
// container sums and init maxima with status resources, the pod-level
// override and overhead, rounded up once on the aggregate (values beyond
// int64 saturate). AllowedPodNumber is set only if the pod requests "pods";
// node aggregation ignores it. With SetDRANodeAllocatableResources on when
// the PodInfo was built, the node-allocatable resources of the pod's
// resource claims are included, as upstream's DRANodeAllocatableResources
// gate does.
func (p *PodInfo) Requests() Resource {
	if p == nil {
		return Resource{}
	}
	return p.requests
}

// NonZeroCPU returns the pod's non-zero cpu request in millicores (4.3).
func (p *PodInfo) NonZeroCPU() int64 {
	if p == nil {
		return 0
	}
	return p.non0CPU
}

// NonZeroMemory returns the pod's non-zero memory request in bytes (4.3).
func (p *PodInfo) NonZeroMemory() int64 {
	if p == nil {
		return 0
	}
	return p.non0Mem
}

// HasAffinity reports whether the pod belongs in PodsWithAffinity (4.8).
func (p *PodInfo) HasAffinity() bool { return p != nil && p.affinity }

// HasRequiredAntiAffinity reports whether the pod belongs in
// PodsWithRequiredAntiAffinity (4.8).
func (p *PodInfo) HasRequiredAntiAffinity() bool { return p != nil && p.antiAffinity }

// HasRequiredNonHostScopedAntiAffinity reports whether the pod belongs in
// PodsWithRequiredNonHostScopedAntiAffinity (4.8): it has a required
// anti-affinity term whose topology key is not kubernetes.io/hostname.
func (p *PodInfo) HasRequiredNonHostScopedAntiAffinity() bool { return p != nil && p.nonHostAnti }

// HostPorts returns the pod's normalised host ports in upstream order (4.6).
// The slice is internal and read-only: callers must not modify it.
func (p *PodInfo) HostPorts() []HostPort {
	if p == nil {
		return nil
	}
	if p.extra == nil {
		return nil
	}
	return p.extra.hostPorts
}

// PVCKeys returns "<namespace>/<claimName>" for each persistentVolumeClaim
// volume of the pod, duplicates kept (4.7). The slice is internal and
// read-only: callers must not modify it.
func (p *PodInfo) PVCKeys() []string {
	if p == nil {
		return nil
	}
	if p.extra == nil {
		return nil
	}
	return p.extra.pvcKeys
}

// PodHasAffinity reports whether pod qualifies for PodsWithAffinity:
// spec.affinity has podAffinity or podAntiAffinity set (4.8). False for nil.
func PodHasAffinity(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	a := pod.Spec.Affinity
	return a != nil && (a.PodAffinity != nil || a.PodAntiAffinity != nil)
}

// PodHasRequiredAntiAffinity reports whether pod qualifies for
// PodsWithRequiredAntiAffinity: a non-empty required podAntiAffinity term
// list (4.8). False for nil.
func PodHasRequiredAntiAffinity(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	a := pod.Spec.Affinity
	return a != nil && a.PodAntiAffinity != nil &&
		len(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution) != 0
}

// PodHasRequiredNonHostScopedAntiAffinity reports whether pod qualifies for
// PodsWithRequiredNonHostScopedAntiAffinity: some required podAntiAffinity
// term has a topology key other than kubernetes.io/hostname (4.8; upstream
// v1.37's podWithRequiredNonHostScopedAntiAffinity). A pod whose required
// terms are all hostname-scoped does not qualify; one with a hostname term
// and, say, a zone term does. False for nil.
//
// Upstream fills that sub-list only while its alpha feature gate
// InterPodAffinityHostnameFastPath is on (off by default in v1.37). This
// module has no feature gates: it always keeps the flag, the per-node
// sub-list and the snapshot's list, and an adapter shows them empty when
// the gate is off.
func PodHasRequiredNonHostScopedAntiAffinity(pod *v1.Pod) bool {
	if pod == nil {
		return false
	}
	a := pod.Spec.Affinity
	if a == nil || a.PodAntiAffinity == nil {
		return false
	}
	for i := range a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution {
		if a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution[i].TopologyKey != v1.LabelHostname {
			return true
		}
	}
	return false
}
