package snapshot

import (
	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/internal/nodelists"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/podgroup"
)

// longLived is what a snapshot refreshed by UpdateFrom keeps besides the
// fields it shares in shape with published snapshots: which published
// version it last read, and its own slot allocation (its entries live at
// slots of its own once it has diverged from the published versions).
// Owned by the snapshot's owner, like the snapshot.
type longLived struct {
	base     immutable.Vector[*nodeinfo.NodeInfo] // nodes of the published snapshot the last refresh read
	nextSlot int32                                // first slot never used by this snapshot
	free     []int32                              // slots freed by removals
	pvc      *refLive                             // PVC reference counts (pvcref.go); nil until the first refresh
}

func (l *longLived) clone() *longLived {
	if l == nil {
		return nil
	}
	c := *l
	c.free = append([]int32(nil), l.free...)
	return &c
}

func (l *longLived) alloc() int32 {
	if n := len(l.free); n > 0 {
		s := l.free[n-1]
		l.free = l.free[:n-1]
		return s
	}
	l.nextSlot++
	return l.nextSlot - 1
}

// UpdateFrom refreshes s from the published snapshot p exactly as
// upstream's UpdateSnapshot refreshes a scheduler's long-lived snapshot
// (5.2), and returns the error it would return. It fails with ErrPublished
// if s is a published snapshot.
//
// A snapshot never refreshed becomes p, with every node's image counts
// as they are now: upstream clones every node into it and builds its
// lists from the zone tree, which is what p holds (O(nodes) to re-clone
// the nodes whose counts changed since their last change). Afterwards a
// refresh costs O(changed nodes x log n), plus O(nodes) when a list must
// be rebuilt, as upstream's:
//   - every node whose entry changed since the last refresh (a new
//     generation: found by comparing p with the version that refresh read,
//     skipping the structure they share) is cloned into s, with the image
//     counts now; the others keep the clone s has, with the counts of the
//     refresh that cloned it;
//   - a node new to s, or nodes removed from the cache (more entries in s
//     than nodes in the tree), rebuild the node list from the tree's order;
//     otherwise s keeps its order, even if zones changed since;
//   - a change of some node's affinity (in any of the three affinity
//     lists) or PVC membership rebuilds the affinity lists and the
//     used-PVC set from s's list;
//   - a list whose length differs from the tree's node count is rebuilt
//     from the tree and reported as an InconsistentListError.
//
// Contract: s is owned by the caller; p is immutable. Not safe to call
// concurrently with readers of s (as upstream).
func (s *Snapshot) UpdateFrom(p *Snapshot) error {
	if s.published {
		return ErrPublished
	}
	if s.ll == nil {
		*s = *p
		s.published, s.li, s.pc, s.logIx = false, nil, nil, nil
		s.ll = &longLived{base: p.nodes, nextSlot: int32(p.nodes.Len())}
		s.nodes = p.clonesNow(p.nodes)
		s.ll.pvc = &refLive{counts: sumListed(s.order, func(slot int32) *nodeinfo.NodeInfo { return s.nodes.Get(int(slot)) })}
		if p.index.Len() == 0 {
			// No node object: upstream's first refresh rebuilds nothing and
			// applies the pending delta (pvcref.go, nodelessCounts).
			s.ll.pvc.counts = positiveOrNone(cumOf(p))
			s.pvc = usedFrom(s.ll.pvc.counts)
		}
		if s.lists().err != nil && s.aux != nil {
			// Upstream copies the pod groups after its list check: none.
			a := auxOf(s)
			a.groups = podgroup.NewTable(a.groups.GenericWorkloadEnabled(), a.groups.CompositePodGroupEnabled())
			s.aux = &a
		}
		return s.lists().err
	}
	ll := s.ll
	nodes, index := s.nodes.Edit(), s.index.Edit()
	all, aff, anti, nonHost, pvc := false, false, false, false, false
	immutable.DiffVectors(ll.base, p.nodes, func(_ int, _, cur *nodeinfo.NodeInfo) {
		if cur == nil {
			return // removed, or nodeless now: the removal pass decides
		}
		name := cur.NodeName()
		slot, ok := index.Get(name)
		var prev *nodeinfo.NodeInfo
		if ok {
			prev = nodes.Get(int(slot))
			if prev != nil && prev.Generation() == cur.Generation() {
				return // the same entry version: a published entry changes only with its generation
			}
		} else {
			all = true
			slot = ll.alloc()
			index.Set(name, slot)
		}
		cur = cur.WithImageTable(p.images) // a clone taken now shows the counts now
		aff = aff || (prev.NumPodsWithAffinity() > 0) != (cur.NumPodsWithAffinity() > 0)
		anti = anti || (prev.NumPodsWithRequiredAntiAffinity() > 0) != (cur.NumPodsWithRequiredAntiAffinity() > 0)
		nonHost = nonHost || (prev.NumPodsWithRequiredNonHostScopedAntiAffinity() > 0) != (cur.NumPodsWithRequiredNonHostScopedAntiAffinity() > 0)
		pvc = pvc || !nodeinfo.SamePVCKeys(prev, cur)
		nodes.Set(int(slot), cur)
	})
	// Entries whose node left the cache (or has no node object now): upstream
	// deletes as many as the snapshot has more than the tree, in map order.
	if excess := index.Len() - p.lists().treeNodes; excess > 0 {
		s.index.Range(func(name string, slot int32) bool {
			if _, live := p.index.Get(name); !live {
				index.Delete(name)
				nodes.Set(int(slot), nil)
				ll.free = append(ll.free, slot)
				excess--
			}
			return excess > 0
		})
		all = true
	}
	// PVC counts (pvcref.go): the pending delta unless the lists are
	// rebuilt; a count below zero forces the rebuild, as upstream's.
	refs, used := s.ll.pvc.counts, s.pvc
	if !all {
		ue := used.Edit()
		var ok bool
		refs, ok = applyPVCDelta(refs, cumOf(s), cumOf(p), func(k string, in bool) {
			if in {
				ue.Set(k, struct{}{})
			} else {
				ue.Delete(k)
			}
		})
		if ok {
			used = ue.Done()
		} else {
			all = true
		}
	}
	_ = pvc // PVC changes no longer rebuild the lists (v1.37: counts move by delta)
	order, affList, antiList, nonHostList := s.order, s.lists().aff, s.lists().anti, s.lists().nonHost
	if all || aff || anti || nonHost {
		if all {
			order = p.treeOrder(index)
		}
		affList, antiList, nonHostList, _ = derivedLists(order, nodes)
	}
	err := nodelists.Check(len(order), p.lists().treeNodes, index.Len(), int(p.nodeCount))
	if err != nil {
		order = p.treeOrder(index)
		affList, antiList, nonHostList, _ = derivedLists(order, nodes)
		all = true
	}
	if all {
		refs = sumListed(order, func(slot int32) *nodeinfo.NodeInfo { return nodes.Get(int(slot)) })
		used = usedFrom(refs)
	}
	s.ll.pvc = &refLive{counts: refs}
	if err != nil && s.aux != p.aux {
		// Upstream copies the pod groups after its list check: a refresh
		// that reports an inconsistent list keeps the ones it had.
		a := auxOf(p)
		a.groups = auxOf(s).groups
		s.aux = &a
	} else {
		s.aux = p.aux // the running PVC sum read now, and the pod groups now
	}
	s.nodes, s.index = nodes.Done(), index.Done()
	pl := p.lists()
	s.order = order
	s.ls = &nodeLists{aff: affList, anti: antiList, nonHost: nonHostList, err: err, treeNodes: pl.treeNodes, treeNames: pl.treeNames}
	s.pvc = used
	s.epoch, s.podCount, s.nodeCount = p.epoch, p.podCount, p.nodeCount
	s.pods, s.podLog, s.podSum = p.pods, p.podLog, p.podSum
	s.images = p.images // the registry now: what a fork of s continues from
	ll.base = p.nodes
	return err
}

