package podgroup

import (
	"slices"

	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"

	"github.com/schedcache/schedcache/internal/immutable"
)

// Table is the pod-group state of a scheduler cache, or of one of its
// snapshots: the States of the pod groups, the Composites of the composite
// pod groups, and the values of the two feature gates (GenericWorkload,
// CompositePodGroup) that decide which operations act. It is what
// upstream's cache keeps in podGroupStates and compositePodGroupStates
// (k8s.io/kubernetes v1.37.2, pkg/scheduler/backend/cache).
//
// Contract: a Table is an immutable value. Any number of goroutines may
// call its methods concurrently, and every read of one Table sees the same
// contents; no method blocks. Edit returns an Editor that builds a new
// Table sharing every unchanged State and Composite, and the unchanged
// parts of the changed ones, with this one: publishing each version in a
// snapshot copies nothing. Publishing a Table to another goroutine needs a
// happens-before edge (a channel, an atomic store, a mutex), as for any Go
// value. The zero Table is empty, with both gates off, in cache flavour.
//
// A Table has a flavour, cache or snapshot (AsSnapshot, Hierarchy), which
// only selects the texts its listers' errors carry (upstream's cache
// listers and snapshot listers word them differently, and its snapshot's
// state listers check no gate) and what Hierarchy does.
type Table struct {
	groups     immutable.Map[*State]     // mapKey(ns, name) -> State; immutable
	composites immutable.Map[*Composite] // mapKey(ns, name) -> Composite; immutable
	generic    bool                      // GenericWorkload gate; immutable
	composite  bool                      // CompositePodGroup gate; immutable
	snapshot   bool                      // snapshot flavour; immutable
}

// NewTable returns an empty Table in cache flavour with the given gates.
func NewTable(genericWorkload, compositePodGroup bool) Table {
	return Table{generic: genericWorkload, composite: compositePodGroup}
}

// GenericWorkloadEnabled returns the GenericWorkload gate.
func (t Table) GenericWorkloadEnabled() bool { return t.generic }

// CompositePodGroupEnabled returns the CompositePodGroup gate.
func (t Table) CompositePodGroupEnabled() bool { return t.composite }

// IsSnapshot reports whether t has the snapshot flavour.
func (t Table) IsSnapshot() bool { return t.snapshot }

// AsSnapshot returns t as upstream's Cache.UpdateSnapshot copies it into a
// Snapshot, in snapshot flavour: the pod groups only if GenericWorkload is
// on, the composite pod groups only if both gates are on. It copies
// nothing.
func (t Table) AsSnapshot() Table {
	s := t
	s.snapshot = true
	if !t.generic {
		s.groups = immutable.Map[*State]{}
	}
	if !t.generic || !t.composite {
		s.composites = immutable.Map[*Composite]{}
	}
	return s
}

// Len returns the number of pod groups.
func (t Table) Len() int { return t.groups.Len() }

// CompositeLen returns the number of composite pod groups.
func (t Table) CompositeLen() int { return t.composites.Len() }

// Range calls fn for each pod group, in an unspecified order, until fn
// returns false.
func (t Table) Range(fn func(*State) bool) {
	t.groups.Range(func(_ string, s *State) bool { return fn(s) })
}

// RangeComposites calls fn for each composite pod group, in an unspecified
// order, until fn returns false.
func (t Table) RangeComposites(fn func(*Composite) bool) {
	t.composites.Range(func(_ string, c *Composite) bool { return fn(c) })
}

// Lookup returns the state of pod group namespace/name and whether there is
// one, whatever the gates and the flavour.
func (t Table) Lookup(namespace, name string) (*State, bool) {
	return t.groups.Get(mapKey(namespace, name))
}

// LookupComposite returns the state of composite pod group namespace/name
// and whether there is one, whatever the gates and the flavour.
func (t Table) LookupComposite(namespace, name string) (*Composite, bool) {
	return t.composites.Get(mapKey(namespace, name))
}

