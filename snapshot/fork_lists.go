package snapshot

import (
	"cmp"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/internal/nodelists"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/nodetree"
)

// usePVC adds delta to claim k's reference count (upstream v1.37's
// usedPVCRefCounts, by pods), adding it to or removing it from the
// used-PVC set when the count leaves or reaches 0. The counts are opened
// on first use: the current level's, or the base's (shared by its forks)
// if no claim changed since the base.
func (f *Fork) usePVC(e *forkEdit, k string, delta int32) {
	if !e.pvcOpen {
		base := e.pvcBase
		if !e.pvcLive {
			base = f.base.pvcCounts()
		}
		base.EditInto(&e.pvcN)
		e.pvcOpen = true
	}
	switch entered, left := nodelists.UsePVC(&e.pvcN, k, delta); {
	case entered:
		e.pvc.Set(k, struct{}{})
	case left:
		e.pvc.Delete(k)
	}
}

// listLevel rebuilds the lists of l if they were deferred (relist, from
// the last listed state), once per level: copies of l share the result.
func (f *Fork) listLevel(l *forkLevel) {
	d := l.lazy
	if d == nil {
		return
	}
	if d.listed == nil {
		s := *l.s
		e := &forkEdit{base: f.base, pvcBase: l.pvcN, pvcLive: l.pvcLive}
		s.pvc.EditInto(&e.pvc)
		f.relist(&s, d.from, e, l.tree)
		applyImages(&s, d.imgs)
		s.pvc = e.pvc.Done()
		s.pc = nil
		res := *l
		f.seq++
		res.s, res.lazy, res.listTok = &s, nil, f.seq
		if e.pvcOpen {
			res.pvcN, res.pvcLive = e.pvcN.Done(), true
		}
		d.listed = &res
	}
	seq := l.seq
	*l = *d.listed
	l.seq = seq
}

// relist rebuilds s's node list from tree, as the cache's buildLists: names of entries without a node object are
// skipped, and a list of another length than the tree's count is reported
// as an *InconsistentListError. The affinity lists are derived from the
// new list; the used-PVC set (pvc, open on the previous state's) gains the
// claims of nodes that joined the list and loses those of nodes that left
// it that no listed node uses any more. prev is the last listed state
// (only node operations happened since: every entry listed in both holds
// the same pods).
func (f *Fork) relist(s, prev *Snapshot, e *forkEdit, tree *nodetree.Overlay) {
	ids, _ := tree.AppendIDs(make([]int32, 0, tree.NumNodes()))
	order, _ := nodelists.Build(ids[:0], ids, func(slot int32) bool {
		return int(slot) < s.nodes.Len() && s.nodes.Get(int(slot)).Node() != nil
	})
	aff, anti, nonHost := nodelists.Affinity(order, s.affinityFlags, nil, nil, nil)
	newPos, dup := positions(order)
	// A new list recounts the claims from it, as upstream's rebuild does
	// (a refreshed base's pending delta is dropped with it).
	counts := sumDistinct(order, func(slot int32) *nodeinfo.NodeInfo { return s.nodes.Get(int(slot)) })
	counts.EditInto(&e.pvcN)
	e.pvcOpen = true
	usedFrom(counts).EditInto(&e.pvc)
	err := nodelists.Check(len(order), tree.NumNodes(), s.index.Len(), int(s.nodeCount))
	s.order = order
	s.ls = &nodeLists{aff: immutable.SeqOf(aff), anti: immutable.SeqOf(anti), nonHost: immutable.SeqOf(nonHost), err: err, treeNodes: tree.NumNodes()}
	li := new(listIndex)
	li.once.Do(func() { li.pos, li.dup = newPos, dup })
	s.li = li
}

// refreshListError keeps the counts of an inconsistent list's error
// current, as the cache does: they change without the list changing (a
// ghost's last pod leaves).
func refreshListError(s *Snapshot) {
	err, changed := nodelists.Recount(s.lists().err, s.index.Len(), int(s.nodeCount))
	if !changed {
		return
	}
	ls := *s.ls // s.lists().err is set: s.ls is not nil
	ls.err = err
	s.ls = &ls
}

