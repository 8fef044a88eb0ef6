package snapshot

import (
	"cmp"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/schedcache/schedcache/internal/immutable"
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
	noCum   [2]*aux     // a source aux and its copy without the running PVC delta (fork states carry none)
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
		if s.ll != nil && s.ll.pvc != nil {
			counts := s.ll.pvc.counts // the refreshed snapshot's counts, pending delta included
			c.pc.once.Do(func() { c.pc.counts = counts })
		}
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
	if e.s.aux != nil && e.s.aux.pvcCum.Len() > 0 {
		// A fork's state is never refreshed and carries no running PVC
		// delta (which only a nodeless published snapshot reads).
		if f.noCum[0] != e.s.aux {
			a := *e.s.aux
			a.pvcCum = immutable.Map[int64]{}
			f.noCum = [2]*aux{e.s.aux, &a}
		}
		e.s.aux = f.noCum[1]
	}
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

// ---- pods ----

// ---- nodes ----

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