// Get returns the state of pod group namespace/name: upstream's
// PodGroupStates().Get of the cache or, in snapshot flavour, of the
// snapshot (which checks no gate), with its error texts.
func (t Table) Get(namespace, name string) (*State, error) {
	key := PodGroupKey(namespace, name)
	if !t.snapshot && !t.generic {
		return nil, newError("Get", key, ErrGateDisabled, textGenericDisabled)
	}
	s, ok := t.Lookup(namespace, name)
	if !ok {
		return nil, newError("Get", key, ErrStateNotFound, "pod group state not found for pod group %s/%s", namespace, name)
	}
	return s, nil
}

// PodGroup returns the PodGroup object of pod group namespace/name:
// upstream's PodGroups().Get of the cache or, in snapshot flavour, of the
// snapshot, with its error texts.
func (t Table) PodGroup(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	key := PodGroupKey(namespace, name)
	if !t.generic {
		return nil, newError("PodGroup", key, ErrGateDisabled, textGenericDisabled)
	}
	s, ok := t.Lookup(namespace, name)
	if !ok {
		return nil, newError("PodGroup", key, ErrStateNotFound, "pod group state not found for pod group %s", key)
	}
	if s.pg == nil {
		return nil, newError("PodGroup", key, ErrObjectNotFound, "pod group object not found for pod group %s", key)
	}
	return s.pg, nil
}

// GetComposite returns the state of composite pod group namespace/name:
// upstream's CompositePodGroupStates().Get of the cache or, in snapshot
// flavour, of the snapshot (which checks no gate), with its error texts.
func (t Table) GetComposite(namespace, name string) (*Composite, error) {
	key := CompositeKey(namespace, name)
	if !t.snapshot && !t.composite {
		return nil, newError("GetComposite", key, ErrGateDisabled, textCompositeDisabled)
	}
	c, ok := t.LookupComposite(namespace, name)
	if !ok {
		if t.snapshot {
			return nil, newError("GetComposite", key, ErrStateNotFound, "composite pod group state not found for pod group %s/%s", namespace, name)
		}
		return nil, newError("GetComposite", key, ErrStateNotFound, "composite pod group state not found for composite pod group %s", key)
	}
	return c, nil
}

// CompositePodGroup returns the CompositePodGroup object of composite pod
// group namespace/name: upstream's CompositePodGroups().Get of the cache
// or, in snapshot flavour, of the snapshot, with its error texts.
func (t Table) CompositePodGroup(namespace, name string) (*schedulingv1alpha3.CompositePodGroup, error) {
	key := CompositeKey(namespace, name)
	if !t.composite {
		return nil, newError("CompositePodGroup", key, ErrGateDisabled, textCompositeDisabled)
	}
	c, ok := t.LookupComposite(namespace, name)
	switch {
	case !ok && t.snapshot:
		return nil, newError("CompositePodGroup", key, ErrStateNotFound, "composite pod group not found in snapshot: %v", key)
	case !ok:
		return nil, newError("CompositePodGroup", key, ErrStateNotFound, "composite pod group state not found for composite pod group %s", key)
	case c.cpg == nil && t.snapshot:
		return nil, newError("CompositePodGroup", key, ErrObjectNotFound, "composite pod group object not found for pod group %q", key)
	case c.cpg == nil:
		return nil, newError("CompositePodGroup", key, ErrObjectNotFound, "composite pod group object not found for composite pod group %s", key)
	}
	return c.cpg, nil
}

