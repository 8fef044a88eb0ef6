// Package actor holds the coordinator: the single goroutine that sequences
// every cache operation, owns the pod state machine, the zone tree and the
// image registry, drives the shards that own node state, and publishes
// snapshots.
//
// Core is the deterministic state machine (no goroutines, no clock: time is
// passed in); Coordinator is the goroutine around it.
package actor

import (
	"cmp"
	"container/heap"
	"fmt"
	"hash/maphash"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/framework"
	"github.com/schedcache/schedcache/internal/persist"
	"github.com/schedcache/schedcache/nodetree"
	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

// podRecord is the coordinator's state of one cached pod. Owned by the
// coordinator goroutine.
type podRecord struct {
	info            *framework.PodInfo // the stored pod and what was aggregated for it
	entry           *entry             // the entry holding it (the stored pod's node)
	assumed         bool
	bindingFinished bool
	hasDeadline     bool   // an expiry-heap item with generation armed holds the deadline
	armed           uint64 // generation of the expiry-heap item that may expire it
}

// dirtyPod is a change of a pod's snapshot entry: the record that holds
// the pod now, or nil if it was removed. A record replaced in place later in
// the epoch is read as it is at BuildMeta; since the changes are applied in
// order and the last change of a key wins, the snapshot gets the final
// state either way. Owned by the coordinator goroutine.
type dirtyPod struct {
	key string
	rec *podRecord
}

// entry is the coordinator's view of one NodeInfo entry; the NodeState
// itself lives in shard `shard` at `slot`. Owned by the coordinator goroutine.
type entry struct {
	name      string
	slot      int32
	shard     int
	node      *v1.Node // nil: nodeless (ghost, or created by a pod)
	pods      int
	aff, anti int                   // lengths of the shard's affinity sub-lists
	pvc       map[string]int        // PVCRefCounts of the entry (nil when empty)
	names     []string              // image names of node, each once (framework.ImageNames); immutable, shared with the shard
	sent      *framework.ImageTable // registry version of the image view the shard has
	viewStale bool                  // names changed since the shard got its view
	ghost     []ghostImage          // a ghost's summaries from its last registration (upstream keeps them; Dump shows them)
	pvcOn     bool                  // its PVC keys count in Core.pvcUsed: it has a node object and is in the node list (upstream builds the used set from its list)
	indexed   bool                  // in the published name index
	dirty     bool                  // touched in the current epoch
	deleted   bool
}

// slotState mirrors, densely by slot, what building the node lists reads of
// an entry, so that a rebuild walks an array instead of the entries. Owned
// by the coordinator goroutine; kept in step by newEntry, deleteEntry,
// setNode, RemoveNode, aggregate and subtract.
type slotState struct {
	hasNode bool // the slot's entry has a node object
	aff     bool // entry.aff > 0
	anti    bool // entry.anti > 0
	inAff   bool // in the affinity list being built (valid while the slot is in the node list)
	inAnti  bool // in the anti-affinity list being built (same)
}

// imageState is one incarnation of the registry's summary of an image
// name (upstream's shared *ImageStateSummary): the size the first node
// reported and how many nodes list it. Which nodes those are is kept per
// node in Core.nodeImages (a few names per node instead of a set of node
// names per image). It dies (count 0, out of the registry) when its last
// node leaves; the name registered again gets a new incarnation. Owned by
// the coordinator goroutine.
type imageState struct {
	size  int64
	count int
}

// ghostImage is one image summary a ghost keeps from its last
// registration: the incarnation (nil if the name was not registered) and
// the size the node listed. Owned by the coordinator goroutine.
type ghostImage struct {
	name string
	st   *imageState
	size int64
}

// Core is the coordinator's state. Contract: not safe for concurrent use;
// owned by one goroutine. Operations never block; the mutations they imply
// accumulate per shard until the actor delivers them and calls the flush
// steps (PendingMutations, BuildMeta, ApplyFrozen, Commit).
//
// Every field is owned by the goroutine that owns the Core (the
// coordinator's, or a test's through Local); nothing here is shared.
type Core struct {
	ttl     time.Duration          // read-only after NewCore
	nshards int                    // read-only after NewCore
	seed    maphash.Seed           // node name -> shard hash; read-only after NewCore
	pods    map[string]*podRecord  // pod key -> state; the pod state machine
	nodes   map[string]*entry      // node name -> entry, ghosts and nodeless ones included
	tree    *nodetree.Tree         // zone-interleaved order of the node objects
	images  map[string]*imageState // image name -> size and number of nodes listing it
	// nodeImages is the registry's membership: node name -> the image names
	// registered for it (upstream's per-image node sets, stored per node).
	nodeImages    map[string][]string
	table         *framework.ImageTable                          // the registry as of the last syncTable; immutable
	tableEd       persist.MapEditor[framework.ImageStateSummary] // scratch editor of table
	imgChanged    []string                                       // names whose summary may have changed since the last syncTable
	imgChangedSet map[string]struct{}                            // the same names, for dedup
	expiry        expiryHeap                                     // armed deadlines, earliest first; stale items skipped
	armSeq        uint64                                         // generation of the last armed deadline

	freeSlots  []int32 // reusable slots
	freedEpoch []int32 // slots freed in the current epoch; reusable after Commit
	nextSlot   int32

	seq           uint64                   // operations applied
	muts          [][]shard.Mutation       // per shard, current epoch
	dirtyEntries  []*entry                 // touched entries, current epoch
	dirtyPods     []dirtyPod               // pod changes of the current epoch, in order (a key may repeat: the last wins)
	dirtyPVC      []string                 // used-PVC keys whose membership may have changed
	pvcUsed       map[string]int           // PVC key -> entries with a node that reference it
	listsDirty    bool                     // node list (and so the affinity lists) must be rebuilt
	affFlips      []*entry                 // entries whose aff or anti count crossed zero this epoch (duplicates allowed)
	listPos       []int32                  // slot -> index in the node list of the last buildLists; -1: not listed
	listIrregular bool                     // the last buildLists saw a slot twice: affinity edits rebuild
	affEdits      []persist.SeqEdit[int32] // scratch for editAffinityLists
	antiEdits     []persist.SeqEdit[int32] // scratch for editAffinityLists
	affBuf        []int32                  // scratch for buildAffinityLists
	antiBuf       []int32                  // scratch for buildAffinityLists
	byListPos     func(a, b int32) int     // compareListPos, bound once: Seq.Edit's order
	bySlot        []*entry                 // slot -> live entry (nil when free)
	slots         []slotState              // slot -> list-building state; zero when free
	treeVersion   uint64                   // tree version the published lists were built from
	listBuf       []string                 // scratch for tree lists
	idBuf         []int32                  // scratch for tree lists by slot
	slotBuf       []int32                  // scratch for PrefetchFrozen
	treeStale     bool                     // a removed node's name stayed in the tree: a listed name may have outlived its entry (and slot)
	withNode      int                      // entries with a node object
	unlisted      bool                     // the last buildLists left out some entry with a node object (see reconcilePVC)
	builder       *snapshot.Builder        // the next snapshot; the last committed one is published
	assumed       int                      // pods in the assumed state (kept by aggregate, replace and subtract)
}

// NewCore returns an empty coordinator state for nshards shards (>= 1) and
// the given assumed-pod TTL (0: never expire).
func NewCore(nshards int, ttl time.Duration) *Core {
	if nshards < 1 {
		nshards = 1
	}
	c := &Core{
		ttl:           ttl,
		nshards:       nshards,
		seed:          maphash.MakeSeed(),
		pods:          make(map[string]*podRecord),
		nodes:         make(map[string]*entry),
		tree:          nodetree.New(),
		images:        make(map[string]*imageState),
		nodeImages:    make(map[string][]string),
		imgChangedSet: make(map[string]struct{}),
		muts:          make([][]shard.Mutation, nshards),
		pvcUsed:       make(map[string]int),
		builder:       snapshot.NewBuilder(),
	}
	c.treeVersion = c.tree.Version()
	c.byListPos = c.compareListPos
	return c
}

// Shards returns the number of shards the core routes to.
func (c *Core) Shards() int { return c.nshards }

// Last returns the last committed snapshot.
func (c *Core) Last() *snapshot.Snapshot { return c.builder.Last() }

// Dirty reports whether operations since the last Commit changed anything
// a snapshot shows.
func (c *Core) Dirty() bool {
	return len(c.dirtyEntries) > 0 || len(c.dirtyPods) > 0 || len(c.dirtyPVC) > 0 || c.listsDirty || len(c.affFlips) > 0
}

// ---- entries ----

func (c *Core) shardOf(name string) int {
	if c.nshards == 1 {
		return 0
	}
	return int(maphash.String(c.seed, name) % uint64(c.nshards))
}

func (c *Core) emit(e *entry, m shard.Mutation) {
	m.Slot = e.slot
	c.muts[e.shard] = append(c.muts[e.shard], m)
	c.touch(e)
}

func (c *Core) touch(e *entry) {
	if !e.dirty {
		e.dirty = true
		c.dirtyEntries = append(c.dirtyEntries, e)
	}
}

func (c *Core) newEntry(name string) *entry {
	var slot int32
	if n := len(c.freeSlots); n > 0 {
		slot = c.freeSlots[n-1]
		c.freeSlots = c.freeSlots[:n-1]
	} else {
		slot = c.nextSlot
		c.nextSlot++
	}
	e := &entry{name: name, slot: slot, shard: c.shardOf(name)}
	c.nodes[name] = e
	for int(slot) >= len(c.bySlot) {
		c.bySlot = append(c.bySlot, nil)
		c.slots = append(c.slots, slotState{})
	}
	c.bySlot[slot] = e
	c.slots[slot] = slotState{}
	c.emit(e, shard.Mutation{Kind: shard.Create})
	return e
}

func (c *Core) deleteEntry(e *entry) {
	c.emit(e, shard.Mutation{Kind: shard.Delete})
	e.deleted = true
	delete(c.nodes, e.name)
	c.bySlot[e.slot] = nil
	c.slots[e.slot] = slotState{}
	c.freedEpoch = append(c.freedEpoch, e.slot)
}

// reconcilePVC counts the entry's PVC keys in the used set exactly while it
// has a node object and is in the node list of the last buildLists: the
// set upstream builds by walking its list (only a pods-first entry given a
// node by UpdateNode has a node but no place in the list).
func (c *Core) reconcilePVC(e *entry) {
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

func (c *Core) bumpPVC(k string, sign int) {
	n := c.pvcUsed[k] + sign
	if n <= 0 {
		delete(c.pvcUsed, k)
	} else {
		c.pvcUsed[k] = n
	}
	if n == 0 || (n == 1 && sign > 0) {
		c.dirtyPVC = append(c.dirtyPVC, k)
	}
}

// ---- pods ----

func (c *Core) aggregate(info *framework.PodInfo, assumed bool) {
	r := &podRecord{info: info, entry: c.attach(info), assumed: assumed}
	if assumed {
		c.assumed++
	}
	key := info.Key()
	c.pods[key] = r
	c.dirtyPods = append(c.dirtyPods, dirtyPod{key: key, rec: r})
}

// attach adds info to the entry of its node (created if missing) and
// returns that entry.
func (c *Core) attach(info *framework.PodInfo) *entry {
	e := c.nodes[info.NodeName()]
	if e == nil {
		e = c.newEntry(info.NodeName())
	}
	c.emit(e, shard.Mutation{Kind: shard.AddPod, Pod: info})
	e.pods++
	if info.HasAffinity() {
		e.aff++
		if e.aff == 1 {
			c.slots[e.slot].aff = true
			c.affFlips = append(c.affFlips, e)
		}
	}
	if info.HasRequiredAntiAffinity() {
		e.anti++
		if e.anti == 1 {
			c.slots[e.slot].anti = true
			c.affFlips = append(c.affFlips, e)
		}
	}
	for _, k := range info.PVCKeys() {
		if e.pvc == nil {
			e.pvc = make(map[string]int)
		}
		e.pvc[k]++
		if e.pvc[k] == 1 && e.pvcOn {
			c.bumpPVC(k, +1)
		}
	}
	return e
}

// subtract removes the stored pod of r from its entry and from the cache.
// aff and anti say whether the affinity sub-lists are searched (decided by
// the pod object the caller passed, as upstream).
func (c *Core) subtract(r *podRecord, aff, anti bool) {
	if r.assumed {
		c.assumed--
	}
	c.detach(r, aff, anti)
	key := r.info.Key()
	delete(c.pods, key)
	c.dirtyPods = append(c.dirtyPods, dirtyPod{key: key})
}

// replace swaps the stored pod of r for info (same key), exactly as a
// subtract followed by an aggregate of an added pod (upstream's updatePod:
// removePod then addPod), but keeps r in the pod map: the record is reset
// in place, so the map is neither searched nor written. An expiry-heap item
// still pointing at r is stale from then on (r is no longer assumed).
func (c *Core) replace(r *podRecord, aff, anti bool, info *framework.PodInfo) {
	if r.assumed {
		c.assumed--
	}
	c.detach(r, aff, anti)
	*r = podRecord{info: info, entry: c.attach(info)}
	c.dirtyPods = append(c.dirtyPods, dirtyPod{key: info.Key(), rec: r})
}

// detach removes the stored pod of r from its entry, deleting the entry if
// that left it without pods and without a node.
func (c *Core) detach(r *podRecord, aff, anti bool) {
	e := r.entry
	c.emit(e, shard.Mutation{Kind: shard.RemovePod, Pod: r.info, Key: r.info.Key(), Affinity: aff, AntiAffinity: anti})
	e.pods--
	if aff && r.info.HasAffinity() {
		e.aff--
		if e.aff == 0 {
			c.slots[e.slot].aff = false
			c.affFlips = append(c.affFlips, e)
		}
	}
	if anti && r.info.HasRequiredAntiAffinity() {
		e.anti--
		if e.anti == 0 {
			c.slots[e.slot].anti = false
			c.affFlips = append(c.affFlips, e)
		}
	}
	for _, k := range r.info.PVCKeys() {
		e.pvc[k]--
		if e.pvc[k] <= 0 {
			delete(e.pvc, k)
			if e.pvcOn {
				c.bumpPVC(k, -1)
			}
		}
	}
	if len(e.pvc) == 0 {
		e.pvc = nil
	}
	if e.pods == 0 && e.node == nil {
		c.deleteEntry(e)
	}
}

// full reports whether the entry named name, if any, already holds
// framework.MaxPodsPerNode pods: one more could make its totals overflow
// (the arithmetic is at framework.MaxPodQuantity).
func (c *Core) full(name string) bool {
	e := c.nodes[name]
	return e != nil && e.pods >= framework.MaxPodsPerNode
}

// AssumePod moves an absent pod to Assumed and aggregates it. A pod
// without a node name is assumed on a nodeless entry named "", as upstream.
func (c *Core) AssumePod(info *framework.PodInfo) error {
	c.seq++
	key := info.Key()
	if _, ok := c.pods[key]; ok {
		return &PodError{Op: "AssumePod", Key: key, Node: info.NodeName(), Err: ErrPodAlreadyCached}
	}
	if c.full(info.NodeName()) {
		return &PodError{Op: "AssumePod", Key: key, Node: info.NodeName(), Err: ErrTooManyPods}
	}
	c.aggregate(info, true)
	return nil
}

// FinishBinding arms the expiry deadline of an assumed pod; it is a no-op
// for other pods.
func (c *Core) FinishBinding(key string, now time.Time) error {
	c.seq++
	r, ok := c.pods[key]
	if !ok || !r.assumed {
		return nil
	}
	r.bindingFinished = true
	if c.ttl == 0 {
		r.hasDeadline = false
		return nil
	}
	r.hasDeadline = true
	c.armSeq++
	r.armed = c.armSeq
	heap.Push(&c.expiry, expiryItem{deadline: now.Add(c.ttl), key: key, rec: r, armed: r.armed})
	return nil
}

// ForgetPod removes an assumed pod. pod is the caller's object: its node
// name must match and its affinity decides the sub-list bookkeeping.
func (c *Core) ForgetPod(key string, pod *v1.Pod) error {
	c.seq++
	r, ok := c.pods[key]
	if !ok {
		return nil
	}
	if stored := r.info.NodeName(); pod.Spec.NodeName != stored {
		return &PodError{Op: "ForgetPod", Key: key, Node: pod.Spec.NodeName, Err: ErrPodNodeMismatch}
	}
	if !r.assumed {
		return &PodError{Op: "ForgetPod", Key: key, Node: pod.Spec.NodeName, Err: ErrPodNotAssumed}
	}
	c.subtract(r, framework.PodHasAffinity(pod), framework.PodHasRequiredAntiAffinity(pod))
	return nil
}

// AddPod confirms an assumed pod (possibly on another node), re-adds an
// expired one, or adds a new one.
func (c *Core) AddPod(info *framework.PodInfo) error {
	c.seq++
	key := info.Key()
	r, ok := c.pods[key]
	switch {
	case ok && !r.assumed:
		return &PodError{Op: "AddPod", Key: key, Node: info.NodeName(), Err: ErrPodAlreadyAdded}
	case (!ok || r.entry.name != info.NodeName()) && c.full(info.NodeName()):
		// A confirmation on the assumed pod's own node swaps one pod for
		// another; anywhere else the pod is one more on its node.
		return &PodError{Op: "AddPod", Key: key, Node: info.NodeName(), Err: ErrTooManyPods}
	case !ok:
		c.aggregate(info, false)
	default:
		c.replace(r, r.info.HasAffinity(), r.info.HasRequiredAntiAffinity(), info)
	}
	return nil
}

// UpdatePod replaces an added pod, as upstream's removePod(oldPod) then
// addPod(newPod). oldPod is the caller's old object: it finds the record
// (by its UID) and decides the affinity bookkeeping. A new pod with another
// UID renames the pod (the old key leaves, the new one is added), as
// upstream. Three cases are refused with nothing changed:
//   - the new pod names another node than the cached pod: a
//     *CorruptionError (upstream exits);
//   - oldPod names another node than the cached pod: ErrPodNodeMismatch.
//     Upstream looks the pod up on oldPod's node: an entry with a node
//     object returns its "no corresponding pod" error with nothing changed,
//     as here; a nodeless entry panics (its error message reads the nil
//     node's name); no entry drops the pod's state and adds the new pod to
//     the cached node again, which then holds the pod twice;
//   - the new UID is another cached pod's: ErrUIDMismatch (upstream would
//     hold that key twice on a node and lose the other pod's state).
func (c *Core) UpdatePod(oldPod *v1.Pod, info *framework.PodInfo) error {
	c.seq++
	key := string(oldPod.UID)
	r, ok := c.pods[key]
	if !ok {
		return &PodError{Op: "UpdatePod", Key: key, Err: ErrPodNotFound}
	}
	if r.assumed {
		return &PodError{Op: "UpdatePod", Key: key, Err: ErrPodAssumed}
	}
	stored := r.info.NodeName()
	if info.NodeName() != stored {
		return &CorruptionError{Op: "UpdatePod", Key: key, CachedNode: stored, GivenNode: info.NodeName()}
	}
	if oldPod.Spec.NodeName != stored {
		return &PodError{Op: "UpdatePod", Key: key, Node: oldPod.Spec.NodeName, Err: ErrPodNodeMismatch}
	}
	aff, anti := framework.PodHasAffinity(oldPod), framework.PodHasRequiredAntiAffinity(oldPod)
	if newKey := info.Key(); newKey != key {
		if _, taken := c.pods[newKey]; taken {
			return &PodError{Op: "UpdatePod", Key: key, Node: stored, Err: ErrUIDMismatch}
		}
		c.subtract(r, aff, anti)
		c.aggregate(info, false)
		return nil
	}
	c.replace(r, aff, anti, info)
	return nil
}

// RemovePod removes a cached pod (assumed or added). A non-empty node name
// other than the cached pod's is a *CorruptionError (upstream exits).
func (c *Core) RemovePod(key string, pod *v1.Pod) error {
	c.seq++
	r, ok := c.pods[key]
	if !ok {
		return &PodError{Op: "RemovePod", Key: key, Err: ErrPodNotFound}
	}
	if stored := r.info.NodeName(); pod.Spec.NodeName != stored && pod.Spec.NodeName != "" {
		return &CorruptionError{Op: "RemovePod", Key: key, CachedNode: stored, GivenNode: pod.Spec.NodeName}
	}
	c.subtract(r, r.info.HasAffinity(), r.info.HasRequiredAntiAffinity())
	return nil
}

// ---- expiry ----

type expiryItem struct {
	deadline time.Time
	key      string
	rec      *podRecord
	armed    uint64
}

type expiryHeap []expiryItem

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h expiryHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *expiryHeap) Push(x any)        { *h = append(*h, x.(expiryItem)) }
func (h *expiryHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = expiryItem{}
	*h = old[:len(old)-1]
	return it
}

// Expire removes up to limit assumed pods whose binding finished and whose
// deadline is strictly before now, as upstream's expiry pass does. It
// returns how many it removed and whether more are due now.
func (c *Core) Expire(now time.Time, limit int) (expired int, more bool) {
	for c.expiry.Len() > 0 {
		it := c.expiry[0]
		if !now.After(it.deadline) {
			return expired, false
		}
		if expired >= limit {
			return expired, true
		}
		heap.Pop(&c.expiry)
		r := it.rec
		if c.pods[it.key] != r || !r.assumed || !r.bindingFinished || !r.hasDeadline || r.armed != it.armed {
			continue // stale: re-armed, confirmed, forgotten or removed since
		}
		c.seq++
		c.subtract(r, r.info.HasAffinity(), r.info.HasRequiredAntiAffinity())
		expired++
	}
	return expired, false
}

// ---- nodes ----

func imageNames(node *v1.Node, fn func(name string, size int64)) {
	for i := range node.Status.Images {
		img := &node.Status.Images[i]
		for _, name := range img.Names {
			fn(name, img.SizeBytes)
		}
	}
}

// numImageNames counts node's image names, duplicates included.
func numImageNames(node *v1.Node) int {
	n := 0
	for i := range node.Status.Images {
		n += len(node.Status.Images[i].Names)
	}
	return n
}

// smallSet is the size up to which membership is checked by scanning a
// slice; larger registrations use a map, so a node listing many images
// costs O(images), not O(images^2).
const smallSet = 32

func setOf(names []string) map[string]struct{} {
	m := make(map[string]struct{}, len(names))
	for _, n := range names {
		m[n] = struct{}{}
	}
	return m
}

// registerImages adds node to the node set of every name it lists (3.5):
// a name not in the registry gets a new incarnation with the size node
// lists first; the size of an existing one never changes.
func (c *Core) registerImages(node *v1.Node) {
	list := c.nodeImages[node.Name]
	var member map[string]struct{}
	if len(list)+numImageNames(node) > smallSet {
		member = setOf(list)
	}
	imageNames(node, func(name string, size int64) {
		if member != nil {
			if _, ok := member[name]; ok {
				return // already a member: size stays first-writer-wins
			}
			member[name] = struct{}{}
		} else if slices.Contains(list, name) {
			return
		}
		st, ok := c.images[name]
		if !ok {
			st = &imageState{size: size}
			c.images[name] = st
		}
		st.count++
		list = append(list, name)
		c.imageChanged(name)
	})
	if len(list) > 0 {
		c.nodeImages[node.Name] = list
	}
}

// unregisterImages removes node's name from the node set of every name
// node lists; an incarnation left with no nodes dies.
func (c *Core) unregisterImages(node *v1.Node) {
	list := c.nodeImages[node.Name]
	if len(list) == 0 {
		return
	}
	drop := func(name string) {
		if st := c.images[name]; st != nil {
			if st.count--; st.count <= 0 {
				delete(c.images, name)
			}
			c.imageChanged(name)
		}
	}
	if len(list)+numImageNames(node) > smallSet {
		gone := make(map[string]struct{}, numImageNames(node))
		imageNames(node, func(name string, _ int64) { gone[name] = struct{}{} })
		kept := list[:0]
		for _, name := range list {
			if _, ok := gone[name]; ok {
				drop(name)
			} else {
				kept = append(kept, name)
			}
		}
		clear(list[len(kept):])
		list = kept
	} else {
		imageNames(node, func(name string, _ int64) {
			if i := slices.Index(list, name); i >= 0 {
				list = slices.Delete(list, i, i+1)
				drop(name)
			}
		})
	}
	if len(list) == 0 {
		delete(c.nodeImages, node.Name)
	} else {
		c.nodeImages[node.Name] = list
	}
}

// imageChanged notes that name's summary may have changed; syncTable
// settles it.
func (c *Core) imageChanged(name string) {
	if _, ok := c.imgChangedSet[name]; !ok {
		c.imgChangedSet[name] = struct{}{}
		c.imgChanged = append(c.imgChanged, name)
	}
}

// syncTable brings the published registry version up to date with the
// names changed since the last call. A name whose summary ended where it
// started (a node re-registered with the same images) changes nothing;
// if no summary changed, table stays the same version.
func (c *Core) syncTable() {
	if len(c.imgChanged) == 0 {
		return
	}
	c.table.Map().EditInto(&c.tableEd)
	changed := false
	for _, name := range c.imgChanged {
		delete(c.imgChangedSet, name)
		old, had := c.tableEd.Get(name)
		st := c.images[name]
		if st == nil {
			if had {
				c.tableEd.Delete(name)
				changed = true
			}
			continue
		}
		v := framework.ImageStateSummary{Size: st.size, NumNodes: st.count}
		if !had || old != v {
			c.tableEd.Set(name, v)
			changed = true
		}
	}
	clear(c.imgChanged)
	c.imgChanged = c.imgChanged[:0]
	m := c.tableEd.Done()
	if changed {
		c.table = framework.NewImageTable(m)
	}
}

// replaceImages swaps the registration of old (may be nil) for node's,
// exactly as upstream unregisters and re-registers (an image only node
// holds is re-created with the size node lists first). A heartbeat with
// the same images, whose re-registration would leave the registry as it
// is, skips both steps.
func (c *Core) replaceImages(old, node *v1.Node) {
	if old != nil && sameImages(old, node) && c.reregisterIsNoop(node) {
		// Same summaries, but upstream's image that only node holds dies
		// and is re-created: a ghost keeping the old incarnation sees it
		// count 0 from now on.
		imageNames(node, func(name string, _ int64) {
			if st := c.images[name]; st.count == 1 {
				c.images[name] = &imageState{size: st.size, count: 1}
				st.count = 0
			}
		})
		return
	}
	if old != nil {
		c.unregisterImages(old)
	}
	c.registerImages(node)
}

// sameImages reports whether a and b list the same images: the same names
// and sizes in the same order.
func sameImages(a, b *v1.Node) bool {
	x, y := a.Status.Images, b.Status.Images
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i].SizeBytes != y[i].SizeBytes || !slices.Equal(x[i].Names, y[i].Names) {
			return false
		}
	}
	return true
}

