package podgroup

import (
	"slices"
	"strings"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/schedcache/schedcache/internal/immutable"
)

// generation is the process-wide generation counter, as upstream's: every
// change to a State or a Composite takes the next value, so a group deleted
// and created again never gets a generation it had before.
var generation atomic.Int64

// nextGeneration returns the next generation number.
func nextGeneration() int64 { return generation.Add(1) }

// unit is the value of the maps that are sets.
type unit = struct{}

// State is the state of one pod group: its PodGroup object, if observed,
// and the pods that name it, in the four sets of upstream's
// podGroupStateData (pkg/scheduler/backend/cache/podgroupstate.go).
//
// Contract: a State is immutable. Any number of goroutines may call its
// methods concurrently; none blocks. An Editor never changes a State: it
// builds a new one, sharing the unchanged parts of the old one's maps, so
// a change costs O(log n) for a group of n pods. Methods that return sets,
// maps or slices return fresh ones the caller may change; the pods and the
// PodGroup they point to are the objects the table was given, shared, and
// nobody may change them (as upstream).
//
// A pod may sit in several of the sets at once, as upstream: adding an
// unassigned pod that was assumed or assigned leaves it there too.
type State struct {
	key Key   // immutable
	gen int64 // immutable
	// pg is the observed PodGroup object, nil if none (a State exists while
	// it has pods or an object). Immutable, shared.
	pg *schedulingv1beta1.PodGroup
	// all maps a pod's UID to the pod last added or updated. Immutable.
	all immutable.Map[*v1.Pod]
	// unscheduled holds the UIDs of the pods neither assumed nor assigned.
	// Immutable.
	unscheduled immutable.Map[unit]
	// assumed maps a UID to the pod as it was assumed. Immutable.
	assumed immutable.Map[*v1.Pod]
	// assigned holds the UIDs of the bound pods. Immutable.
	assigned immutable.Map[unit]
}

// Key returns the key of the group.
func (s *State) Key() Key { return s.key }

// Generation returns the generation of this version of the group: it
// changes whenever the group changes (whenever upstream bumps its
// generation, a removal of an absent pod included), taking a value no
// group had before.
func (s *State) Generation() int64 { return s.gen }

// PodGroup returns the PodGroup object, nil if none was observed (the
// state then exists for its pods).
func (s *State) PodGroup() *schedulingv1beta1.PodGroup { return s.pg }

// AllPods returns the UIDs of all the pods of the group.
func (s *State) AllPods() sets.Set[types.UID] {
	out := make(sets.Set[types.UID], s.all.Len())
	s.all.Range(func(k string, _ *v1.Pod) bool {
		out.Insert(types.UID(k))
		return true
	})
	return out
}

// AllPodsCount returns the number of pods of the group.
func (s *State) AllPodsCount() int { return s.all.Len() }

// UnscheduledPods returns the pods neither assumed nor assigned, keyed by
// pod name, as upstream (the argument of PodActivator.Activate). The pods
// are those last added or updated. Where two unscheduled pods share a name
// the one of the greater UID is returned (upstream: whichever its map
// iteration visits last).
func (s *State) UnscheduledPods() map[string]*v1.Pod {
	out := make(map[string]*v1.Pod, s.unscheduled.Len())
	s.unscheduled.Range(func(uid string, _ unit) bool {
		p, _ := s.all.Get(uid)
		if p == nil {
			return true // unreachable: every set is within all
		}
		if q, dup := out[p.Name]; !dup || q.UID < p.UID {
			out[p.Name] = p
		}
		return true
	})
	return out
}

// UnscheduledPodsCount returns the number of unscheduled pods.
func (s *State) UnscheduledPodsCount() int { return s.unscheduled.Len() }

// AssumedPods returns the UIDs of the assumed pods (passed Reserve).
func (s *State) AssumedPods() sets.Set[types.UID] {
	out := make(sets.Set[types.UID], s.assumed.Len())
	s.assumed.Range(func(k string, _ *v1.Pod) bool {
		out.Insert(types.UID(k))
		return true
	})
	return out
}

// AssumedPodsCount returns the number of assumed pods.
func (s *State) AssumedPodsCount() int { return s.assumed.Len() }

// AssignedPods returns the UIDs of the assigned (bound) pods.
func (s *State) AssignedPods() sets.Set[types.UID] {
	out := make(sets.Set[types.UID], s.assigned.Len())
	s.assigned.Range(func(k string, _ unit) bool {
		out.Insert(types.UID(k))
		return true
	})
	return out
}

