package snapshot

import (
	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/podgroup"
)

// PVC reference counts, as upstream v1.37.2 keeps them.
//
// Upstream's snapshot holds usedPVCRefCounts: for each claim, the number of
// pods on listed nodes that reference it, summed when it rebuilds its lists
// from the zone tree. Between two such rebuilds it does not recount: the
// cache accumulates one pending delta, every change of any entry's counts
// (a nodeless entry's included, and RemoveNode's subtraction of the
// entry's counts), and the next UpdateSnapshot adds it to the snapshot's
// counts and clears it. A count below zero makes that refresh rebuild
// every list from the tree; a count of zero removes the claim.
//
// The pending delta is one per cache: with several snapshots, the first
// refresh consumes it. schedcache gives every snapshot what it would see
// were it the only one: the core keeps the running sum of the delta
// (pvcCum, never cleared), and a refreshed snapshot adds the difference
// between the sum now and the sum at its own last refresh. With one
// snapshot, as upstream's scheduler has, the counts are upstream's.

// refLive is the long-lived part of a refreshed snapshot's PVC state.
// Owned with the snapshot.
type refLive struct {
	counts immutable.Map[int32] // claim -> references counted (> 0 only)
}

// sumListed returns the claims referenced by the pods of the nodes of
// order, each counted once per referencing pod volume and once per
// occurrence of its node in order: upstream's rebuild.
func sumListed(order []int32, node func(slot int32) *nodeinfo.NodeInfo) immutable.Map[int32] {
	return sumNodes(order, node, nil)
}

// sumDistinct is sumListed counting a node the tree lists twice once: the
// base of a fork's counts, which move by pod from then on and must reach
// 0 with the node's last claim, as a recount would (only whether a count
// is above 0 shows).
func sumDistinct(order []int32, node func(slot int32) *nodeinfo.NodeInfo) immutable.Map[int32] {
	pos, dup := positions(order)
	if !dup {
		return sumNodes(order, node, nil)
	}
	return sumNodes(order, node, func(i int, slot int32) bool { return pos[slot] == int32(i) })
}

func sumNodes(order []int32, node func(slot int32) *nodeinfo.NodeInfo, keep func(i int, slot int32) bool) immutable.Map[int32] {
	e := immutable.Map[int32]{}.Edit()
	for i, slot := range order {
		if keep != nil && !keep(i, slot) {
			continue
		}
		ni := node(slot)
		if ni == nil {
			continue
		}
		ni.RangePVCRefCounts(func(k string, n int) bool {
			c, _ := e.Get(k)
			e.Set(k, c+int32(n))
			return true
		})
	}
	return e.Done()
}

// applyPVCDelta adds to counts the change of the running sum from was to
// now. ok is false if some count went below zero: upstream then rebuilds
// its lists (and counts) from the tree. changed receives each claim whose
// count changed.
func applyPVCDelta(counts immutable.Map[int32], was, now immutable.Map[int64], changed func(k string, used bool)) (out immutable.Map[int32], ok bool) {
	e := counts.Edit()
	ok = true
	immutable.DiffMaps(was, now, func(k string, x, y int64) {
		if !ok || x == y {
			return
		}
		c, _ := e.Get(k)
		v := int64(c) + (y - x)
		switch {
		case v < 0:
			ok = false
		case v == 0:
			e.Delete(k)
			changed(k, false)
		default:
			e.Set(k, int32(v))
			changed(k, true)
		}
	})
	return e.Done(), ok
}

// aux holds what a snapshot carries beside its nodes and pods and changes
// rarely: the running sum of the pending PVC delta and the pod-group
// table. Immutable; shared by every snapshot until one of them changes.
type aux struct {
	// pvcCum: published snapshots: claim -> cumulative change of the
	// cache's PVC reference counts (upstream's pending delta, never
	// cleared); a refreshed snapshot: the value at its last refresh.
	pvcCum immutable.Map[int64]
	groups podgroup.Table // the pod groups (podgroup.Table: structurally shared)
}

// cumOf returns s's running sum of the pending PVC delta.
func cumOf(s *Snapshot) immutable.Map[int64] {
	if s.aux == nil {
		return immutable.Map[int64]{}
	}
	return s.aux.pvcCum
}

// auxOf returns a copy of s's extras to change (zero without any).
func auxOf(s *Snapshot) aux {
	if s.aux == nil {
		return aux{}
	}
	return *s.aux
}

// PodGroups returns the snapshot's pod groups and composite pod groups:
// an immutable table (its gates are the cache's; empty when they are
// off), shared with the cache's later snapshots wherever unchanged.
//
// As upstream's UpdateSnapshot, which copies the pod groups after its
// node-list check, a snapshot whose list is inconsistent (Err) shows the
// pod groups of its last consistent refresh: none for a published one.
func (s *Snapshot) PodGroups() podgroup.Table {
	t := s.CacheGroups()
	if s.ll == nil && s.lists().err != nil {
		return podgroup.NewTable(t.GenericWorkloadEnabled(), t.CompositePodGroupEnabled()).AsSnapshot()
	}
	return t.AsSnapshot()
}

// WithPodGroups returns a copy of s (O(1)) carrying the pod groups t, as
// upstream's NewTestSnapshotWithPodGroups builds a snapshot with groups;
// for snapshots built with NewSnapshot. s is not changed.
func (s *Snapshot) WithPodGroups(t podgroup.Table) *Snapshot {
	c := *s
	a := auxOf(s)
	a.groups = t
	c.aux = &a
	return &c
}

// CacheGroups is PodGroups in the cache's flavour: what upstream's
// cache-level listers answer (their error texts), every group whatever
// the gates.
func (s *Snapshot) CacheGroups() podgroup.Table {
	if s.aux == nil {
		return podgroup.Table{}
	}
	return s.aux.groups
}

// positiveOrNone returns cum as counts, or none if some is below zero.
func positiveOrNone(cum immutable.Map[int64]) immutable.Map[int32] {
	e := immutable.Map[int32]{}.Edit()
	neg := false
	cum.Range(func(k string, v int64) bool {
		if v < 0 {
			neg = true
			return false
		}
		if v > 0 {
			e.Set(k, int32(v))
		}
		return true
	})
	if neg {
		return immutable.Map[int32]{}
	}
	return e.Done()
}

// usedFrom returns the used-PVC set of counts: the claims counted above 0.
func usedFrom(counts immutable.Map[int32]) immutable.Map[struct{}] {
	e := immutable.Map[struct{}]{}.Edit()
	counts.Range(func(k string, n int32) bool {
		if n > 0 {
			e.Set(k, struct{}{})
		}
		return true
	})
	return e.Done()
}

// PVCRefCount returns the number of references to claim key the snapshot
// counts (upstream's usedPVCRefCounts[key]); IsPVCUsedByPods is
// PVCRefCount > 0. For a snapshot refreshed with UpdateFrom it includes
// what upstream's pending delta added since its last list rebuild; for
// the others it is the sum over listed nodes.
func (s *Snapshot) PVCRefCount(key string) int {
	if s.ll != nil && s.ll.pvc != nil {
		n, _ := s.ll.pvc.counts.Get(key)
		return int(n)
	}
	n, _ := sumListed(s.order, func(slot int32) *nodeinfo.NodeInfo { return s.nodes.Get(int(slot)) }).Get(key)
	return int(n)
}