// reregisterIsNoop reports whether unregistering and registering node,
// which is registered, would leave the registry as it is: true unless an
// image only node holds would be re-created with another size than the
// registry's (a size another node fixed before it left). Duplicate names
// with different sizes may report false where re-registration is in fact a
// no-op; the caller then takes the long way.
func (c *Core) reregisterIsNoop(node *v1.Node) bool {
	for i := range node.Status.Images {
		img := &node.Status.Images[i]
		for _, name := range img.Names {
			st := c.images[name]
			if st == nil || (st.count == 1 && st.size != img.SizeBytes) {
				return false
			}
		}
	}
	return true
}

// setNames makes names the image names e's node object lists.
func (c *Core) setNames(e *entry, names []string) {
	e.names = names
	e.viewStale = true
}

// setNode makes node the entry's object. Its image names change only if
// node lists other images than the object it replaces.
func (c *Core) setNode(e *entry, node *v1.Node) {
	if (e.node == nil) != (node == nil) {
		c.withNode += boolSign(node != nil)
	}
	if e.node == nil || node == nil || !sameImages(e.node, node) {
		c.setNames(e, framework.ImageNames(node))
	}
	if node != nil {
		e.ghost = nil
	}
	e.node = node
	c.slots[e.slot].hasNode = node != nil
	c.emit(e, shard.Mutation{Kind: shard.SetNode, Node: node})
}

