package nodeinfo

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
)

// ScalarQuantity is a plain value, safe to copy and share: the amount of one
// scalar resource (extended resources, hugepages-*, *kubernetes.io/*,
// attachable-volumes-*) in the resource's base unit, rounded up.
type ScalarQuantity struct {
	Name  v1.ResourceName
	Value int64
}

// Resource is a plain value, safe to copy and to read from any goroutine;
// no method blocks or mutates it. It is an amount of compute resources
// (upstream framework.Resource). Its scalars are held in an unexported slice
// that is sorted by name and never mutated after construction, so copies
// share it safely; accessors that return slices or maps return fresh copies.
type Resource struct {
	MilliCPU         int64
	Memory           int64
	EphemeralStorage int64
	AllowedPodNumber int64

	// scalars is sorted by Name with unique names, nil when empty, and
	// immutable: whoever builds the Resource hands it over for good.
	// Zero-valued entries are kept (upstream never deletes scalar keys).
	scalars []ScalarQuantity
}

// Scalar returns the value of the scalar resource name, 0 if absent.
func (r Resource) Scalar(name v1.ResourceName) int64 {
	if i, ok := findScalar(r.scalars, name); ok {
		return r.scalars[i].Value
	}
	return 0
}

// HasScalar reports whether name is a key of the scalar resources, even
// with a zero value.
func (r Resource) HasScalar(name v1.ResourceName) bool {
	_, ok := findScalar(r.scalars, name)
	return ok
}

// NumScalars returns the number of scalar keys, zero-valued ones included.
func (r Resource) NumScalars() int { return len(r.scalars) }

// Scalars returns a fresh copy of the scalar resources sorted by name, nil
// if there are none.
func (r Resource) Scalars() []ScalarQuantity {
	if len(r.scalars) == 0 {
		return nil
	}
	return slices.Clone(r.scalars)
}

// ScalarResources returns the scalar resources as a fresh map (upstream's
// ScalarResources field), nil if there are none.
func (r Resource) ScalarResources() map[v1.ResourceName]int64 {
	if len(r.scalars) == 0 {
		return nil
	}
	m := make(map[v1.ResourceName]int64, len(r.scalars))
	for _, s := range r.scalars {
		m[s.Name] = s.Value
	}
	return m
}

// WithScalar returns a copy of r whose scalar name is set to value (the key
// is added if absent). r is not modified.
func (r Resource) WithScalar(name v1.ResourceName, value int64) Resource {
	i, ok := findScalar(r.scalars, name)
	if ok {
		r.scalars = slices.Clone(r.scalars)
		r.scalars[i].Value = value
		return r
	}
	out := make([]ScalarQuantity, 0, len(r.scalars)+1)
	out = append(out, r.scalars[:i]...)
	out = append(out, ScalarQuantity{Name: name, Value: value})
	r.scalars = append(out, r.scalars[i:]...)
	return r
}

// Equal reports whether r and o hold the same amounts and the same scalar
// keys (a zero-valued key differs from an absent one, as in upstream maps).
func (r Resource) Equal(o Resource) bool {
	return r.MilliCPU == o.MilliCPU && r.Memory == o.Memory &&
		r.EphemeralStorage == o.EphemeralStorage && r.AllowedPodNumber == o.AllowedPodNumber &&
		slices.Equal(r.scalars, o.scalars)
}

// String formats r for logs and test failures.
func (r Resource) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "{MilliCPU:%d Memory:%d EphemeralStorage:%d AllowedPodNumber:%d",
		r.MilliCPU, r.Memory, r.EphemeralStorage, r.AllowedPodNumber)
	if len(r.scalars) > 0 {
		b.WriteString(" Scalars:[")
		for i, s := range r.scalars {
			if i > 0 {
				b.WriteByte(' ')
			}
			fmt.Fprintf(&b, "%s:%d", s.Name, s.Value)
		}
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.String()
}

