package fwkadapter

import (
	v1 "k8s.io/api/core/v1"
	schedulingv1alpha3 "k8s.io/api/scheduling/v1alpha3"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/podgroup"
)

// Groups is a podgroup.Table seen as upstream's pod-group listers and
// fwk.PodGroupManager: the four listers of fwk.SharedLister,
// BuildHierarchySnapshotFromPod and GetRootKeyForGroup, with upstream's
// error texts (a table in snapshot flavour answers as upstream's snapshot,
// one in cache flavour as its cache).
//
// Contract: a value over an immutable table; safe for concurrent use; no
// method blocks. The states it returns are shared and immutable; the
// sets and maps their methods return are the caller's.
type Groups struct {
	t podgroup.Table // immutable
}

var (
	_ fwk.PodGroupManager              = Groups{}
	_ fwk.PodGroupStateLister          = groupStates{}
	_ fwk.PodGroupLister               = groupObjects{}
	_ fwk.CompositePodGroupStateLister = compositeStates{}
	_ fwk.CompositePodGroupLister      = compositeObjects{}
	_ fwk.PodGroupState                = (*podgroup.State)(nil)
	_ fwk.CompositePodGroupState       = compositeState{}
)

// NewGroups returns t's listers.
func NewGroups(t podgroup.Table) Groups { return Groups{t: t} }

// Table returns the table g reads.
func (g Groups) Table() podgroup.Table { return g.t }

// PodGroupStates returns the pod-group state lister.
func (g Groups) PodGroupStates() fwk.PodGroupStateLister { return groupStates(g) }

// PodGroups returns the PodGroup lister.
func (g Groups) PodGroups() fwk.PodGroupLister { return groupObjects(g) }

// CompositePodGroupStates returns the composite pod-group state lister.
func (g Groups) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return compositeStates(g)
}

// CompositePodGroups returns the CompositePodGroup lister.
func (g Groups) CompositePodGroups() fwk.CompositePodGroupLister { return compositeObjects(g) }

// BuildHierarchySnapshotFromPod returns the hierarchy of pod's pod group
// (a snapshot's table returns itself, as upstream's snapshot does).
func (g Groups) BuildHierarchySnapshotFromPod(pod *v1.Pod) (fwk.PodGroupManager, error) {
	h, err := g.t.Hierarchy(pod)
	if err != nil {
		return nil, err
	}
	return Groups{t: h}, nil
}

// GetRootKeyForGroup returns the root of key's hierarchy.
func (g Groups) GetRootKeyForGroup(key fwk.EntityKey) (fwk.EntityKey, bool, error) {
	k, ok := toKey(key)
	if !ok {
		return fwk.EntityKey{}, false, &badKeyError{key: key}
	}
	root, found, err := g.t.RootKey(k)
	if err != nil || !found {
		return fwk.EntityKey{}, found, err
	}
	return fromKey(root), true, nil
}

// liveGroups is the pod-group listers of a source whose table changes (a
// refreshed Lister, a Mutable, a cache): each call reads the table now,
// as upstream's listers read the snapshot or cache they belong to, so a
// plugin may keep a lister it took before the cluster was loaded.
type liveGroups func() Groups

func (f liveGroups) PodGroupStates() fwk.PodGroupStateLister { return liveStates(f) }
func (f liveGroups) PodGroups() fwk.PodGroupLister           { return liveObjects(f) }
func (f liveGroups) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return liveCompositeStates(f)
}
func (f liveGroups) CompositePodGroups() fwk.CompositePodGroupLister { return liveCompositeObjects(f) }

type (
	liveStates           func() Groups
	liveObjects          func() Groups
	liveCompositeStates  func() Groups
	liveCompositeObjects func() Groups
)

func (f liveStates) Get(ns, name string) (fwk.PodGroupState, error) {
	return f().PodGroupStates().Get(ns, name)
}
func (f liveObjects) Get(ns, name string) (*schedulingv1beta1.PodGroup, error) {
	return f().PodGroups().Get(ns, name)
}
func (f liveCompositeStates) Get(ns, name string) (fwk.CompositePodGroupState, error) {
	return f().CompositePodGroupStates().Get(ns, name)
}
func (f liveCompositeObjects) Get(ns, name string) (*schedulingv1alpha3.CompositePodGroup, error) {
	return f().CompositePodGroups().Get(ns, name)
}