// AssignedPodsCount returns the number of assigned pods.
func (s *State) AssignedPodsCount() int { return s.assigned.Len() }

// ScheduledPods returns the assigned pods (as last added or updated), by
// UID, then the assumed pods (as assumed), by UID: upstream's contents, in
// a fixed order (upstream's is its maps'). A pod both assigned and assumed
// is there twice, as upstream.
func (s *State) ScheduledPods() []*v1.Pod {
	out := make([]*v1.Pod, 0, s.assigned.Len()+s.assumed.Len())
	s.assigned.Range(func(uid string, _ unit) bool {
		p, _ := s.all.Get(uid)
		out = append(out, p)
		return true
	})
	n := len(out)
	s.assumed.Range(func(_ string, p *v1.Pod) bool {
		out = append(out, p)
		return true
	})
	byUID := func(a, b *v1.Pod) int { return strings.Compare(string(a.UID), string(b.UID)) }
	slices.SortFunc(out[:n], byUID)
	slices.SortFunc(out[n:], byUID)
	return out
}

// ScheduledPodsCount returns the number of assumed plus assigned pods (a
// pod in both counts twice, as upstream).
func (s *State) ScheduledPodsCount() int { return s.assumed.Len() + s.assigned.Len() }

// Pod returns the pod of UID uid as last added or updated, and whether the
// group has it.
func (s *State) Pod(uid types.UID) (*v1.Pod, bool) { return s.all.Get(string(uid)) }

// AssumedPod returns the pod of UID uid as it was assumed, and whether it
// is assumed.
func (s *State) AssumedPod(uid types.UID) (*v1.Pod, bool) { return s.assumed.Get(string(uid)) }

// IsUnscheduled reports whether the pod of UID uid is unscheduled.
func (s *State) IsUnscheduled(uid types.UID) bool {
	_, ok := s.unscheduled.Get(string(uid))
	return ok
}

// IsAssigned reports whether the pod of UID uid is assigned.
func (s *State) IsAssigned(uid types.UID) bool {
	_, ok := s.assigned.Get(string(uid))
	return ok
}

// RangePods calls fn for each pod of the group, as last added or updated,
// in an unspecified order, until fn returns false. It copies nothing.
func (s *State) RangePods(fn func(*v1.Pod) bool) {
	s.all.Range(func(_ string, p *v1.Pod) bool { return fn(p) })
}

// empty reports whether the group has neither pods nor a PodGroup object:
// the cache then drops it (upstream's podGroupStateData.empty).
func (s *State) empty() bool { return s.all.Len() == 0 && s.pg == nil }

// Composite is the state of one composite pod group: its
// CompositePodGroup object, if observed, and the keys of its children, the
// pod groups and composite pod groups that named it as their parent
// (upstream's compositePodGroupStateData).
//
// Contract: a Composite is immutable. Any number of goroutines may call
// its methods concurrently; none blocks. An Editor builds a new one for a
// change, sharing the unchanged part of the children map. Children
// returns a fresh slice; the CompositePodGroup object is shared and nobody
// may change it.
type Composite struct {
	key Key   // immutable
	gen int64 // immutable
	// cpg is the observed object, nil for a placeholder kept for its
	// children. Immutable, shared.
	cpg *schedulingv1alpha3.CompositePodGroup
	// children maps childKey(k) to k. Immutable.
	children immutable.Map[Key]
}

// Key returns the key of the composite pod group.
func (c *Composite) Key() Key { return c.key }

// Generation returns the generation of this version, as State.Generation.
func (c *Composite) Generation() int64 { return c.gen }

// CompositePodGroup returns the object, nil for a placeholder.
func (c *Composite) CompositePodGroup() *schedulingv1alpha3.CompositePodGroup { return c.cpg }

// Children returns the keys of the children, sorted by kind (pod groups
// first), namespace and name; upstream's order is its set's.
func (c *Composite) Children() []Key {
	out := make([]Key, 0, c.children.Len())
	c.children.Range(func(_ string, k Key) bool {
		out = append(out, k)
		return true
	})
	slices.SortFunc(out, compareKeys)
	return out
}

// ChildrenCount returns the number of children.
func (c *Composite) ChildrenCount() int { return c.children.Len() }

// HasChild reports whether k is a child.
func (c *Composite) HasChild(k Key) bool {
	_, ok := c.children.Get(childKey(k))
	return ok
}

// empty reports whether the composite has neither an object nor children.
func (c *Composite) empty() bool { return c.cpg == nil && c.children.Len() == 0 }