// editLists brings the three affinity lists and the used-PVC set of s
// (whose node list did not change) up to date with the touched entries.
func (f *Fork) editLists(s *Snapshot, e *forkEdit) {
	var affEd, antiEd, nonHostEd []immutable.SeqEdit[int32]
	for slot, t := range e.touched {
		now := s.nodes.Get(int(slot))
		aff0, anti0, nonHost0 := listFlags(t.init)
		aff1, anti1, nonHost1 := listFlags(now)
		samePVC := nodeinfo.SamePVCCounts(t.init, now)
		if aff0 == aff1 && anti0 == anti1 && nonHost0 == nonHost1 && samePVC {
			continue // in no list it was not in before, no claim counted anew
		}
		if !f.listed(slot) {
			continue
		}
		// Claims count by pod on listed nodes: a fork's state is a
		// published snapshot's (recounted from its list), and upstream
		// v1.37's snapshot AssumePod and AddPod count each pod's claims.
		if !samePVC {
			nodeinfo.DiffPVCCounts(t.init, now, func(k string, d int) { f.usePVC(e, k, int32(d)) })
		}
		if aff0 != aff1 {
			affEd = append(affEd, immutable.SeqEdit[int32]{X: slot, Insert: aff1})
		}
		if anti0 != anti1 {
			antiEd = append(antiEd, immutable.SeqEdit[int32]{X: slot, Insert: anti1})
		}
		if nonHost0 != nonHost1 {
			nonHostEd = append(nonHostEd, immutable.SeqEdit[int32]{X: slot, Insert: nonHost1})
		}
	}
	if len(affEd) > 0 || len(antiEd) > 0 || len(nonHostEd) > 0 {
		byPos := func(a, b int32) int { return cmp.Compare(f.pos[a], f.pos[b]) }
		var aff, anti, nonHost immutable.Seq[int32]
		ok := !f.posDup // a node listed twice is in its lists twice: the edits cannot place it
		if ok {
			var ok2, ok3 bool
			aff, ok = s.lists().aff.Edit(affEd, byPos)
			anti, ok2 = s.lists().anti.Edit(antiEd, byPos)
			nonHost, ok3 = s.lists().nonHost.Edit(nonHostEd, byPos)
			ok = ok && ok2 && ok3
		}
		ls := *s.lists()
		if ok {
			ls.aff, ls.anti, ls.nonHost = aff, anti, nonHost
		} else { // a list seen twice: derive the three from the list
			a, b, c := nodelists.Affinity(s.order, s.affinityFlags, nil, nil, nil)
			ls.aff, ls.anti, ls.nonHost = immutable.SeqOf(a), immutable.SeqOf(b), immutable.SeqOf(c)
		}
		s.ls = &ls
	}
}

// listed reports whether slot is in the current state's node list. The
// first call for a list builds a slot -> position table, O(n).
func (f *Fork) listed(slot int32) bool {
	if f.pos == nil || f.posTok != f.cur.listTok {
		pos, dup := f.cur.s.listPos() // shared by the forks of one list
		if pos == nil {
			pos, dup = positions(f.cur.s.order)
		}
		f.pos, f.posDup, f.posTok = pos, dup, f.cur.listTok
	}
	return int(slot) < len(f.pos) && f.pos[slot] >= 0
}

// levelTree returns the zone tree of the current state, made from the
// tree its list was listed from (rebuilt once per list and shared by
// every fork of it, O(n) then) if no node operation made one since the
// base.
func (f *Fork) levelTree() (*nodetree.Overlay, error) {
	if f.cur.tree != nil {
		return f.cur.tree, nil
	}
	t, err := f.cur.s.listTree()
	if err != nil {
		return nil, err
	}
	f.cur.tree = t
	return t, nil
}
