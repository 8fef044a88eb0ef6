package fwkadapter

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/nodeinfo"
)

func init() { nodeinfo.SetPodExtension(podExtension) }

// PodInfo is a *nodeinfo.PodInfo seen as fwk.PodInfo: the same pointer
// under another type (WrapPod), so wrapping allocates nothing. It is
// immutable and safe for concurrent use; the slices it returns are shared
// and must not be modified.
type PodInfo nodeinfo.PodInfo

var _ fwk.PodInfo = (*PodInfo)(nil)

// WrapPod returns p as a fwk.PodInfo; nil for nil.
func WrapPod(p *nodeinfo.PodInfo) fwk.PodInfo {
	if p == nil {
		return nil
	}
	return (*PodInfo)(p)
}

// Unwrap returns the schedcache PodInfo.
func (p *PodInfo) Unwrap() *nodeinfo.PodInfo { return (*nodeinfo.PodInfo)(p) }

// GetPod returns the pod (nil for a nil p). Callers must not mutate it.
func (p *PodInfo) GetPod() *v1.Pod { return p.Unwrap().Pod() }

// podTerms is the parsed affinity of one pod, as upstream's PodInfo holds
// it; immutable.
type podTerms struct {
	requiredAffinity  []fwk.AffinityTerm
	requiredAnti      []fwk.AffinityTerm
	preferredAffinity []fwk.WeightedAffinityTerm
	preferredAnti     []fwk.WeightedAffinityTerm
	err               error // the parse errors upstream's NewPodInfo returns (and its cache ignores)
}

// podExtension is registered with nodeinfo.SetPodExtension: NewPodInfo
// calls it on the caller's goroutine. Pods without pod (anti-)affinity,
// which have no terms, cost one nil check.
func podExtension(pod *v1.Pod) any {
	if pod == nil || pod.Spec.Affinity == nil ||
		(pod.Spec.Affinity.PodAffinity == nil && pod.Spec.Affinity.PodAntiAffinity == nil) {
		return nil
	}
	return parseTerms(pod)
}

// parseTerms is upstream's PodInfo.Update for a new pod: a category whose
// selectors fail to parse is nil, the others are kept.
func parseTerms(pod *v1.Pod) *podTerms {
	t := &podTerms{}
	var preferredAffinity, preferredAnti []v1.WeightedPodAffinityTerm
	if a := pod.Spec.Affinity; a != nil {
		if a.PodAffinity != nil {
			preferredAffinity = a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		}
		if a.PodAntiAffinity != nil {
			preferredAnti = a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution
		}
	}
	var errs []error
	var err error
	if t.requiredAffinity, err = fwk.GetAffinityTerms(pod, fwk.GetPodAffinityTerms(pod.Spec.Affinity)); err != nil {
		errs = append(errs, fmt.Errorf("requiredAffinityTerms: %w", err))
	}
	if t.requiredAnti, err = fwk.GetAffinityTerms(pod, fwk.GetPodAntiAffinityTerms(pod.Spec.Affinity)); err != nil {
		errs = append(errs, fmt.Errorf("requiredAntiAffinityTerms: %w", err))
	}
	if t.preferredAffinity, err = fwk.GetWeightedAffinityTerms(pod, preferredAffinity); err != nil {
		errs = append(errs, fmt.Errorf("preferredAffinityTerms: %w", err))
	}
	if t.preferredAnti, err = fwk.GetWeightedAffinityTerms(pod, preferredAnti); err != nil {
		errs = append(errs, fmt.Errorf("preferredAntiAffinityTerms: %w", err))
	}
	t.err = utilerrors.NewAggregate(errs)
	return t
}

var noTerms = &podTerms{}

// terms returns the pod's parsed terms: the extension NewPodInfo stored,
// or, for a PodInfo built before this package's init registered it, a
// fresh parse (correct, not memoised).
func (p *PodInfo) terms() *podTerms {
	fp := p.Unwrap()
	if !fp.HasAffinity() { // a field of the PodInfo: most pods stop here
		return noTerms
	}
	if t, ok := fp.Extension().(*podTerms); ok {
		return t
	}
	return parseTerms(fp.Pod())
}

// AffinityParseError returns the error upstream's NewPodInfo reports for
// the pod's affinity selectors (nil when they parse); the terms of a
// category that failed are nil, as upstream's.
func (p *PodInfo) AffinityParseError() error { return p.terms().err }

func (p *PodInfo) GetRequiredAffinityTerms() []fwk.AffinityTerm { return p.terms().requiredAffinity }
func (p *PodInfo) GetRequiredAntiAffinityTerms() []fwk.AffinityTerm {
	return p.terms().requiredAnti
}
func (p *PodInfo) GetPreferredAffinityTerms() []fwk.WeightedAffinityTerm {
	return p.terms().preferredAffinity
}
func (p *PodInfo) GetPreferredAntiAffinityTerms() []fwk.WeightedAffinityTerm {
	return p.terms().preferredAnti
}

// CalculateResource returns the pod's requests (a new mutable Resource)
// and non-zero cpu and memory, computed once by NewPodInfo.
func (p *PodInfo) CalculateResource() fwk.PodResource {
	fp := p.Unwrap()
	return fwk.PodResource{Resource: NewResource(fp.Requests()), Non0CPU: fp.NonZeroCPU(), Non0Mem: fp.NonZeroMemory()}
}