// clonesNow returns nodes (s's entries) with every entry showing the image
// counts of s's epoch: a published entry shows those of its node's last
// change, a fresh upstream snapshot those of the moment it clones. Entries
// already current are shared; the rest are copied reading s's registry
// version (O(nodes) struct copies at worst, as upstream clones every node).
func (s *Snapshot) clonesNow(nodes immutable.Vector[*nodeinfo.NodeInfo]) immutable.Vector[*nodeinfo.NodeInfo] {
	if s.images == nil {
		return nodes
	}
	var ed *immutable.VectorEditor[*nodeinfo.NodeInfo]
	nodes.Range(func(i int, ni *nodeinfo.NodeInfo) bool {
		if now := ni.WithImageTable(s.images); now != ni {
			if ed == nil {
				ed = nodes.Edit()
			}
			ed.Set(i, now)
		}
		return true
	})
	if ed == nil {
		return nodes
	}
	return ed.Done()
}

// treeOrder returns the zone tree's list as of s, resolved through index
// (a long-lived snapshot's name -> slot); names index lacks are skipped,
// as upstream skips names missing from its snapshot's map.
func (s *Snapshot) treeOrder(index *immutable.MapEditor[int32]) []int32 {
	slotOf := func(name string) int32 {
		if slot, ok := index.Get(name); ok {
			return slot
		}
		return -1
	}
	var ids []int32
	if names := s.lists().treeNames; names != nil {
		ids = make([]int32, len(names))
		for i, name := range names {
			ids[i] = slotOf(name)
		}
	} else {
		ids = make([]int32, len(s.order))
		for i, slot := range s.order {
			ids[i] = slotOf(s.nodes.Get(int(slot)).NodeName())
		}
	}
	// index holds only the names with a node object.
	order, _ := nodelists.Build(ids[:0], ids, func(int32) bool { return true })
	return order
}

// derivedLists walks order and returns the three affinity lists and the
// used-PVC set of its nodes (upstream's updateNodeInfoSnapshotList).
func derivedLists(order []int32, nodes *immutable.VectorEditor[*nodeinfo.NodeInfo]) (aff, anti, nonHost immutable.Seq[int32], pvc immutable.Map[struct{}]) {
	a, r, h := nodelists.Affinity(order, func(slot int32) (bool, bool, bool) {
		return listFlags(nodes.Get(int(slot)))
	}, nil, nil, nil)
	ed := immutable.Map[struct{}]{}.Edit()
	for _, slot := range order {
		nodes.Get(int(slot)).RangePVCKeys(func(k string) { ed.Set(k, struct{}{}) })
	}
	return immutable.SeqOf(a), immutable.SeqOf(r), immutable.SeqOf(h), ed.Done()
}