// NewResource converts a resource list (semantics 4.4): cpu to MilliCPU,
// memory, ephemeral-storage and pods to their fields, scalar names
// (IsScalarResourceName) to scalars, every value rounded up; other names
// are dropped. Values beyond the int64 range saturate (upstream wraps). It
// is pure and safe for concurrent use.
func NewResource(rl v1.ResourceList) Resource {
	var r Resource
	for name, q := range rl {
		switch name {
		case v1.ResourceCPU:
			r.MilliCPU = ceilMilli(&q)
		case v1.ResourceMemory:
			r.Memory = ceilValue(&q)
		case v1.ResourcePods:
			r.AllowedPodNumber = ceilValue(&q)
		case v1.ResourceEphemeralStorage:
			r.EphemeralStorage = ceilValue(&q)
		default:
			if IsScalarResourceName(name) {
				if r.scalars == nil {
					r.scalars = make([]ScalarQuantity, 0, len(rl))
				}
				r.scalars = append(r.scalars, ScalarQuantity{Name: name, Value: ceilValue(&q)})
			}
		}
	}
	sortScalars(r.scalars)
	return r
}

func sortScalars(s []ScalarQuantity) {
	if len(s) > 1 {
		slices.SortFunc(s, func(a, b ScalarQuantity) int { return strings.Compare(string(a.Name), string(b.Name)) })
	}
}

// findScalar binary-searches the sorted s for name.
func findScalar(s []ScalarQuantity, name v1.ResourceName) (int, bool) {
	return slices.BinarySearchFunc(s, name, func(e ScalarQuantity, n v1.ResourceName) int {
		return strings.Compare(string(e.Name), string(n))
	})
}

// IsScalarResourceName reports whether name is kept as a scalar resource:
// exactly upstream schedutil.IsScalarResourceName (extended resource names,
// hugepages-*, names containing kubernetes.io/, attachable-volumes-*). It is
// pure and safe for concurrent use.
func IsScalarResourceName(name v1.ResourceName) bool {
	s := string(name)
	return strings.HasPrefix(s, v1.ResourceHugePagesPrefix) ||
		strings.Contains(s, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, v1.ResourceAttachableVolumesPrefix) ||
		isExtendedResourceName(s)
}

// isExtendedResourceName is upstream v1helper.IsExtendedResourceName: a
// name that is not native (has a '/', no kubernetes.io/), has no
// "requests." prefix, and is a qualified name once "requests." is prepended.
func isExtendedResourceName(s string) bool {
	if !strings.Contains(s, "/") || strings.Contains(s, v1.ResourceDefaultNamespacePrefix) ||
		strings.HasPrefix(s, v1.DefaultResourceRequestsPrefix) {
		return false
	}
	if v, ok := extendedNames.Load(s); ok {
		return v.(bool)
	}
	ok := len(content.IsLabelKey(v1.DefaultResourceRequestsPrefix+s)) == 0
	if extendedNamesLen.Add(1) <= maxExtendedNames {
		extendedNames.Store(s, ok)
	}
	return ok
}

// extendedNames memoises the regexp-based validation of extended resource
// names (a pure function of the name); at most maxExtendedNames entries are
// stored so hostile input cannot grow it without bound.
var (
	extendedNames    sync.Map // string -> bool
	extendedNamesLen atomic.Int64
)

const maxExtendedNames = 4096

// ceilMilli is q.MilliValue() (ceil(q*1000)) saturated to the int64 range.
func ceilMilli(q *resource.Quantity) int64 { return ceilScaled(q, resource.Milli) }

// ceilValue is q.Value() (ceil(q)) saturated to the int64 range.
func ceilValue(q *resource.Quantity) int64 { return ceilScaled(q, 0) }

// ceilScaled returns q.ScaledValue(scale) when that is exact, and the
// saturated bound of q's sign when q does not fit an int64 at scale
// (upstream silently returns 0 or a wrapped value there).
func ceilScaled(q *resource.Quantity, scale resource.Scale) int64 {
	v := q.ScaledValue(scale)
	f := q.AsApproximateFloat64()
	if scale == resource.Milli {
		f *= 1000
	}
	if f < 4e18 && f > -4e18 {
		return v
	}
	// Slow path near or past the int64 bounds: accept v iff |q - v| < 1
	// unit, computed in exact decimal arithmetic.
	diff := q.DeepCopy()
	diff.Sub(*resource.NewScaledQuantity(v, scale))
	one := resource.NewScaledQuantity(1, scale)
	minusOne := resource.NewScaledQuantity(-1, scale)
	if diff.Cmp(*one) < 0 && diff.Cmp(*minusOne) > 0 {
		return v
	}
	if q.Sign() < 0 {
		return math.MinInt64
	}
	return math.MaxInt64
}
