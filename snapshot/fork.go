package snapshot

import (
	"cmp"
	"errors"
	"slices"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/errs"
	"github.com/schedcache/schedcache/internal/imagereg"
	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/internal/nodelists"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/nodetree"
)

var (
	// ErrNoForkPoint is returned by Fork.Revert and Fork.Commit when the
	// fork has no fork point (Fork.Fork was not called, or every point
	// was reverted or committed since).
	ErrNoForkPoint = errors.New("schedcache: fork has no fork point")
	// ErrStaleForkPoint is returned by Fork.RevertTo for a point of
	// another fork, or one reverted or committed since.
	ErrStaleForkPoint = errors.New("schedcache: fork point is not on this fork's stack")
	// ErrForkListInconsistent is returned (wrapped in a *NodeError) by a
	// fork's node operations when the fork's node list does not match its
	// zone tree (the snapshot's Err is an *InconsistentListError, or the
	// cache's tree listed names without entries): the zone order cannot
	// be recovered from such a list. Pod operations still work.
	ErrForkListInconsistent = errors.New("schedcache: fork's node list is inconsistent; node operations refused")
)

// podOver is a fork's change of one pod key: its entry from then on, or
// its removal. Immutable.
type podOver struct {
	e    PodEntry
	gone bool
}

// forkGenBase is the first generation a fork gives a changed node: far
// above any cache's counter (which starts at 1 and counts operations), so
// a fork's NodeInfo never shows the generation of a live one.
const forkGenBase = 1 << 62

var forkGen atomic.Int64 // atomic; generations of forks' node changes, process-wide

func forkNextGen() int64 { return forkGenBase + forkGen.Add(1) }

// forkLevel is one state of a fork. Immutable once made: the current state
// and the saved fork points are all forkLevels.
type forkLevel struct {
	s       *Snapshot            // immutable, published
	ghosts  immutable.Map[int32] // nodeless entries the fork made (RemoveNode of a node holding pods): name -> slot
	listTok uint64               // identifies the zone tree s.order was listed from; 0: the base's; unused while lazy
	tree    *nodetree.Overlay    // the zone tree of this state; nil: the base list's, not made yet (no node operation since the base)
	lazy    *deferredList        // non-nil: the lists were not rebuilt after the last node operations (see deferredList)
	nodeOps int                  // node operations applied since the base (Cache.Commit refuses a fork with any)
	pvcN    immutable.Map[int32] // claim -> listed nodes referencing it, when pvcLive
	pvcLive bool                 // pvcN is kept; else the counts are the base's (no claim changed since it)
	seq     uint64               // unique within the fork: what a ForkPoint names
}

// deferredList marks a level whose node list was not rebuilt after its
// node operations: its snapshot's entries, index and pods are current,
// but its lists (order, aff, anti, err, its tree counts), its used-PVC
// set and counts and its image table are still those of from, the last
// listed state before them (only node operations happened since: no pod
// changed), and the entries those operations gave a node object show no
// images yet: imgs lists the operations' image changes, applied then.
// listed is the level with its lists rebuilt (listLevel), made on the
// first read that needs them and shared by every copy of the level (the
// fork points keep copies). A Revert past unread node operations thus
// costs nothing. Owned by the goroutine holding the fork.
type deferredList struct {
	from   *Snapshot  // immutable
	imgs   *imgOp     // immutable; the node operations' image changes, newest first
	listed *forkLevel // nil until listed
}

// imgOp is one node operation's change of the image registry (the
// table's summaries and stray registrations), applied with the cache's
// rule (imagereg): node name's registrations are those its object before
// the operation lists (stored) and its strays; drop is unregistered, then
// add registered, and add becomes name's object (nil: none). slot's entry
// shows add's names read from the table as of then. Immutable.
type imgOp struct {
	prev              *imgOp // the operation before, nil for the first since the last listed state
	name              string
	slot              int32
	stored, drop, add *v1.Node
}

// Fork is a private, mutable what-if copy of a snapshot: made in O(1) by
// Snapshot.Fork, sharing all structure with it, changed by the cache's pod
// and node operations with the cache's rules (the same nodeinfo.NodeState
// aggregation, nodetree zone order and persistent structures), read as an
// immutable *Snapshot at any time (Snapshot), with nested fork points
// (Fork, Point) that Revert, RevertTo and Commit return to or fold in O(1).
// Cache.Commit applies a fork's pod changes to the cache.
//
// Contract: a Fork is owned by one goroutine at a time: its methods are
// not safe for concurrent use (hand it over with a channel or a mutex).
// No method blocks. Any number of forks, on any goroutines, may share one
// base snapshot; nothing a fork does changes its base, another fork, or a
// Snapshot it returned earlier (every Snapshot it returns is immutable and
// may be read by any goroutine). Errors are the cache's typed errors
// (*PodError, *NodeError, *CorruptionError) and leave the fork unchanged,
// except where the cache's own operation changes state before it reports
// (RemoveNode of a node missing from its zone).
//
// Costs (n nodes): Fork, Point, Revert, RevertTo, Commit and Base O(1);
// a pod operation O(log n + pods of the node); Snapshot O(1) if nothing
// changed since the last call, else O(nodes changed x (log n + their
// pods)); a node operation O(zones + log n + node operations since the
// base): the zone order is relisted, as the cache does when a node joins
// or leaves its list, and the image table updated, but only on the first
// read that needs them (Snapshot, or a later pod operation), O(n) then.
// Four tables are built on first use, O(n), and shared by every fork: per
// node list its slot -> position table and its zone tree, per published
// snapshot the counts of its used-PVC set and the index of its pod log.
// The pod changes of an open edit are applied to the fork's pod trie when
// the edit closes (Snapshot, Fork, Point), and pod adds to a node the edit
// changed no other way are aggregated then too (a pod add costs O(log n)
// until then), so a Revert right after them costs nothing; a node whose
// pods an edit changed back (a pod added, then removed) keeps its frozen
// entry, generation included.
//
// Image summaries are the cache's: the fork's registry (the base's
// nodeinfo.ImageTable, stray registrations included) is changed by the
// cache's rule (internal/imagereg, upstream's per-image node sets), and
// the Snapshot shows what the cache's would after the same operations,
// each published on its own: a node a node operation sets shows the
// counts as of that operation, a node whose pods change the counts then,
// every other node those it showed before.
//
// Differences from the cache: a fork holds pods only on nodes it knows:
// nodes with an object, and the ghosts it made itself. A pod operation
// naming another node (one without an object, "" included, or a nodeless
// entry of the base, which snapshots do not name) returns a *PodError
// wrapping ErrNodeNotFound. A ghost's image summaries (which the cache
// keeps for Dump) are not kept: snapshots do not show ghosts.
type Fork struct {
	// Every field is owned by the goroutine holding the fork.
	base    *Snapshot   // immutable
	cur     forkLevel   // the state when no edit is open
	stack   []forkLevel // fork points, innermost last
	seq     uint64      // last seq or token handed out
	editing bool        // ed is open: cur is its starting state
	ed      *forkEdit   // the open edit; allocated by the first, reused by later ones
	pos     []int32     // slot -> list position of the state whose listTok is posTok; shared, read-only
	posDup  bool        // that list holds a slot twice
	posTok  uint64      // see pos
}