func boolSign(b bool) int {
	if b {
		return 1
	}
	return -1
}

// AddNode adds node or replaces the object of an existing entry (real,
// ghost, or created by pods), as upstream.
func (c *Core) AddNode(node *v1.Node) {
	c.seq++
	e := c.nodes[node.Name]
	var old *v1.Node
	if e == nil {
		e = c.newEntry(node.Name)
	} else {
		old = e.node
	}
	c.tree.AddID(node, e.slot)
	c.replaceImages(old, node)
	c.setNode(e, node)
}

// UpdateNode replaces the node object keyed by newNode.Name, moving it in
// the zone tree when the zone keys of oldNode and newNode differ, as
// upstream: oldNode serves only to remove oldNode.Name from oldNode's zone
// (a missing name is ignored). oldNode may be nil (zone key "") and may
// have another name. Two cases are refused with nothing changed:
//   - oldNode is nil and newNode has a zone key: ErrNilNode (upstream reads
//     the nil node's labels and panics, after it changed its state);
//   - oldNode has another name, the zone keys differ, and oldNode's zone
//     lists that name for a node the cache holds with its object:
//     ErrNodeNameMismatch (upstream would drop that other node from the
//     zone order while it keeps its object, so it is never listed again).
func (c *Core) UpdateNode(oldNode, newNode *v1.Node) error {
	c.seq++
	newZone := nodetree.ZoneKey(newNode)
	if oldNode == nil && newZone != "" {
		return &NodeError{Op: "UpdateNode", Name: newNode.Name, Err: framework.ErrNilNode}
	}
	if oldNode != nil && oldNode.Name != newNode.Name {
		if oldZone := nodetree.ZoneKey(oldNode); oldZone != newZone && c.tree.InZone(oldNode.Name, oldZone) {
			if other := c.nodes[oldNode.Name]; other != nil && other.node != nil {
				return &NodeError{Op: "UpdateNode", Name: newNode.Name, Err: ErrNodeNameMismatch}
			}
		}
	}
	e := c.nodes[newNode.Name]
	var old *v1.Node
	if e == nil {
		e = c.newEntry(newNode.Name)
		c.tree.AddID(newNode, e.slot)
	} else {
		old = e.node
	}
	c.tree.UpdateID(oldNode, newNode, e.slot)
	c.replaceImages(old, newNode)
	c.setNode(e, newNode)
	return nil
}

