package fwkadapter

import (
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
)

// Lister is a *snapshot.Snapshot seen as fwk.SharedLister. It copies
// nothing of the snapshot; it keeps the last list it returned and returns
// it again, in O(1), while the snapshot's ListKey is unchanged, so a
// long-lived Lister over a snapshot refreshed with Cache.UpdateSnapshot
// (upstream's pattern: plugins keep the lister they were built with)
// allocates a list only after a change, as upstream's snapshot keeps its
// list.
//
// Contract: safe for concurrent use; no method blocks. Over a published
// snapshot (from Cache.Snapshot) any number of goroutines may read it for
// as long as they like. A Lister of a snapshot the caller refreshes with
// Cache.UpdateSnapshot must not be read during the refresh, as upstream's.
// Lists and NodeInfo views are shared: callers must not modify them.
type Lister struct {
	snap *snapshot.Snapshot // immutable
	// last holds the last result of List, HavePodsWithAffinityList,
	// HavePodsWithRequiredAntiAffinityList and
	// HavePodsWithRequiredNonHostScopedAntiAffinityList; atomic.
	last [4]atomic.Pointer[listMemo]
}

// Indexes of Lister.last.
const (
	listAll = iota
	listAffinity
	listAntiAffinity
	listNonHost
)

// hostnameFastPath mirrors upstream's InterPodAffinityHostnameFastPath
// feature gate (alpha in v1.37, off by default): while it is off, the
// non-host-scoped anti-affinity lists read empty, as upstream's.
var hostnameFastPath atomic.Bool

// SetHostnameFastPath turns the non-host-scoped anti-affinity lists on or
// off for every NodeInfo and lister of the process, as upstream's
// InterPodAffinityHostnameFastPath gate does; set it with the gate.
func SetHostnameFastPath(on bool) { hostnameFastPath.Store(on) }

// listMemo is one List() result and the key of the list it was built
// from; immutable.
type listMemo struct {
	key  snapshot.ListKey
	list []fwk.NodeInfo
}

var (
	_ fwk.SharedLister      = (*Lister)(nil)
	_ fwk.NodeInfoLister    = (*nodeLister)(nil)
	_ fwk.StorageInfoLister = (*storageLister)(nil)
)

// NewLister returns s as a fwk.SharedLister, or ErrNilSnapshot. It calls
// Enable.
func NewLister(s *snapshot.Snapshot) (*Lister, error) {
	if s == nil {
		return nil, ErrNilSnapshot
	}
	Enable()
	return &Lister{snap: s}, nil
}

// Snapshot returns the snapshot l adapts (nil for a nil l).
func (l *Lister) Snapshot() *snapshot.Snapshot {
	if l == nil {
		return nil
	}
	return l.snap
}

// NodeInfos returns the node lister.
func (l *Lister) NodeInfos() fwk.NodeInfoLister { return (*nodeLister)(l) }

// StorageInfos returns the storage lister.
func (l *Lister) StorageInfos() fwk.StorageInfoLister { return (*storageLister)(l) }

// groups returns the listers of the snapshot's pod groups.
func (l *Lister) groups() Groups { return NewGroups(l.snap.PodGroups()) }

// PodGroupStates returns the snapshot's pod-group state lister.
func (l *Lister) PodGroupStates() fwk.PodGroupStateLister {
	return liveGroups(l.groups).PodGroupStates()
}

// PodGroups returns the snapshot's PodGroup lister.
func (l *Lister) PodGroups() fwk.PodGroupLister { return liveGroups(l.groups).PodGroups() }

// CompositePodGroupStates returns the snapshot's composite pod-group
// state lister.
func (l *Lister) CompositePodGroupStates() fwk.CompositePodGroupStateLister {
	return liveGroups(l.groups).CompositePodGroupStates()
}

// CompositePodGroups returns the snapshot's CompositePodGroup lister.
func (l *Lister) CompositePodGroups() fwk.CompositePodGroupLister {
	return liveGroups(l.groups).CompositePodGroups()
}

// BuildHierarchySnapshotFromPod returns l, as upstream's snapshot does.
func (l *Lister) BuildHierarchySnapshotFromPod(pod *v1.Pod) (fwk.PodGroupManager, error) {
	return l, nil
}