// forkEdit is an edit of the fork's current state, opened by the first
// change after a Snapshot, Fork or Revert call and closed by the next.
// Editors edit in place what they copied, so a batch of changes shares
// its path copies. Owned by the goroutine holding the fork.
type forkEdit struct {
	s       Snapshot // the state edited; nodes, index, pvc and over are read through the editors
	nodes   immutable.VectorEditor[*nodeinfo.NodeInfo]
	index   immutable.MapEditor[int32]
	pvc     immutable.MapEditor[struct{}]
	over    immutable.MapEditor[podOver]
	ghosts  immutable.MapEditor[int32]
	pvcN    immutable.MapEditor[int32] // open when pvcOpen
	pvcOpen bool
	pvcBase immutable.Map[int32]  // the counts pvcN opens on, if pvcLive
	pvcLive bool                  // pvcBase is kept; else the base snapshot's counts
	tree    *nodetree.Overlay     // the zone tree, changed by the edit's node operation
	base    *Snapshot             // the fork's base; immutable
	scans   int                   // lookups of pods under the base's pod log, up to podLogScans (then the base's log is indexed)
	touched map[int32]touchedNode // slot -> its thawed state, or its deferred adds
	adds    []deferredAdd         // the pod adds of touched entries not thawed yet, oldest first; see attach
	chain   []int32               // scratch for thaw's replay of adds
	imgs    *imgOp                // the image changes of the node operations since the last listed state, before this edit's
	op      imgOp                 // this edit's node operation's image change, if hasOp (close allocates it with the level)
	hasOp   bool
	free    []*nodeinfo.NodeState // states of closed or dropped edits, reused by state (ThawInto); up to forkFreeMax
	changed bool
	nodeOps int

	// pend holds the open edit's pod changes (pod, setPod, dropPod), which
	// close applies to over: a Revert or RevertTo drops them without
	// building their path copies. Reused by every edit.
	pend map[string]pendPod

	// The last name slotOf resolved (and its frozen entry, once read), so
	// that a pod operation's checks and its change look the node up once.
	// Valid until the index, the ghosts or the node vector change (forget)
	// or the edit is reopened.
	memoName string
	memoSlot int32
	memoOK   bool
	memoSet  bool
	memoNI   *nodeinfo.NodeInfo // the frozen entry at memoSlot once read (numPods); nil: not read
}

// pendPod is a pod change of the open edit: o for over, or (del) the
// removal of the key from over.
type pendPod struct {
	o   podOver
	del bool
}

// forkFreeMax bounds the states an edit keeps for reuse.
const forkFreeMax = 128

// recycle empties touched and the deferred adds, keeping up to
// forkFreeMax of the states for reuse: a closed edit froze them (the
// frozen entries share nothing the states own), a dropped one abandons
// them.
func (e *forkEdit) recycle() {
	clear(e.pend)
	for _, t := range e.touched {
		if t.st != nil && len(e.free) < forkFreeMax {
			e.free = append(e.free, t.st)
		}
	}
	clear(e.touched)
	clear(e.adds)
	e.adds = e.adds[:0]
}

// touchedNode is a node entry an edit changes: the frozen entry it
// started from (nil for an entry the edit created) and either its mutable
// aggregate (st) or, while the edit has only added pods to it, those adds
// (st nil; see attach). Owned by the goroutine holding the fork.
type touchedNode struct {
	st   *nodeinfo.NodeState
	init *nodeinfo.NodeInfo
	last int32 // while st is nil: index in adds of the newest deferred add
	n    int32 // while st is nil: the number of deferred adds
}

// deferredAdd is a pod added to an entry that was not thawed: the
// PodInfo and the index in adds of the same entry's previous add (-1:
// none).
type deferredAdd struct {
	info *nodeinfo.PodInfo
	prev int32
}

// ForkPoint names a fork point of one Fork (Point). It is a comparable
// value, safe to copy and to hold on any goroutine; only the fork's
// holder uses it (RevertTo). The zero value names none.
type ForkPoint struct {
	f   *Fork
	seq uint64
}

// Fork returns a new fork of s in O(1). s is never changed by the fork;
// a snapshot the caller owns (refreshed by UpdateSnapshot) is copied in
// O(1) first, so later refreshes do not reach the fork.
func (s *Snapshot) Fork() *Fork {
	b := s
	if !s.published || s.ll != nil {
		c := *s
		c.published, c.ll, c.li, c.pc, c.logIx = true, nil, new(listIndex), new(pvcIndex), new(podLogIndex)
		b = &c
	}
	return &Fork{base: b, cur: forkLevel{s: b}}
}