// RemoveNode clears the node object; the entry stays as a ghost while it
// holds pods. Tree and image bookkeeping use the passed node, as upstream;
// a node missing from its zone yields an error after the entry changed.
func (c *Core) RemoveNode(node *v1.Node) error {
	c.seq++
	e := c.nodes[node.Name]
	if e == nil {
		return &NodeError{Op: "RemoveNode", Name: node.Name, Err: ErrNodeNotFound}
	}
	if e.node != nil {
		c.withNode--
		// Upstream's ghost keeps the summaries of its last registration
		// (the live incarnations now); Dump shows their counts as they go.
		e.ghost = make([]ghostImage, 0, len(e.names))
		seen := make(map[string]struct{}, len(e.names))
		imageNames(e.node, func(name string, size int64) {
			if _, dup := seen[name]; !dup {
				seen[name] = struct{}{}
				e.ghost = append(e.ghost, ghostImage{name: name, st: c.images[name], size: size})
			}
		})
		c.setNames(e, nil)
	}
	e.node = nil
	c.slots[e.slot].hasNode = false
	c.emit(e, shard.Mutation{Kind: shard.ClearNode})
	if e.pods == 0 {
		c.deleteEntry(e)
	}
	err := c.tree.Remove(node)
	if err != nil || c.tree.Has(node.Name) {
		// The name stays listed (the node named another zone, or it was
		// listed in two) and may outlive its entry and slot: from now on
		// the list is built by name.
		c.treeStale = true
	}
	if err != nil {
		// Upstream returns the tree's error (the node is not in the zone
		// its labels name: a second RemoveNode of a ghost, or stale
		// labels) after the entry changed, as here. It is a NodeError
		// that matches both ErrNodeNotFound and the tree's
		// ErrNodeNotInZone.
		return &NodeError{Op: "RemoveNode", Name: node.Name, Err: fmt.Errorf("%w: %w", ErrNodeNotFound, err)}
	}
	c.unregisterImages(node)
	return nil
}