// RootKey returns the root of the hierarchy key belongs to, and true, as
// upstream's GetRootKeyForGroup: it follows the parents named by the API
// objects (a pod group's only if CompositePodGroup is on) until one names
// none. It returns false, and no error, if a group on the way has no state
// or no object. A cycle returns an error wrapping ErrCycle with upstream's
// text, the keys visited listed in visiting order (upstream's order is its
// set's). A key of an unknown kind returns ErrBadKey. Upstream bounds no
// depth here, and neither does RootKey.
func (t Table) RootKey(key Key) (Key, bool, error) {
	if key.Kind != PodGroupKind && key.Kind != CompositeKind {
		return Key{}, false, inputError("RootKey", key, ErrBadKey, "key "+key.String()+" is of an unknown kind")
	}
	cur := key
	var visited []Key
	for {
		if slices.Contains(visited, cur) {
			return Key{}, false, newError("RootKey", key, ErrCycle, "cycle detected in the hierarchy: %v", visited)
		}
		visited = append(visited, cur)
		if cur.Kind == PodGroupKind {
			s, ok := t.Lookup(cur.Namespace, cur.Name)
			if !ok || s.pg == nil {
				return Key{}, false, nil
			}
			if !t.composite || s.pg.Spec.ParentCompositePodGroupName == nil {
				return cur, true, nil
			}
			cur = CompositeKey(s.pg.Namespace, *s.pg.Spec.ParentCompositePodGroupName)
			continue
		}
		c, ok := t.LookupComposite(cur.Namespace, cur.Name)
		if !ok || c.cpg == nil {
			return Key{}, false, nil
		}
		if c.cpg.Spec.ParentCompositePodGroupName == nil {
			return cur, true, nil
		}
		cur = CompositeKey(c.cpg.Namespace, *c.cpg.Spec.ParentCompositePodGroupName)
	}
}

// maxParents is how many composite parents Hierarchy checks above a pod
// group: upstream's loop bound, WorkloadMaxTreeDepth-1.
const maxParents = schedulingv1alpha3.WorkloadMaxTreeDepth - 1

// Hierarchy returns, in snapshot flavour, the part of t that upstream's
// Cache.BuildHierarchySnapshotFromPod copies: the tree of pod groups and
// composite pod groups under the root of the hierarchy of pod's pod group.
// The result shares every State and Composite with t. Its errors are
// upstream's, with upstream's texts, but for two cases where upstream
// returns a tree that is not the hierarchy's: where the walk up from the
// pod group finds no root within WorkloadMaxTreeDepth-1 parents, Hierarchy
// returns an error wrapping ErrCycle if the walk came back to a parent it
// had seen, else ErrTooDeep (upstream returns the tree under whichever
// composite its walk stopped at). Children are visited in Children's
// order, so which of several errors of one tree is returned is fixed
// (upstream's depends on its sets' order).
//
// On a Table in snapshot flavour, Hierarchy returns t itself, as
// upstream's Snapshot.BuildHierarchySnapshotFromPod returns the snapshot.
// A nil pod returns ErrNilPod, a pod whose scheduling group names no pod
// group ErrNoPodGroupName.
func (t Table) Hierarchy(pod *v1.Pod) (Table, error) {
	const op = "Hierarchy"
	if pod == nil {
		return Table{}, inputError(op, Key{}, ErrNilPod, "nil pod")
	}
	if t.snapshot {
		return t, nil
	}
	sg := pod.Spec.SchedulingGroup
	if sg == nil {
		return Table{}, newError(op, Key{}, ErrNoSchedulingGroup, "pod has no scheduling group")
	}
	if sg.PodGroupName == nil {
		return Table{}, inputError(op, Key{}, ErrNoPodGroupName, "pod "+podName(pod)+": scheduling group has no pod group name")
	}
	cur := PodGroupKey(pod.Namespace, *sg.PodGroupName)
	s, ok := t.Lookup(cur.Namespace, cur.Name)
	if !ok {
		return Table{}, newError(op, cur, ErrStateNotFound, "pod group state not found for %s", cur)
	}
	if s.pg == nil {
		return Table{}, newError(op, cur, ErrObjectNotFound, "pod group object not found in state for %s", cur)
	}
	if t.composite && s.pg.Spec.ParentCompositePodGroupName != nil {
		cur = CompositeKey(pod.Namespace, *s.pg.Spec.ParentCompositePodGroupName)
		var up [maxParents]Key
		found := false
		for i := range maxParents {
			if slices.Contains(up[:i], cur) {
				return Table{}, newError(op, cur, ErrCycle, "cycle detected in composite pod group hierarchy: %s", cur)
			}
			up[i] = cur
			c, ok := t.LookupComposite(cur.Namespace, cur.Name)
			if !ok {
				return Table{}, newError(op, cur, ErrStateNotFound, "parent composite pod group state not found for %s", cur)
			}
			if c.cpg == nil {
				return Table{}, newError(op, cur, ErrObjectNotFound, "composite pod group object not found in state for %s", cur)
			}
			if c.cpg.Spec.ParentCompositePodGroupName == nil {
				found = true
				break
			}
			cur = CompositeKey(pod.Namespace, *c.cpg.Spec.ParentCompositePodGroupName)
		}
		if !found {
			if slices.Contains(up[:], cur) {
				return Table{}, newError(op, cur, ErrCycle, "cycle detected in composite pod group hierarchy: %s", cur)
			}
			return Table{}, newError(op, cur, ErrTooDeep,
				"podgroup: Hierarchy: no root within %d composite parents of %s: the hierarchy is deeper than WorkloadMaxTreeDepth (%d)",
				maxParents, PodGroupKey(pod.Namespace, *sg.PodGroupName), schedulingv1alpha3.WorkloadMaxTreeDepth)
		}
	}
	b := hierarchyBuilder{t: t, visited: make(map[Key]bool)}
	b.groups = immutable.Map[*State]{}.Edit()
	b.composites = immutable.Map[*Composite]{}.Edit()
	if err := b.visit(cur); err != nil {
		return Table{}, err
	}
	return Table{
		groups:     b.groups.Done(),
		composites: b.composites.Done(),
		generic:    t.generic,
		composite:  t.composite,
		snapshot:   true,
	}, nil
}