// Base returns the snapshot the fork was made from (a copy of it if the
// caller owns it), immutable.
func (f *Fork) Base() *Snapshot { return f.base }

// Snapshot returns the fork's current state as an immutable snapshot,
// readable with every Snapshot method (and the kube/fwkadapter adapter),
// with the base's epoch. Later changes to the fork do not change it.
func (f *Fork) Snapshot() *Snapshot {
	f.close()
	f.listLevel(&f.cur)
	return f.cur.s
}

// Depth returns the number of fork points.
func (f *Fork) Depth() int { return len(f.stack) }

// Fork saves the current state as a fork point, in O(1): Revert returns to
// it, Commit drops it and keeps the changes made since.
func (f *Fork) Fork() {
	f.close()
	f.seq++
	f.cur.seq = f.seq
	f.stack = append(f.stack, f.cur)
}

// Point is Fork, returning a name for the fork point it saves (RevertTo).
func (f *Fork) Point() ForkPoint {
	f.Fork()
	return ForkPoint{f: f, seq: f.seq}
}

// Revert returns the fork to its last fork point and drops that point,
// in O(1). Without one it returns ErrNoForkPoint.
func (f *Fork) Revert() error {
	if len(f.stack) == 0 {
		return ErrNoForkPoint
	}
	f.discard()
	n := len(f.stack) - 1
	f.cur = f.stack[n]
	f.stack[n] = forkLevel{}
	f.stack = f.stack[:n]
	return nil
}

// RevertTo returns the fork to the state saved at p and drops p and every
// later fork point, in O(1). p must be on the fork's stack, else
// ErrStaleForkPoint and nothing changes.
func (f *Fork) RevertTo(p ForkPoint) error {
	if p.f != f {
		return ErrStaleForkPoint
	}
	i, ok := slices.BinarySearchFunc(f.stack, p.seq, func(l forkLevel, seq uint64) int { return cmp.Compare(l.seq, seq) })
	if !ok {
		return ErrStaleForkPoint
	}
	f.discard()
	f.cur = f.stack[i]
	clear(f.stack[i:])
	f.stack = f.stack[:i]
	return nil
}

// Commit drops the last fork point and keeps the current state (the
// changes since the point now belong to the level below), in O(1): an
// open edit stays open (its changed nodes are frozen on the next read,
// Fork or Point, as without the Commit). Without one it returns
// ErrNoForkPoint. Cache.Commit applies a fork to the cache.
func (f *Fork) Commit() error {
	if len(f.stack) == 0 {
		return ErrNoForkPoint
	}
	// The open edit, if any, was opened on f.cur, which stays the
	// current state: nothing below the dropped point refers to it.
	n := len(f.stack) - 1
	f.stack[n] = forkLevel{}
	f.stack = f.stack[:n]
	return nil
}

// ---- the edit ----

// begin opens the edit of the current state for pod operations if it is
// not open, listing the state first if its list was deferred.
func (f *Fork) begin() *forkEdit {
	if !f.editing {
		f.listLevel(&f.cur)
	}
	return f.open()
}

// open opens the edit of the current state if it is not open.
func (f *Fork) open() *forkEdit {
	if f.editing {
		return f.ed
	}
	if f.ed == nil {
		f.ed = &forkEdit{base: f.base, touched: make(map[int32]touchedNode), pend: make(map[string]pendPod)}
	}
	e := f.ed
	f.editing = true
	e.s = *f.cur.s
	e.s.nodes.EditInto(&e.nodes)
	e.s.index.EditInto(&e.index)
	e.s.pvc.EditInto(&e.pvc)
	e.s.over.EditInto(&e.over)
	f.cur.ghosts.EditInto(&e.ghosts)
	e.changed, e.nodeOps, e.pvcOpen = false, 0, false
	e.forget()
	e.pvcBase, e.pvcLive, e.tree = f.cur.pvcN, f.cur.pvcLive, f.cur.tree
	e.imgs, e.hasOp = nil, false
	if f.cur.lazy != nil {
		e.imgs = f.cur.lazy.imgs
	}
	return e
}

// discard drops the open edit, if any.
func (f *Fork) discard() {
	if f.editing {
		f.editing = false
		f.ed.recycle()
		f.ed.s = Snapshot{}
	}
}

// close ends the open edit: the touched entries are frozen and the lists,
// the used-PVC set and the pods become the new current state.
func (f *Fork) close() {
	if !f.editing {
		return
	}
	e := f.ed
	if !e.changed {
		f.discard()
		return
	}
	f.editing = false
	for slot, t := range e.touched {
		if t.st == nil {
			t = e.thaw(slot, t)
		}
		if t.st.Same(t.init) {
			continue // changed back: the slot still holds init
		}
		e.nodes.Set(int(slot), t.st.Freeze())
	}
	var s *Snapshot
	var lazy *deferredList
	if e.nodeOps > 0 || f.cur.lazy != nil {
		// The tree changed: the list, the affinity lists and the
		// used-PVC set are rebuilt from it on first need (listLevel),
		// from the last listed state. The state, its deferred list and
		// its node operation's image change are one allocation.
		from := f.cur.s
		if f.cur.lazy != nil {
			from = f.cur.lazy.from
		}
		p := &struct {
			s  Snapshot
			d  deferredList
			op imgOp
		}{s: e.s}
		imgs := e.imgs
		if e.hasOp {
			p.op = e.op
			imgs = &p.op
			e.op, e.hasOp = imgOp{}, false
		}
		p.d = deferredList{from: from, imgs: imgs}
		s, lazy = &p.s, &p.d
	} else {
		s = new(Snapshot)
		*s = e.s
	}
	s.nodes = e.nodes.Done()
	s.index = e.index.Done()
	e.applyPend()
	s.over = e.over.Done()
	lvl := forkLevel{s: s, ghosts: e.ghosts.Done(), listTok: f.cur.listTok, tree: e.tree, nodeOps: f.cur.nodeOps + e.nodeOps, lazy: lazy}
	if lazy == nil {
		f.editLists(s, e)
		refreshListError(s)
	}
	s.pvc = e.pvc.Done()
	if e.pvcOpen {
		lvl.pvcN, lvl.pvcLive = e.pvcN.Done(), true
	} else {
		lvl.pvcN, lvl.pvcLive = f.cur.pvcN, f.cur.pvcLive
	}
	s.pc = nil // a fork keeps its counts in its levels
	e.recycle()
	e.s = Snapshot{}
	f.cur = lvl
}