// Entry reports the shard and slot of the entry named name.
func (c *Core) Entry(name string) (shardIdx int, slot int32, ok bool) {
	e := c.nodes[name]
	if e == nil {
		return 0, 0, false
	}
	return e.shard, e.slot, true
}

// NodeCount returns the number of entries, ghosts and nodeless included.
func (c *Core) NodeCount() int { return len(c.nodes) }

// SlotNames returns slot -> name for every entry (for Dump).
func (c *Core) SlotNames() map[int32]string {
	out := make(map[int32]string, len(c.nodes))
	for name, e := range c.nodes {
		out[e.slot] = name
	}
	return out
}

// AssumedKeys returns the set of assumed pod keys.
func (c *Core) AssumedKeys() map[string]struct{} {
	out := make(map[string]struct{})
	for k, r := range c.pods {
		if r.assumed {
			out[k] = struct{}{}
		}
	}
	return out
}

// ---- flush ----

// PendingMutations completes the epoch's mutations (the image view of
// every touched node whose shard copy reads an older registry version or
// other names) and returns them per shard. The actor delivers shard i's
// slice and must call ResetMutations after every shard has replied.
func (c *Core) PendingMutations() [][]shard.Mutation {
	c.syncTable()
	for _, e := range c.dirtyEntries {
		if e.deleted || e.node == nil {
			continue
		}
		if e.viewStale || e.sent != c.table {
			e.viewStale, e.sent = false, c.table
			c.muts[e.shard] = append(c.muts[e.shard], shard.Mutation{Kind: shard.SetImages, Slot: e.slot,
				Images: &framework.ImageView{Names: e.names, Table: c.table}})
		}
	}
	return c.muts
}