// GetRootKeyForGroup returns the root of key's pod-group hierarchy.
func (l *Lister) GetRootKeyForGroup(key fwk.EntityKey) (fwk.EntityKey, bool, error) {
	return l.groups().GetRootKeyForGroup(key)
}

type nodeLister Lister

func (l *nodeLister) snapshot() *snapshot.Snapshot { return (*Lister)(l).Snapshot() }

// List returns the nodes in zone-interleaved order, as upstream's: the
// previous result, in O(1), if the snapshot's ListKey is unchanged (plugins
// such as ImageLocality call List() once per node they score), else a new
// slice. Callers must not modify it.
func (l *nodeLister) List() ([]fwk.NodeInfo, error) {
	return l.memo(listAll, func(s *snapshot.Snapshot) []fwk.NodeInfo {
		out := make([]fwk.NodeInfo, s.NumNodes())
		s.Range(func(i int, ni *nodeinfo.NodeInfo) bool {
			out[i] = (*NodeInfo)(ni)
			return true
		})
		return out
	})
}

// HavePodsWithAffinityList returns the nodes with pods with pod affinity or
// anti-affinity, in list order, kept as List's.
func (l *nodeLister) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	return l.memo(listAffinity, func(s *snapshot.Snapshot) []fwk.NodeInfo {
		list, _ := s.HavePodsWithAffinityList() // never fails
		return wrapList(list)
	})
}

// HavePodsWithRequiredAntiAffinityList returns the nodes with pods with
// required anti-affinity, in list order, kept as List's.
func (l *nodeLister) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	return l.memo(listAntiAffinity, func(s *snapshot.Snapshot) []fwk.NodeInfo {
		list, _ := s.HavePodsWithRequiredAntiAffinityList() // never fails
		return wrapList(list)
	})
}

// HavePodsWithRequiredNonHostScopedAntiAffinityList returns the nodes
// with pods with a required anti-affinity term whose topology key is not
// the hostname, in list order; empty unless the hostname fast path is on
// (SetHostnameFastPath), as upstream's.
func (l *nodeLister) HavePodsWithRequiredNonHostScopedAntiAffinityList() ([]fwk.NodeInfo, error) {
	if !hostnameFastPath.Load() {
		if l.snapshot() == nil {
			return nil, ErrNilSnapshot
		}
		return []fwk.NodeInfo{}, nil
	}
	return l.memo(listNonHost, func(s *snapshot.Snapshot) []fwk.NodeInfo {
		list, _ := s.HavePodsWithRequiredNonHostScopedAntiAffinityList() // never fails
		if list == nil {
			return []fwk.NodeInfo{}
		}
		return wrapList(list)
	})
}

// memo returns the list kept in slot i if the snapshot's ListKey is the
// one it was built for (equal keys: the same NodeInfos in the same order,
// hence the same affinity lists), else builds, keeps and returns a new one.
func (l *nodeLister) memo(i int, build func(*snapshot.Snapshot) []fwk.NodeInfo) ([]fwk.NodeInfo, error) {
	s := l.snapshot()
	if s == nil {
		return nil, ErrNilSnapshot
	}
	key := s.ListKey()
	if last := l.last[i].Load(); last != nil && last.key == key {
		return last.list, nil
	}
	m := &listMemo{key: key, list: build(s)}
	l.last[i].Store(m)
	return m.list, nil
}

// Get returns the node named name, or the snapshot's *NotFoundError.
func (l *nodeLister) Get(name string) (fwk.NodeInfo, error) {
	s := l.snapshot()
	if s == nil {
		return nil, ErrNilSnapshot
	}
	ni, err := s.Get(name)
	if err != nil {
		return nil, err
	}
	return (*NodeInfo)(ni), nil
}

func wrapList(list []*nodeinfo.NodeInfo) []fwk.NodeInfo {
	if list == nil {
		return nil
	}
	out := make([]fwk.NodeInfo, len(list))
	for i, ni := range list {
		out[i] = (*NodeInfo)(ni)
	}
	return out
}

type storageLister Lister

// IsPVCUsedByPods reports whether a pod on a listed node uses the claim
// "namespace/name" (false for a nil snapshot).
func (l *storageLister) IsPVCUsedByPods(key string) bool {
	s := (*Lister)(l).Snapshot()
	return s != nil && s.IsPVCUsedByPods(key)
}
