package fwkadapter

import (
	fwk "k8s.io/kube-scheduler/framework"

	"github.com/schedcache/schedcache/framework"
	"github.com/schedcache/schedcache/snapshot"
)

// Lister is a *snapshot.Snapshot seen as fwk.SharedLister: the same
// pointer under another type (NewLister), so it copies nothing.
//
// Contract: as the snapshot's. A Lister of a published snapshot (from
// Cache.Snapshot) is immutable and safe for any number of concurrent
// readers; no method blocks. Its node listers return read-only NodeInfo
// views (see NodeInfo). A Lister of a snapshot the caller refreshes with
// Cache.UpdateSnapshot must not be read during the refresh, as upstream's.
type Lister snapshot.Snapshot

var (
	_ fwk.SharedLister      = (*Lister)(nil)
	_ fwk.NodeInfoLister    = (*nodeLister)(nil)
	_ fwk.StorageInfoLister = (*storageLister)(nil)
)

// NewLister returns s as a fwk.SharedLister, or ErrNilSnapshot.
func NewLister(s *snapshot.Snapshot) (*Lister, error) {
	if s == nil {
		return nil, ErrNilSnapshot
	}
	return (*Lister)(s), nil
}

// Snapshot returns the snapshot l adapts.
func (l *Lister) Snapshot() *snapshot.Snapshot { return (*snapshot.Snapshot)(l) }

// NodeInfos returns the node lister.
func (l *Lister) NodeInfos() fwk.NodeInfoLister { return (*nodeLister)(l) }

// StorageInfos returns the storage lister.
func (l *Lister) StorageInfos() fwk.StorageInfoLister { return (*storageLister)(l) }

type nodeLister snapshot.Snapshot

func (l *nodeLister) snap() *snapshot.Snapshot { return (*snapshot.Snapshot)(l) }

// List returns the nodes in zone-interleaved order, as upstream's. It
// allocates the returned slice and nothing else.
func (l *nodeLister) List() ([]fwk.NodeInfo, error) {
	s := l.snap()
	if s == nil {
		return nil, ErrNilSnapshot
	}
	out := make([]fwk.NodeInfo, s.NumNodes())
	s.Range(func(i int, ni *framework.NodeInfo) bool {
		out[i] = (*NodeInfo)(ni)
		return true
	})
	return out, nil
}

func (l *nodeLister) HavePodsWithAffinityList() ([]fwk.NodeInfo, error) {
	s := l.snap()
	if s == nil {
		return nil, ErrNilSnapshot
	}
	list, err := s.HavePodsWithAffinityList()
	return wrapList(list), err
}

func (l *nodeLister) HavePodsWithRequiredAntiAffinityList() ([]fwk.NodeInfo, error) {
	s := l.snap()
	if s == nil {
		return nil, ErrNilSnapshot
	}
	list, err := s.HavePodsWithRequiredAntiAffinityList()
	return wrapList(list), err
}

// Get returns the node named name, or the snapshot's *NotFoundError.
func (l *nodeLister) Get(name string) (fwk.NodeInfo, error) {
	s := l.snap()
	if s == nil {
		return nil, ErrNilSnapshot
	}
	ni, err := s.Get(name)
	if err != nil {
		return nil, err
	}
	return (*NodeInfo)(ni), nil
}

func wrapList(list []*framework.NodeInfo) []fwk.NodeInfo {
	if list == nil {
		return nil
	}
	out := make([]fwk.NodeInfo, len(list))
	for i, ni := range list {
		out[i] = (*NodeInfo)(ni)
	}
	return out
}

type storageLister snapshot.Snapshot

// IsPVCUsedByPods reports whether a pod on a listed node uses the claim
// "namespace/name" (false for a nil snapshot).
func (l *storageLister) IsPVCUsedByPods(key string) bool {
	s := (*snapshot.Snapshot)(l)
	return s != nil && s.IsPVCUsedByPods(key)
}