// CurrentImages returns ni with the image summaries an upstream clone of
// the entry taken now shows (Dump, GetNode): a node's names read from the
// registry now; a ghost's summaries of its last registration, with their
// counts now (a dead incarnation counts no nodes); none for an entry that
// never had a node object.
func (c *Core) CurrentImages(name string, ni *framework.NodeInfo) *framework.NodeInfo {
	e := c.nodes[name]
	if ni == nil || e == nil {
		return ni
	}
	if e.node == nil {
		m := make(map[string]framework.ImageStateSummary, len(e.ghost))
		for _, g := range e.ghost {
			s := framework.ImageStateSummary{Size: g.size}
			if g.st != nil {
				s = framework.ImageStateSummary{Size: g.st.size, NumNodes: g.st.count}
			}
			m[g.name] = s
		}
		return ni.WithImageStates(m)
	}
	c.syncTable()
	return ni.WithImages(framework.ImageView{Names: e.names, Table: c.table})
}

// ResetMutations empties the per-shard mutation buffers for reuse.
func (c *Core) ResetMutations() {
	for i := range c.muts {
		clear(c.muts[i])
		c.muts[i] = c.muts[i][:0]
	}
}

// BuildMeta records in the snapshot builder everything the coordinator
// itself knows: pods, the name index, the used-PVC set, and the lists;
// it folds the pod log when it is due, while the shards apply the epoch.
func (c *Core) BuildMeta() {
	b := c.builder
	for _, d := range c.dirtyPods {
		if d.rec != nil {
			b.SetPod(d.key, snapshot.PodEntry{Pod: d.rec.info.Pod(), Assumed: d.rec.assumed})
		} else {
			b.DeletePod(d.key)
		}
	}
	for _, e := range c.dirtyEntries {
		want := !e.deleted && e.node != nil
		if want != e.indexed {
			if want {
				b.SetIndex(e.name, e.slot)
			} else {
				b.DeleteIndex(e.name)
			}
			e.indexed = want
			c.listsDirty = true
		}
	}
	if v := c.tree.Version(); v != c.treeVersion {
		c.treeVersion = v
		c.listsDirty = true
	}
	wasUnlisted := c.unlisted
	switch {
	case c.listsDirty:
		c.buildLists()
	case len(c.affFlips) > 0:
		c.editAffinityLists()
	}
	if c.listsDirty && (c.unlisted || wasUnlisted) {
		for _, e := range c.nodes {
			c.reconcilePVC(e)
		}
	}
	for _, e := range c.dirtyEntries {
		c.reconcilePVC(e)
	}
	for _, k := range c.dirtyPVC {
		b.SetPVC(k, c.pvcUsed[k] > 0)
	}
	c.refreshListError()
	c.listsDirty = false
	clear(c.affFlips)
	c.affFlips = c.affFlips[:0]
	b.SetImages(c.table)
	b.FoldPods()
}