// hierarchyBuilder copies a subtree of t, as upstream's
// buildPodGroupStateSnapshotTree. Owned by one Hierarchy call.
type hierarchyBuilder struct {
	t          Table                            // the source; immutable
	visited    map[Key]bool                     // keys visited so far; owned by the call
	groups     *immutable.MapEditor[*State]     // the tree's groups; owned by the call
	composites *immutable.MapEditor[*Composite] // the tree's composites; owned by the call
}

// visit adds k and, for a composite, its subtree, depth first.
func (b *hierarchyBuilder) visit(k Key) error {
	const op = "Hierarchy"
	if b.visited[k] {
		return newError(op, k, ErrCycle, "cycle detected in composite pod group hierarchy: %s", k)
	}
	b.visited[k] = true
	mk := mapKey(k.Namespace, k.Name)
	switch k.Kind {
	case PodGroupKind:
		s, ok := b.t.groups.Get(mk)
		if !ok {
			return newError(op, k, ErrStateNotFound, "pod group state not found for %s", k)
		}
		b.groups.Set(mk, s)
	case CompositeKind:
		c, ok := b.t.composites.Get(mk)
		if !ok {
			return newError(op, k, ErrStateNotFound, "composite pod group state not found for %s", k)
		}
		b.composites.Set(mk, c)
		for _, child := range c.Children() {
			if err := b.visit(child); err != nil {
				return err
			}
		}
	}
	return nil
}

// Equal reports whether t and u have the same gates and flavour and hold
// the same *State and *Composite (by identity) under every key. It costs
// O(differences × log n): subtrees the two share are skipped.
func (t Table) Equal(u Table) bool {
	if t.generic != u.generic || t.composite != u.composite || t.snapshot != u.snapshot ||
		t.groups.Len() != u.groups.Len() || t.composites.Len() != u.composites.Len() {
		return false
	}
	same := true
	immutable.DiffMaps(t.groups, u.groups, func(string, *State, *State) { same = false })
	immutable.DiffMaps(t.composites, u.composites, func(string, *Composite, *Composite) { same = false })
	return same
}

// Diff calls groups(o, n) for every pod group whose *State differs between
// old and new, and composites(o, n) likewise; o or n is nil where the key
// is absent. Either function may be nil. The order is unspecified. It
// costs O(differences × log n): what a snapshot refresh needs to know.
func Diff(old, new Table, groups func(o, n *State), composites func(o, n *Composite)) {
	if groups != nil {
		immutable.DiffMaps(old.groups, new.groups, func(_ string, o, n *State) { groups(o, n) })
	}
	if composites != nil {
		immutable.DiffMaps(old.composites, new.composites, func(_ string, o, n *Composite) { composites(o, n) })
	}
}

// podName returns "namespace/name" of pod.
func podName(pod *v1.Pod) string { return pod.Namespace + "/" + pod.Name }
