package actor

import (
	"cmp"
	"slices"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/internal/nodelists"
)

// slotState is, densely by slot, what building the node lists reads of an
// entry, so that a rebuild walks an array instead of the entries. Owned by
// the coordinator's token holder. hasNode, aff, anti and nonHost are a
// cache of the entry, written only by syncSlot when buildMeta starts
// (every entry they could differ for was touched this epoch); a free slot
// is zero.
type slotState struct {
	hasNode   bool // the slot's entry has a node object
	aff       bool // entry.aff > 0
	anti      bool // entry.anti > 0
	nonHost   bool // entry.nonHost > 0
	inAff     bool // in the affinity list being built (valid while the slot is in the node list)
	inAnti    bool // in the anti-affinity list being built (same)
	inNonHost bool // in the non-host-scoped anti-affinity list being built (same)
}

// syncSlot brings e's slot state up to date with e: buildMeta calls it for
// every entry touched in the epoch, before the lists are built or edited.
// A deleted entry's slot is cleared (it is not reused before commit).
func (c *core) syncSlot(e *entry) {
	st := &c.slots[e.slot]
	if e.deleted {
		*st = slotState{}
		return
	}
	st.hasNode, st.aff, st.anti, st.nonHost = e.node != nil, e.aff > 0, e.anti > 0, e.nonHost > 0
}

// The affinity sub-lists of an entry, as indexes of entry.stale's counts.
const (
	listAff = iota
	listAnti
	listNonHost
)

// dropFromSubList keeps *n, e's count of the shard's sub-list l (listAff,
// listAnti or listNonHost), as the shard's NodeState changes that list
// when it removes pod key: own says the stored PodInfo qualifies for the
// list (its entry is there), search that the pod object the removal uses
// qualifies (upstream searches a sub-list only then). The list may also
// hold stale entries of key, left by an earlier pod of that key whose
// removal did not search the list (e.stale): a search removes one entry
// of key if the list holds any; a removal that does not search leaves the
// pod's own entry behind, stale. A count that reaches 0 is a flip.
func (c *core) dropFromSubList(e *entry, n *int, l int, key string, own, search bool) {
	if own == search {
		if own { // the common case: the pod's own entry goes
			*n--
			if *n == 0 {
				c.affFlips = append(c.affFlips, e)
			}
		}
		return
	}
	stale := e.stale[key]
	if own { // not searched: the pod's entry stays, stale
		stale[l]++
	} else { // searched for a pod not in the list: a stale entry goes, if any
		if stale[l] == 0 {
			return
		}
		stale[l]--
		*n--
		if *n == 0 {
			c.affFlips = append(c.affFlips, e)
		}
	}
	switch {
	case stale != [3]int32{}:
		if e.stale == nil {
			e.stale = make(map[string][3]int32)
		}
		e.stale[key] = stale
	case len(e.stale) > 1:
		delete(e.stale, key)
	default:
		e.stale = nil
	}
}

// reconcilePVC counts the entry's PVC keys in the used set exactly while it
// has a node object and is in the node list of the last buildLists: the
// set upstream builds by walking its list (only a pods-first entry given a
// node by UpdateNode has a node but no place in the list).
func (c *core) reconcilePVC(e *entry) {
	want := !e.deleted && e.node != nil && c.listed(e)
	if want == e.pvcOn {
		return
	}
	e.pvcOn = want
	sign := -1
	if want {
		sign = +1
	}
	for k := range e.pvc {
		c.bumpPVC(k, sign)
	}
}

// cumPVC adds delta to claim k's cumulative reference change: what
// upstream v1.37 adds to its pending delta (pvcRefCountsDelta) on every
// change of any entry's PVC counts, a nodeless entry's included, and on
// RemoveNode. Snapshots refreshed with UpdateFrom apply the difference
// since their last refresh (snapshot/pvcref.go).
func (c *core) cumPVC(k string, delta int) {
	v := c.pvcCum[k] + int64(delta)
	if v == 0 {
		delete(c.pvcCum, k)
	} else {
		c.pvcCum[k] = v
	}
	c.dirtyCum = append(c.dirtyCum, k)
}

func (c *core) bumpPVC(k string, sign int) {
	if entered, left := nodelists.UsePVC(c.pvcUsed, k, int32(sign)); entered || left {
		c.dirtyPVC = append(c.dirtyPVC, k)
	}
}

// refreshListError keeps the counts of an inconsistent list's error
// current: upstream reports the snapshot map's size and the cache's entry
// count as of each refresh, which change without the list changing (a
// pods-first entry, a ghost).
func (c *core) refreshListError() {
	order, aff, anti, nonHost, err := c.builder.Lists()
	if err, changed := nodelists.Recount(err, c.withNode, len(c.nodes)); changed {
		c.builder.SetLists(order, aff, anti, nonHost, err)
	}
}