// refreshListError keeps the counts of an inconsistent list's error
// current: upstream reports the snapshot map's size and the cache's entry
// count as of each refresh, which change without the list changing (a
// pods-first entry, a ghost).
func (c *Core) refreshListError() {
	order, aff, anti, err := c.builder.Lists()
	ie, ok := err.(*snapshot.InconsistentListError)
	if !ok || (ie.MapLen == c.withNode && ie.CacheEntries == len(c.nodes)) {
		return
	}
	c.builder.SetLists(order, aff, anti, &snapshot.InconsistentListError{
		ListLen: ie.ListLen, TreeNodes: ie.TreeNodes, MapLen: c.withNode, CacheEntries: len(c.nodes)})
}

// editAffinityLists applies the epoch's affinity flips to the two lists
// without walking the node list: each flip inserts or removes one slot,
// ordered by list position, in a persist.Seq, which copies only the chunks
// the flips fall in, not the whole list. The published lists are never
// written. A node list the
// tree produced with a name twice, or a flip the lists disagree with, takes
// one rebuild instead.
func (c *Core) editAffinityLists() {
	order, aff, anti, err := c.builder.Lists()
	affEdits, antiEdits := c.affEdits[:0], c.antiEdits[:0]
	for _, e := range c.affFlips {
		if !c.listed(e) {
			continue // not in the node list: in no list
		}
		st := &c.slots[e.slot]
		if st.aff != st.inAff {
			affEdits = append(affEdits, persist.SeqEdit[int32]{X: e.slot, Insert: st.aff})
			st.inAff = st.aff
		}
		if st.anti != st.inAnti {
			antiEdits = append(antiEdits, persist.SeqEdit[int32]{X: e.slot, Insert: st.anti})
			st.inAnti = st.anti
		}
	}
	c.affEdits, c.antiEdits = affEdits[:0], antiEdits[:0]
	if len(affEdits) == 0 && len(antiEdits) == 0 {
		return
	}
	ok := !c.listIrregular
	if ok {
		aff, ok = aff.Edit(affEdits, c.byListPos)
	}
	if ok {
		anti, ok = anti.Edit(antiEdits, c.byListPos)
	}
	if !ok { // the lists disagree with the counts: rebuild them
		c.buildAffinityLists(order, err)
		return
	}
	c.builder.SetLists(order, aff, anti, err)
}