type groupStates Groups

func (l groupStates) Get(namespace, podGroupName string) (fwk.PodGroupState, error) {
	s, err := l.t.Get(namespace, podGroupName)
	if err != nil {
		return nil, err
	}
	return s, nil
}

type groupObjects Groups

func (l groupObjects) Get(namespace, name string) (*schedulingv1beta1.PodGroup, error) {
	return l.t.PodGroup(namespace, name)
}

type compositeStates Groups

func (l compositeStates) Get(namespace, name string) (fwk.CompositePodGroupState, error) {
	c, err := l.t.GetComposite(namespace, name)
	if err != nil {
		return nil, err
	}
	return compositeState{c}, nil
}

type compositeObjects Groups

func (l compositeObjects) Get(namespace, name string) (*schedulingv1alpha3.CompositePodGroup, error) {
	return l.t.CompositePodGroup(namespace, name)
}

// compositeState is a *podgroup.Composite as fwk.CompositePodGroupState.
type compositeState struct{ c *podgroup.Composite }

// GetChildren returns the keys of the composite's children (sorted).
func (s compositeState) GetChildren() []fwk.EntityKey {
	ks := s.c.Children()
	if len(ks) == 0 {
		return nil
	}
	out := make([]fwk.EntityKey, len(ks))
	for i, k := range ks {
		out[i] = fromKey(k)
	}
	return out
}

// Composite returns the schedcache composite state.
func (s compositeState) Composite() *podgroup.Composite { return s.c }

func fromKey(k podgroup.Key) fwk.EntityKey {
	switch k.Kind {
	case podgroup.PodGroupKind:
		return fwk.PodGroupKey(k.Namespace, k.Name)
	case podgroup.CompositeKind:
		return fwk.CompositePodGroupKey(k.Namespace, k.Name)
	}
	return fwk.EntityKey{Namespace: k.Namespace, Name: k.Name}
}

func toKey(k fwk.EntityKey) (podgroup.Key, bool) {
	switch k.Type {
	case fwk.PodGroupKeyType:
		return podgroup.PodGroupKey(k.Namespace, k.Name), true
	case fwk.CompositePodGroupKeyType:
		return podgroup.CompositeKey(k.Namespace, k.Name), true
	}
	return podgroup.Key{}, false
}

// badKeyError is GetRootKeyForGroup's error for a key of another type than
// a pod group's or a composite's, in upstream's words.
type badKeyError struct{ key fwk.EntityKey }

func (e *badKeyError) Error() string {
	return "pod key type not supported in snapshot GetRootKeyForGroup for " + e.key.String()
}

func (e *badKeyError) Unwrap() error { return podgroup.ErrBadKey }

// CacheGroups returns the pod groups of c as upstream's cache serves them
// to plugins (fwk.Handle.PodGroupManager): each call reads the cache's
// latest published table, lock-free, with the cache listers' error texts.
// Safe for concurrent use.
func CacheGroups(c *schedcache.Cache) fwk.PodGroupManager { return cacheGroups{c: c} }

type cacheGroups struct{ c *schedcache.Cache }

func (g cacheGroups) now() Groups { return NewGroups(g.c.PodGroups()) }

func (g cacheGroups) PodGroupStates() fwk.PodGroupStateLister {
	return liveGroups(g.now).PodGroupStates()
}
func (g cacheGroups) PodGroups() fwk.PodGroupLister { return liveGroups(g.now).PodGroups() }
func (g cacheGroups) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return liveGroups(g.now).CompositePodGroupStates()
}
func (g cacheGroups) CompositePodGroups() fwk.CompositePodGroupLister {
	return liveGroups(g.now).CompositePodGroups()
}
func (g cacheGroups) BuildHierarchySnapshotFromPod(pod *v1.Pod) (fwk.PodGroupManager, error) {
	return g.now().BuildHierarchySnapshotFromPod(pod)
}
func (g cacheGroups) GetRootKeyForGroup(key fwk.EntityKey) (fwk.EntityKey, bool, error) {
	return g.now().GetRootKeyForGroup(key)
}
