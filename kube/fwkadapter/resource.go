package fwkadapter

import (
	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/nodeinfo"
)

// Resource is a mutable amount of compute resources implementing
// fwk.Resource with upstream's rules (pkg/scheduler/framework.Resource). It
// is owned by whoever made it: not safe for concurrent mutation; no method
// blocks. MutableNodeInfo's aggregates and CalculateResource's results are
// Resources.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	AllowedPodNumber int
	ScalarResources  map[v1.ResourceName]int64 // nil until a scalar is set
}

var _ fwk.Resource = (*Resource)(nil)

// NewResource converts a schedcache Resource into a new mutable Resource.
func NewResource(r nodeinfo.Resource) *Resource {
	out := &Resource{}
	out.setFrom(r)
	return out
}

func (r *Resource) setFrom(s nodeinfo.Resource) {
	r.MilliCPU, r.Memory, r.EphemeralStorage = s.MilliCPU, s.Memory, s.EphemeralStorage
	r.AllowedPodNumber = int(s.AllowedPodNumber)
	r.ScalarResources = s.ScalarResources() // a fresh map, nil when none
}

// GetMilliCPU and the other getters return the fields (0 for a nil r).
func (r *Resource) GetMilliCPU() int64 {
	if r == nil {
		return 0
	}
	return r.MilliCPU
}

func (r *Resource) GetMemory() int64 {
	if r == nil {
		return 0
	}
	return r.Memory
}

func (r *Resource) GetEphemeralStorage() int64 {
	if r == nil {
		return 0
	}
	return r.EphemeralStorage
}

func (r *Resource) GetAllowedPodNumber() int {
	if r == nil {
		return 0
	}
	return r.AllowedPodNumber
}

// GetScalarResources returns the scalar map itself (upstream's contract).
func (r *Resource) GetScalarResources() map[v1.ResourceName]int64 {
	if r == nil {
		return nil
	}
	return r.ScalarResources
}

// SetMaxResource raises each field to the value of rl's entry, as
// upstream's (pods are ignored there too). A nil r does nothing.
func (r *Resource) SetMaxResource(rl v1.ResourceList) {
	if r == nil {
		return
	}
	for name, q := range rl {
		switch name {
		case v1.ResourceMemory:
			r.Memory = max(r.Memory, q.Value())
		case v1.ResourceCPU:
			r.MilliCPU = max(r.MilliCPU, q.MilliValue())
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage = max(r.EphemeralStorage, q.Value())
		default:
			if nodeinfo.IsScalarResourceName(name) {
				if r.ScalarResources == nil {
					r.ScalarResources = map[v1.ResourceName]int64{}
				}
				r.ScalarResources[name] = max(r.ScalarResources[name], q.Value())
			}
		}
	}
}

// Clone returns a deep copy of r.
func (r *Resource) Clone() *Resource {
	if r == nil {
		return &Resource{}
	}
	c := *r
	if r.ScalarResources != nil {
		c.ScalarResources = make(map[v1.ResourceName]int64, len(r.ScalarResources))
		for k, v := range r.ScalarResources {
			c.ScalarResources[k] = v
		}
	}
	return &c
}

// frozenResource is the read-only fwk.Resource of a published NodeInfo,
// safe for concurrent reads. SetMaxResource leaves it unchanged: published
// values are never modified (upstream's plugins call SetMaxResource only on
// Resources of their own); use Clone for a mutable copy.
type frozenResource struct{ r Resource }

var _ fwk.Resource = (*frozenResource)(nil)

func (f *frozenResource) GetMilliCPU() int64                            { return f.r.MilliCPU }
func (f *frozenResource) GetMemory() int64                              { return f.r.Memory }
func (f *frozenResource) GetEphemeralStorage() int64                    { return f.r.EphemeralStorage }
func (f *frozenResource) GetAllowedPodNumber() int                      { return f.r.AllowedPodNumber }
func (f *frozenResource) GetScalarResources() map[v1.ResourceName]int64 { return f.r.ScalarResources }

// SetMaxResource does nothing: the value is published and read-only.
func (f *frozenResource) SetMaxResource(v1.ResourceList) {}

// Clone returns a mutable copy.
func (f *frozenResource) Clone() *Resource { return f.r.Clone() }