// usePVC counts one more (delta 1) or one fewer (-1) listed node
// referencing claim k, adding it to or removing it from the used-PVC set
// when the count leaves or reaches 0. The counts are opened on first use:
// the current level's, or the base's (shared by its forks) if no claim
// changed since the base.
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
	aff, anti := nodelists.Affinity(order, s.affinityFlags, nil, nil)
	oldPos, _ := prev.listPos()
	newPos, dup := positions(order)
	if oldPos == nil {
		oldPos, _ = positions(prev.order)
	}
	// The counts are per node, not per place: a node the tree lists in
	// two zones counts once, at its last place.
	in := func(pos []int32, slot int32) bool { return int(slot) < len(pos) && pos[slot] >= 0 }
	for i, slot := range order {
		if newPos[slot] == int32(i) && !in(oldPos, slot) {
			s.nodes.Get(int(slot)).RangePVCRefCounts(func(k string, _ int) bool {
				f.usePVC(e, k, +1)
				return true
			})
		}
	}
	for j, slot := range prev.order {
		if oldPos[slot] == int32(j) && !in(newPos, slot) {
			prev.nodes.Get(int(slot)).RangePVCRefCounts(func(k string, _ int) bool {
				f.usePVC(e, k, -1)
				return true
			})
		}
	}
	err := nodelists.Check(len(order), tree.NumNodes(), s.index.Len(), int(s.nodeCount))
	s.order = order
	s.ls = &nodeLists{aff: immutable.SeqOf(aff), anti: immutable.SeqOf(anti), err: err, treeNodes: tree.NumNodes()}
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