// editAffinityLists applies the epoch's affinity flips to the three lists
// without walking the node list: each flip inserts or removes one slot,
// ordered by list position, in a immutable.Seq, which copies only the chunks
// the flips fall in, not the whole list. The published lists are never
// written. A node list the
// tree produced with a name twice, or a flip the lists disagree with, takes
// one rebuild instead.
func (c *core) editAffinityLists() {
	order, aff, anti, nonHost, err := c.builder.Lists()
	affEdits, antiEdits, nonHostEdits := c.scratch.affEdits[:0], c.scratch.antiEdits[:0], c.scratch.nonHostEdits[:0]
	for _, e := range c.affFlips {
		if !c.listed(e) {
			continue // not in the node list: in no list
		}
		st := &c.slots[e.slot]
		if st.aff != st.inAff {
			affEdits = append(affEdits, immutable.SeqEdit[int32]{X: e.slot, Insert: st.aff})
			st.inAff = st.aff
		}
		if st.anti != st.inAnti {
			antiEdits = append(antiEdits, immutable.SeqEdit[int32]{X: e.slot, Insert: st.anti})
			st.inAnti = st.anti
		}
		if st.nonHost != st.inNonHost {
			nonHostEdits = append(nonHostEdits, immutable.SeqEdit[int32]{X: e.slot, Insert: st.nonHost})
			st.inNonHost = st.nonHost
		}
	}
	c.scratch.affEdits, c.scratch.antiEdits, c.scratch.nonHostEdits = affEdits[:0], antiEdits[:0], nonHostEdits[:0]
	if len(affEdits) == 0 && len(antiEdits) == 0 && len(nonHostEdits) == 0 {
		return
	}
	ok := !c.listIrregular
	if ok {
		aff, ok = aff.Edit(affEdits, c.byListPos)
	}
	if ok {
		anti, ok = anti.Edit(antiEdits, c.byListPos)
	}
	if ok {
		nonHost, ok = nonHost.Edit(nonHostEdits, c.byListPos)
	}
	if !ok { // the lists disagree with the counts: rebuild them
		c.buildAffinityLists(order, err)
		return
	}
	c.builder.SetLists(order, aff, anti, nonHost, err)
}

// compareListPos orders two listed slots by their position in the node
// list; it is the order of the affinity lists (core.byListPos).
func (c *core) compareListPos(a, b int32) int {
	return cmp.Compare(c.listPos[a], c.listPos[b])
}

// listed reports whether e is the live entry of its slot and in the node
// list of the last buildLists.
func (c *core) listed(e *entry) bool {
	return int(e.slot) < len(c.listPos) && c.listPos[e.slot] >= 0 && c.bySlot[e.slot] == e
}

// buildAffinityLists re-derives the three affinity lists from the node
// list, by slot, without touching the tree or hashing names.
func (c *core) buildAffinityLists(order []int32, err error) {
	aff, anti, nonHost := nodelists.Affinity(order, func(slot int32) (bool, bool, bool) {
		st := &c.slots[slot]
		st.inAff, st.inAnti, st.inNonHost = st.aff, st.anti, st.nonHost
		return st.aff, st.anti, st.nonHost
	}, c.scratch.affBuf[:0], c.scratch.antiBuf[:0], c.scratch.nonHostBuf[:0])
	// SeqOf copies: the buffers are scratch, reused by the next rebuild,
	// so a rebuild allocates only the published chunks.
	c.scratch.affBuf, c.scratch.antiBuf, c.scratch.nonHostBuf = aff[:0], anti[:0], nonHost[:0]
	c.builder.SetLists(order, immutable.SeqOf(aff), immutable.SeqOf(anti), immutable.SeqOf(nonHost), err)
}

func (c *core) buildLists() {
	listed := c.listSlots()
	order := make([]int32, 0, len(listed))
	c.listPos = slices.Grow(c.listPos[:0], int(c.nextSlot))[:c.nextSlot]
	c.listIrregular = false
	for i := range c.listPos {
		c.listPos[i] = -1
	}
	order, skipped := nodelists.Build(order, listed, func(slot int32) bool { return c.slots[slot].hasNode })
	distinct := 0
	for i, slot := range order {
		if c.listPos[slot] >= 0 {
			c.listIrregular = true // listed twice: only full rebuilds keep upstream's list
		} else {
			distinct++
		}
		c.listPos[slot] = int32(i)
	}
	var names []string
	if skipped {
		// A long-lived snapshot may still hold these names (upstream
		// deletes removed nodes from it only down to the tree's count):
		// it resolves the tree's list by name.
		names, _ = c.tree.AppendList(nil)
	}
	c.builder.SetTree(c.tree.NumNodes(), names)
	c.unlisted = distinct != c.withNode
	c.buildAffinityLists(order, nodelists.Check(len(order), c.tree.NumNodes(), c.withNode, len(c.nodes)))
}

// listSlots returns the slots of the entries of the tree's list, in its
// order (-1 for a name without an entry). The tree lists the slot each name
// was added with, which is its entry's as long as no name outlived its
// entry there; only a failed tree removal (treeStale) can break that, and
// then every name is looked up. The slice is scratch, valid until the next
// call.
func (c *core) listSlots() []int32 {
	if !c.treeStale {
		ids, _ := c.tree.AppendIDs(c.scratch.idBuf[:0])
		c.scratch.idBuf = ids
		if !slices.ContainsFunc(ids, func(id int32) bool { return id < 0 || int(id) >= len(c.slots) }) {
			return ids
		}
	}
	names, _ := c.tree.AppendList(c.scratch.listBuf[:0])
	out := c.scratch.idBuf[:0]
	for _, name := range names {
		slot := int32(-1)
		if e := c.nodes[name]; e != nil {
			slot = e.slot
		}
		out = append(out, slot)
	}
	clear(names)
	c.scratch.listBuf = names[:0]
	c.scratch.idBuf = out
	return out
}