// compareListPos orders two listed slots by their position in the node
// list; it is the order of the affinity lists (Core.byListPos).
func (c *Core) compareListPos(a, b int32) int {
	return cmp.Compare(c.listPos[a], c.listPos[b])
}

// listed reports whether e is the live entry of its slot and in the node
// list of the last buildLists.
func (c *Core) listed(e *entry) bool {
	return int(e.slot) < len(c.listPos) && c.listPos[e.slot] >= 0 && c.bySlot[e.slot] == e
}

// buildAffinityLists re-derives the two affinity lists from the node list,
// by slot, without touching the tree or hashing names.
func (c *Core) buildAffinityLists(order []int32, err error) {
	aff, anti := c.affBuf[:0], c.antiBuf[:0]
	for _, slot := range order {
		st := &c.slots[slot]
		st.inAff, st.inAnti = st.aff, st.anti
		if st.aff {
			aff = append(aff, slot)
		}
		if st.anti {
			anti = append(anti, slot)
		}
	}
	// SeqOf copies: the buffers are scratch, reused by the next rebuild,
	// so a rebuild allocates only the published chunks.
	c.affBuf, c.antiBuf = aff[:0], anti[:0]
	c.builder.SetLists(order, persist.SeqOf(aff), persist.SeqOf(anti), err)
}

func (c *Core) buildLists() {
	listed := c.listSlots()
	order := make([]int32, 0, len(listed))
	c.listPos = slices.Grow(c.listPos[:0], int(c.nextSlot))[:c.nextSlot]
	c.listIrregular = false
	for i := range c.listPos {
		c.listPos[i] = -1
	}
	skipped, distinct := false, 0
	for _, slot := range listed {
		if slot < 0 || !c.slots[slot].hasNode {
			skipped = true
			continue // upstream logs and skips names missing from the snapshot map
		}
		if c.listPos[slot] >= 0 {
			c.listIrregular = true // listed twice: only full rebuilds keep upstream's list
		} else {
			distinct++
		}
		c.listPos[slot] = int32(len(order))
		order = append(order, slot)
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
	var err error
	if len(order) != c.tree.NumNodes() {
		err = &snapshot.InconsistentListError{ListLen: len(order), TreeNodes: c.tree.NumNodes(), MapLen: c.withNode, CacheEntries: len(c.nodes)}
	}
	c.buildAffinityLists(order, err)
}

// listSlots returns the slots of the entries of the tree's list, in its
// order (-1 for a name without an entry). The tree lists the slot each name
// was added with, which is its entry's as long as no name outlived its
// entry there; only a failed tree removal (treeStale) can break that, and
// then every name is looked up. The slice is scratch, valid until the next
// call.
func (c *Core) listSlots() []int32 {
	if !c.treeStale {
		ids, _ := c.tree.AppendIDs(c.idBuf[:0])
		c.idBuf = ids
		if !slices.ContainsFunc(ids, func(id int32) bool { return id < 0 || int(id) >= len(c.slots) }) {
			return ids
		}
	}
	names, _ := c.tree.AppendList(c.listBuf[:0])
	out := c.idBuf[:0]
	for _, name := range names {
		slot := int32(-1)
		if e := c.nodes[name]; e != nil {
			slot = e.slot
		}
		out = append(out, slot)
	}
	clear(names)
	c.listBuf = names[:0]
	c.idBuf = out
	return out
}

// PrefetchFrozen loads what ApplyFrozen of this epoch's entries will copy
// (their vector leaves), with the misses in flight together; the
// coordinator calls it while the shards freeze those entries.
func (c *Core) PrefetchFrozen() {
	slots := c.slotBuf[:0]
	for _, e := range c.dirtyEntries {
		slots = append(slots, e.slot)
	}
	c.builder.PrefetchNodes(slots)
	c.slotBuf = slots[:0]
}

// ApplyFrozen records the entries a shard froze for this epoch.
func (c *Core) ApplyFrozen(fs []shard.Frozen) {
	for _, f := range fs {
		c.builder.SetNode(f.Slot, f.Info)
	}
}

// Commit ends the epoch and returns the new snapshot.
func (c *Core) Commit() *snapshot.Snapshot {
	s := c.builder.Commit(c.seq, len(c.nodes), len(c.pods))
	for _, e := range c.dirtyEntries {
		e.dirty = false
	}
	clear(c.dirtyEntries)
	c.dirtyEntries = c.dirtyEntries[:0]
	clear(c.dirtyPods)
	c.dirtyPods = c.dirtyPods[:0]
	c.dirtyPVC = c.dirtyPVC[:0]
	c.freeSlots = append(c.freeSlots, c.freedEpoch...)
	c.freedEpoch = c.freedEpoch[:0]
	return s
}