// editLists brings the affinity lists and the used-PVC set of s (whose
// node list did not change) up to date with the touched entries.
func (f *Fork) editLists(s *Snapshot, e *forkEdit) {
	var affEd, antiEd []immutable.SeqEdit[int32]
	for slot, t := range e.touched {
		now := s.nodes.Get(int(slot))
		aff0, aff1 := t.init.NumPodsWithAffinity() > 0, now.NumPodsWithAffinity() > 0
		anti0, anti1 := t.init.NumPodsWithRequiredAntiAffinity() > 0, now.NumPodsWithRequiredAntiAffinity() > 0
		if aff0 == aff1 && anti0 == anti1 && nodeinfo.SamePVCKeys(t.init, now) {
			continue // in no list it was not in before
		}
		if !f.listed(slot) {
			continue
		}
		if aff0 != aff1 {
			affEd = append(affEd, immutable.SeqEdit[int32]{X: slot, Insert: aff1})
		}
		if anti0 != anti1 {
			antiEd = append(antiEd, immutable.SeqEdit[int32]{X: slot, Insert: anti1})
		}
		nodeinfo.DiffPVCKeys(t.init, now, func(k string, added bool) {
			if added {
				f.usePVC(e, k, +1)
			} else {
				f.usePVC(e, k, -1)
			}
		})
	}
	if len(affEd) > 0 || len(antiEd) > 0 {
		byPos := func(a, b int32) int { return cmp.Compare(f.pos[a], f.pos[b]) }
		var aff, anti immutable.Seq[int32]
		ok := !f.posDup // a node listed twice is in its lists twice: the edits cannot place it
		if ok {
			var ok2 bool
			aff, ok = s.lists().aff.Edit(affEd, byPos)
			anti, ok2 = s.lists().anti.Edit(antiEd, byPos)
			ok = ok && ok2
		}
		ls := *s.lists()
		if ok {
			ls.aff, ls.anti = aff, anti
		} else { // a list seen twice: derive both from the list
			a, b := nodelists.Affinity(s.order, s.affinityFlags, nil, nil)
			ls.aff, ls.anti = immutable.SeqOf(a), immutable.SeqOf(b)
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

// slotOf returns the slot of the entry named name: a node with an object,
// or a ghost the fork made.
func (e *forkEdit) slotOf(name string) (int32, bool) {
	if e.memoSet && e.memoName == name {
		return e.memoSlot, e.memoOK
	}
	slot, ok := e.index.Get(name)
	if !ok {
		slot, ok = e.ghosts.Get(name)
	}
	e.memoName, e.memoSlot, e.memoOK, e.memoSet, e.memoNI = name, slot, ok, true, nil
	return slot, ok
}

// frozen returns slot's frozen entry, read once per memoised slot: a pod
// operation's full-node check and its thaw share the read.
func (e *forkEdit) frozen(slot int32) *nodeinfo.NodeInfo {
	if !e.memoSet || e.memoSlot != slot || !e.memoOK {
		return e.nodes.Get(int(slot))
	}
	if e.memoNI == nil {
		e.memoNI = e.nodes.Get(int(slot))
	}
	return e.memoNI
}

// forget drops slotOf's memo: the index or the ghosts changed.
func (e *forkEdit) forget() { e.memoName, e.memoSet, e.memoNI = "", false, nil }

// state returns the mutable aggregate of slot, thawing its entry first.
func (e *forkEdit) state(slot int32) *nodeinfo.NodeState {
	t, ok := e.touched[slot]
	if !ok {
		t = touchedNode{init: e.frozen(slot)}
	} else if t.st != nil {
		return t.st
	}
	return e.thaw(slot, t).st
}

// thaw gives slot's entry t (not thawed, st nil) its mutable aggregate:
// a copy of its frozen entry, with the edit's deferred adds to it applied
// in their order, so the result is exactly what adding them to a thawed
// entry one by one gives (NodeState.AddPod is the one aggregation). The
// edit's adds stay in place (recycle drops them); t's chain is dropped.
func (e *forkEdit) thaw(slot int32, t touchedNode) touchedNode {
	var st *nodeinfo.NodeState
	if n := len(e.free); n > 0 {
		st, e.free[n-1] = e.free[n-1], nil
		e.free = e.free[:n-1]
	}
	t.st = t.init.ThawInto(st, forkNextGen)
	// A changed node shows the registry's counts now, as the cache's
	// clone of a node whose pods change (a node operation sets its own).
	// The registry does not change within a pod edit (a node operation
	// closes the edit first), so deferred adds see the same one.
	t.st.SetImageTable(e.s.images)
	if t.n > 0 {
		c := e.chain[:0]
		for i := t.last; i >= 0; i = e.adds[i].prev {
			c = append(c, i)
		}
		for j := len(c) - 1; j >= 0; j-- {
			t.st.AddPod(e.adds[c[j]].info)
		}
		e.chain = c[:0]
		t.last, t.n = 0, 0
	}
	e.touched[slot] = t
	return t
}

// numPods returns the pod count of slot's entry.
func (e *forkEdit) numPods(slot int32) int {
	if t, ok := e.touched[slot]; ok {
		if t.st == nil {
			return t.init.NumPods() + int(t.n)
		}
		return t.st.NumPods()
	}
	return e.frozen(slot).NumPods()
}

// pod returns the current entry of pod key.
func (e *forkEdit) pod(key string) (PodEntry, bool) {
	if p, ok := e.pend[key]; ok {
		return p.o.e, !p.del && !p.o.gone
	}
	if o, ok := e.over.Get(key); ok {
		return o.e, !o.gone
	}
	return e.podUnder(key)
}

// podUnder is the base's entry of pod key (the state's pods and pod log
// are the base's). Past podLogScans lookups the base's log is indexed.
func (e *forkEdit) podUnder(key string) (PodEntry, bool) {
	if e.scans <= podLogScans {
		if e.scans++; e.scans > podLogScans {
			e.base.indexPodLog()
		}
	}
	return e.s.podUnder(key)
}

// cached is what the state machine's rules (errs.Check*) read of pod key.
func (e *forkEdit) cached(key string) (PodEntry, errs.Cached) {
	pe, ok := e.pod(key)
	if !ok {
		return pe, errs.Cached{}
	}
	return pe, errs.Cached{OK: true, Assumed: pe.Assumed, Node: pe.Pod.Spec.NodeName}
}

// full reports whether node is known to the fork and holds
// nodeinfo.MaxPodsPerNode pods.
func (e *forkEdit) full(node string) bool {
	slot, ok := e.slotOf(node)
	return ok && e.numPods(slot) >= nodeinfo.MaxPodsPerNode
}

// taken reports whether pod key is in the fork.
func (e *forkEdit) taken(key string) bool {
	_, ok := e.pod(key)
	return ok
}

// setPod records pod key's entry; dropPod its removal.
func (e *forkEdit) setPod(key string, pe PodEntry) {
	e.pend[key] = pendPod{o: podOver{e: pe}}
}

func (e *forkEdit) dropPod(key string) {
	switch _, under := e.podUnder(key); {
	case under:
		e.pend[key] = pendPod{o: podOver{gone: true}}
	case e.over.Len() > 0 && e.overHas(key):
		e.pend[key] = pendPod{del: true}
	default:
		delete(e.pend, key)
	}
}

func (e *forkEdit) overHas(key string) bool {
	_, ok := e.over.Get(key)
	return ok
}

// applyPend applies the open edit's pod changes to over.
func (e *forkEdit) applyPend() {
	for k, p := range e.pend {
		if p.del {
			e.over.Delete(k)
		} else {
			e.over.Set(k, p.o)
		}
	}
	clear(e.pend)
}

// ---- pods ----

func forkPodError(op string, pod *v1.Pod, err error) error {
	var pe *errs.PodError
	if errors.As(err, &pe) {
		return err
	}
	name := "<nil>"
	if pod != nil {
		name = pod.Namespace + "/" + pod.Name
	}
	return &errs.PodError{Op: op, Key: name, Err: err}
}

// attach aggregates info into slot's entry. An entry the edit has not
// thawed is not thawed for it: the add is deferred (adds, chained per
// entry) until something needs the entry's aggregate (state: another
// kind of change; close: the entry is frozen), which then replays the
// entry's adds in order. Only the pod count is asked of an entry before
// that (numPods), and it is the frozen entry's plus the adds. So a run of
// adds that is reverted (the what-if pattern) never copies an entry.
func (e *forkEdit) attach(slot int32, info *nodeinfo.PodInfo) {
	e.changed = true
	t, ok := e.touched[slot]
	if ok && t.st != nil {
		t.st.AddPod(info)
		return
	}
	if !ok {
		t = touchedNode{init: e.frozen(slot), last: -1}
	}
	e.adds = append(e.adds, deferredAdd{info: info, prev: t.last})
	t.last = int32(len(e.adds) - 1)
	t.n++
	e.touched[slot] = t
}

// detach removes the stored pod key from slot's entry (affinity sub-lists
// searched as aff and anti say, as the cache), deleting an entry left
// without pods and node object unless keep.
func (e *forkEdit) detach(name string, slot int32, key string, aff, anti, keep bool) error {
	st := e.state(slot)
	if err := st.RemovePod(key, aff, anti); err != nil {
		return err
	}
	e.changed = true
	if !keep && st.NumPods() == 0 && st.Node() == nil {
		e.deleteEntry(name, slot)
	}
	return nil
}

// deleteEntry frees the nodeless entry name (at slot) without pods.
func (e *forkEdit) deleteEntry(name string, slot int32) {
	if t, ok := e.touched[slot]; ok && t.st != nil && len(e.free) < forkFreeMax {
		e.free = append(e.free, t.st)
	}
	delete(e.touched, slot)
	e.nodes.Set(int(slot), nil)
	e.s.nodeCount--
	e.ghosts.Delete(name)
	e.forget()
}

// target finds the entry a pod operation names, or a *PodError wrapping
// ErrNodeNotFound.
func (e *forkEdit) target(op, key, node string) (int32, error) {
	slot, ok := e.slotOf(node)
	if !ok {
		return 0, &errs.PodError{Op: op, Key: key, Node: node, Err: errs.ErrNodeNotFound}
	}
	return slot, nil
}

// AssumePod assumes pod on pod.Spec.NodeName, as Cache.AssumePod: the pod
// must not be in the fork (ErrPodAlreadyCached); the node must be known
// to the fork (ErrNodeNotFound) and hold fewer than
// nodeinfo.MaxPodsPerNode pods (ErrTooManyPods).
func (f *Fork) AssumePod(pod *v1.Pod) error {
	const op = "AssumePod"
	info, err := nodeinfo.NewPodInfo(pod)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	return f.assume(op, pod, info)
}

// AssumePodInfo is AssumePod of info.Pod() with info, built by
// nodeinfo.NewPodInfo, as its aggregate: a caller trying one pod on many
// forks or nodes builds it once (upstream v1.37's Snapshot.AssumePod takes
// a PodInfo for the same reason). A nil info, one without a pod or with
// an empty UID is refused as AssumePod refuses such a pod.
func (f *Fork) AssumePodInfo(info *nodeinfo.PodInfo) error {
	const op = "AssumePod"
	pod, err := checkInfo(info)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	return f.assume(op, pod, info)
}

// checkInfo returns info's pod, or the error NewPodInfo gives for it.
func checkInfo(info *nodeinfo.PodInfo) (*v1.Pod, error) {
	pod := info.Pod()
	if _, err := nodeinfo.PodKey(pod); err != nil {
		return pod, err
	}
	return pod, nil
}

func (f *Fork) assume(op string, pod *v1.Pod, info *nodeinfo.PodInfo) error {
	e := f.begin()
	key, node := info.Key(), info.NodeName()
	_, cur := e.cached(key)
	if err := errs.CheckAssume(key, node, cur, e.full); err != nil {
		return err
	}
	slot, err := e.target(op, key, node)
	if err != nil {
		return err
	}
	e.attach(slot, info)
	e.setPod(key, PodEntry{Pod: pod, Assumed: true})
	e.s.podCount++
	return nil
}

// ForgetPod removes an assumed pod, as Cache.ForgetPod: a pod not in the
// fork is a no-op; pod must name the stored pod's node
// (ErrPodNodeMismatch) and the pod must be assumed (ErrPodNotAssumed).
func (f *Fork) ForgetPod(pod *v1.Pod) error {
	const op = "ForgetPod"
	key, err := nodeinfo.PodKey(pod)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	e := f.begin()
	_, cur := e.cached(key)
	if apply, err := errs.CheckForget(key, pod, cur); !apply {
		return err
	}
	stored := cur.Node
	slot, err := e.target(op, key, stored)
	if err != nil {
		return err
	}
	if err := e.detach(stored, slot, key, nodeinfo.PodHasAffinity(pod), nodeinfo.PodHasRequiredAntiAffinity(pod), false); err != nil {
		return &errs.PodError{Op: op, Key: key, Node: stored, Err: err}
	}
	e.dropPod(key)
	e.s.podCount--
	return nil
}

// AddPod confirms an assumed pod (possibly on another node) or adds a new
// one, as Cache.AddPod: an added pod is refused (ErrPodAlreadyAdded), and
// so is one more pod on a full node (ErrTooManyPods) or on a node the
// fork does not know (ErrNodeNotFound).
func (f *Fork) AddPod(pod *v1.Pod) error {
	const op = "AddPod"
	info, err := nodeinfo.NewPodInfo(pod)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	return f.add(op, pod, info)
}

// AddPodInfo is AddPod of info.Pod() with info, built by
// nodeinfo.NewPodInfo, as its aggregate (see AssumePodInfo).
func (f *Fork) AddPodInfo(info *nodeinfo.PodInfo) error {
	const op = "AddPod"
	pod, err := checkInfo(info)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	return f.add(op, pod, info)
}

func (f *Fork) add(op string, pod *v1.Pod, info *nodeinfo.PodInfo) error {
	e := f.begin()
	key, node := info.Key(), info.NodeName()
	cur, st := e.cached(key)
	if err := errs.CheckAdd(key, node, st, e.full); err != nil {
		return err
	}
	slot, err := e.target(op, key, node)
	if err != nil {
		return err
	}
	ok := st.OK
	if ok {
		from, err := e.target(op, key, cur.Pod.Spec.NodeName)
		if err != nil {
			return err
		}
		if err := e.detach(cur.Pod.Spec.NodeName, from, key, nodeinfo.PodHasAffinity(cur.Pod), nodeinfo.PodHasRequiredAntiAffinity(cur.Pod), from == slot); err != nil {
			return &errs.PodError{Op: op, Key: key, Node: node, Err: err}
		}
	} else {
		e.s.podCount++
	}
	e.attach(slot, info)
	e.setPod(key, PodEntry{Pod: pod})
	return nil
}

// UpdatePod replaces an added pod, as Cache.UpdatePod: refused with
// nothing changed are a pod not in the fork (ErrPodNotFound), an assumed
// pod (ErrPodAssumed), a new pod on another node than the stored one
// (*CorruptionError), an old pod naming another node (ErrPodNodeMismatch)
// and a new UID held by another pod (ErrUIDMismatch). A new, free UID
// renames the pod.
func (f *Fork) UpdatePod(oldPod, newPod *v1.Pod) error {
	const op = "UpdatePod"
	key, err := nodeinfo.PodKey(oldPod)
	if err != nil {
		return forkPodError(op, oldPod, err)
	}
	info, err := nodeinfo.NewPodInfo(newPod)
	if err != nil {
		return forkPodError(op, newPod, err)
	}
	e := f.begin()
	_, cur := e.cached(key)
	newKey := info.Key()
	if err := errs.CheckUpdate(key, oldPod, newKey, info.NodeName(), cur, e.taken); err != nil {
		return err
	}
	stored := cur.Node
	slot, err := e.target(op, key, stored)
	if err != nil {
		return err
	}
	if err := e.detach(stored, slot, key, nodeinfo.PodHasAffinity(oldPod), nodeinfo.PodHasRequiredAntiAffinity(oldPod), true); err != nil {
		return &errs.PodError{Op: op, Key: key, Node: stored, Err: err}
	}
	e.attach(slot, info)
	if newKey != key {
		e.dropPod(key)
	}
	e.setPod(newKey, PodEntry{Pod: newPod})
	return nil
}

// RemovePod removes a pod (assumed or added), as Cache.RemovePod: a pod not
// in the fork is ErrPodNotFound; a non-empty node name other than the
// stored pod's is a *CorruptionError.
func (f *Fork) RemovePod(pod *v1.Pod) error {
	const op = "RemovePod"
	key, err := nodeinfo.PodKey(pod)
	if err != nil {
		return forkPodError(op, pod, err)
	}
	e := f.begin()
	cur, st := e.cached(key)
	if err := errs.CheckRemove(key, pod, st); err != nil {
		return err
	}
	stored := st.Node
	slot, err := e.target(op, key, stored)
	if err != nil {
		return err
	}
	if err := e.detach(stored, slot, key, nodeinfo.PodHasAffinity(cur.Pod), nodeinfo.PodHasRequiredAntiAffinity(cur.Pod), false); err != nil {
		return &errs.PodError{Op: op, Key: key, Node: stored, Err: err}
	}
	e.dropPod(key)
	e.s.podCount--
	return nil
}

// ---- nodes ----

// nodeOp prepares a node operation: the pending edit is closed (a node
// operation is an edit of its own) and one opened on the current state
// with its zone tree (a deferred list stays deferred).
func (f *Fork) nodeOp(op, name string) (*forkEdit, error) {
	f.close()
	t, err := f.levelTree()
	if err != nil {
		return nil, &errs.NodeError{Op: op, Name: name, Err: err}
	}
	e := f.open()
	e.tree = t
	return e, nil
}

// newEntry makes a nodeless entry named name at a new slot, and gives
// that slot to every place the zone tree lists name at: a name the tree
// kept after its entry went (a RemoveNode naming another zone, upstream's
// failed tree removal) carries the slot of that entry, and the cache,
// which lists its tree by name, lists the new entry there. O(zones + the
// tree's changes in the zones listing name).
func (e *forkEdit) newEntry(name string) int32 {
	slot := int32(e.nodes.Len())
	e.tree = e.tree.SetID(name, slot)
	e.nodes.Append(nil)
	var st *nodeinfo.NodeState
	if n := len(e.free); n > 0 {
		st, e.free[n-1] = e.free[n-1], nil
		e.free = e.free[:n-1]
	}
	st = nodeinfo.NewNodeStateInto(st, forkNextGen)
	e.touched[slot] = touchedNode{st: st}
	e.s.nodeCount++
	return slot
}

// setNode makes node the object of slot's entry, replacing old (may be
// nil). Its image summaries, read from the fork's registry after old is
// unregistered and node registered, are set on the first read of the
// list (applyImages): a node operation nobody reads pays nothing for
// images.
func (e *forkEdit) setNode(slot int32, old, node *v1.Node) {
	st := e.state(slot)
	e.setOp(imgOp{name: node.Name, slot: slot, stored: old, drop: old, add: node})
	st.SetNode(node)
	st.SetImages(nil)
	e.index.Set(node.Name, slot)
	e.ghosts.Delete(node.Name)
	e.forget()
	e.changed = true
	e.nodeOps++
}

// setOp records the edit's node operation's image change (one per edit:
// a node operation is an edit of its own).
func (e *forkEdit) setOp(op imgOp) {
	op.prev = e.imgs
	e.op, e.hasOp = op, true
}

// applyImages applies ops (newest first) to s's image registry (s.images:
// summaries and stray registrations), in order, with the cache's rule
// (imagereg.Register, Unregister, Strays), and gives each entry they set a
// node object the image summaries of its last such operation: its node's
// names read from the registry as of then, as the cache's snapshot
// published after that operation shows them (an entry deleted since is
// skipped; a ghost keeps them, invisible, as in the cache). Cost:
// O(operations x their nodes' images x log).
func applyImages(s *Snapshot, ops *imgOp) {
	if ops == nil {
		return
	}
	// The newest operation per slot is the one whose view is shown; only
	// its version of the table is kept (one Done each).
	var seq []*imgOp
	shown := make(map[int32]*imgOp)
	for o := ops; o != nil; o = o.prev {
		seq = append(seq, o)
		if _, ok := shown[o.slot]; !ok {
			shown[o.slot] = o
		}
	}
	var ed immutable.MapEditor[nodeinfo.ImageStateSummary]
	s.images.Map().EditInto(&ed)
	counts := imagereg.TableCounts{Ed: &ed}
	strays := s.images.Strays()
	views := make(map[int32]nodeinfo.ImageView, len(shown))
	var members []string
	for i := len(seq) - 1; i >= 0; i-- {
		o := seq[i]
		was, _ := strays.Get(o.name)
		members = append(append(members[:0], was...), nodeinfo.ImageNames(o.stored)...)
		members = imagereg.Unregister(members, o.drop, counts)
		members = imagereg.Register(members, o.add, counts)
		names := nodeinfo.ImageNames(o.add)
		if now := imagereg.Strays(members, names); now != nil || was != nil {
			sed := strays.Edit()
			if now == nil {
				sed.Delete(o.name)
			} else {
				sed.Set(o.name, now)
			}
			strays = sed.Done()
		}
		if o.add != nil && shown[o.slot] == o {
			t := nodeinfo.NewImageTableWith(ed.Done(), strays)
			t.Map().EditInto(&ed)
			views[o.slot] = nodeinfo.ImageView{Names: names, Table: t}
		}
	}
	s.images = nodeinfo.NewImageTableWith(ed.Done(), strays)
	if len(views) == 0 {
		return
	}
	ned := s.nodes.Edit()
	for slot, v := range views {
		if ni := ned.Get(int(slot)); ni != nil {
			ned.Set(int(slot), ni.WithImages(v))
		}
	}
	s.nodes = ned.Done()
}

// nodeObj returns the node object of slot's entry.
func (e *forkEdit) nodeObj(slot int32) *v1.Node {
	if t, ok := e.touched[slot]; ok && t.st != nil {
		return t.st.Node()
	}
	return e.nodes.Get(int(slot)).Node()
}

// AddNode adds node or replaces the object of its entry (a ghost's
// included), as Cache.AddNode, and lists it in its zone. A nil node is
// refused with a *NodeError wrapping nodeinfo.ErrNilNode.
func (f *Fork) AddNode(node *v1.Node) error {
	if node == nil {
		return errs.NilNode("AddNode")
	}
	e, err := f.nodeOp("AddNode", node.Name)
	if err != nil {
		return err
	}
	slot, ok := e.slotOf(node.Name)
	var old *v1.Node
	if !ok {
		slot = e.newEntry(node.Name)
	} else {
		old = e.nodeObj(slot)
	}
	e.tree = e.tree.AddID(node, slot)
	e.setNode(slot, old, node)
	f.close()
	return nil
}

// UpdateNode replaces the object of newNode.Name (adding the node if it
// has no entry), moving it in the zone order when the zone keys of oldNode
// and newNode differ, as Cache.UpdateNode, with the same refusals
// (nodeinfo.ErrNilNode, ErrNodeNameMismatch).
func (f *Fork) UpdateNode(oldNode, newNode *v1.Node) error {
	if err := errs.CheckUpdateNodeArgs(oldNode, newNode); err != nil {
		return err
	}
	e, err := f.nodeOp("UpdateNode", newNode.Name)
	if err != nil {
		return err
	}
	live := func(name string) bool { _, ok := e.index.Get(name); return ok }
	if err := errs.CheckUpdateNodeName(oldNode, newNode, e.tree.InZone, live); err != nil {
		f.discard()
		return err
	}
	slot, ok := e.slotOf(newNode.Name)
	var old *v1.Node
	if !ok {
		slot = e.newEntry(newNode.Name)
		e.tree = e.tree.AddID(newNode, slot)
	} else {
		old = e.nodeObj(slot)
	}
	e.tree = e.tree.UpdateID(oldNode, newNode, slot)
	e.setNode(slot, old, newNode)
	f.close()
	return nil
}

// RemoveNode removes node's object, as Cache.RemoveNode: an entry that
// holds pods stays as a ghost (not listed, not found by Get) until its
// last pod leaves. A node without an entry is ErrNodeNotFound; a node
// missing from the zone its labels name is a *NodeError wrapping
// ErrNodeNotFound and nodetree.ErrNodeNotInZone, after the entry changed.
func (f *Fork) RemoveNode(node *v1.Node) error {
	const op = "RemoveNode"
	if node == nil {
		return errs.NilNode(op)
	}
	e, err := f.nodeOp(op, node.Name)
	if err != nil {
		return err
	}
	slot, ok := e.slotOf(node.Name)
	if !ok {
		f.discard()
		return errs.NodeNotFound(op, node.Name)
	}
	st := e.state(slot)
	stored := st.Node()
	had := stored != nil
	st.ClearNode()
	e.changed = true
	e.nodeOps++
	e.index.Delete(node.Name)
	e.forget()
	if st.NumPods() == 0 {
		e.deleteEntry(node.Name, slot)
	} else if had {
		e.ghosts.Set(node.Name, slot)
		e.forget()
	}
	var terr error
	e.tree, terr = e.tree.Remove(node)
	if terr == nil {
		// The node passed in is unregistered, as in the cache, which may
		// leave registrations stored lists and node does not (strays).
		e.setOp(imgOp{name: node.Name, slot: -1, stored: stored, drop: node})
	} else if stored != nil {
		// Nothing is unregistered: stored's registrations become strays.
		e.setOp(imgOp{name: node.Name, slot: -1, stored: stored})
	}
	f.close()
	if terr != nil {
		return errs.RemoveNodeNotInZone(node.Name, terr)
	}
	return nil
}

// PodChange is one pod's change in a fork since its base: its entry in the
// base (InBase) and now (InNow). A value, immutable; its pods are shared
// and must not be mutated.
type PodChange struct {
	Key           string
	Base, Now     PodEntry
	InBase, InNow bool
}

// PodChanges calls fn for every pod whose entry in the fork differs from
// its base (pods changed and changed back are included, with equal
// entries), in no set order, until fn returns false. Cost: O(changed pods
// x log). Cache.Commit applies them.
func (f *Fork) PodChanges(fn func(PodChange) bool) {
	s := f.Snapshot()
	s.over.Range(func(k string, o podOver) bool {
		c := PodChange{Key: k, Now: o.e, InNow: !o.gone}
		c.Base, c.InBase = s.podUnder(k)
		return fn(c)
	})
}

// NodeChanges returns the number of node operations (AddNode, UpdateNode,
// RemoveNode) that changed the fork's current state since its base.
func (f *Fork) NodeChanges() int {
	f.close()
	return f.cur.nodeOps
}
