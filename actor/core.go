// Package actor holds the coordinator: it sequences every cache operation,
// owns the pod state machine, the zone tree and the image registry, drives
// the shards that own node state, and publishes snapshots. Its goroutine
// batches what callers queue; a synchronous caller that finds it idle takes
// its token and runs its own op on its goroutine (Coordinator.Do).
//
// The unexported core is the deterministic state machine (no goroutines,
// no clock: time is passed in); Coordinator is the goroutine around it, and
// the only type users drive. Package schedcache is the public API.
package actor

import (
	"hash/maphash"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/internal/nodelists"
	"github.com/schedcache/schedcache/internal/snapbuild"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/nodetree"
	"github.com/schedcache/schedcache/podgroup"
	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

// entry is the coordinator's view of one NodeInfo entry; the NodeState
// itself lives in shard `shard` at `slot`. Owned by the coordinator's token
// holder (the run goroutine, or a caller running inline).
//
// Why pods, aff, anti, nonHost and pvc are counted here as well as in the shard's
// NodeState: the core decides with them while it applies an op, before
// the shard has seen the op's mutation (the shards apply an epoch's
// mutations on their own goroutines while the core builds the lists, in
// Ready/Advance): the pod bound (ErrTooManyPods), whether the entry
// enters or leaves the affinity lists this epoch, and which claims enter
// or leave the used-PVC set. Reading the shard instead would make every
// op a round trip to another goroutine, the hand-off the inline path
// exists to avoid. The same op updates both; requireShadowCounts (actor's
// tests) checks they agree after every publication of the randomized
// core and fork tests.
type entry struct {
	name      string
	slot      int32
	shard     int
	node      *v1.Node // nil: nodeless (ghost, or created by a pod)
	pods      int
	aff, anti int                  // lengths of the shard's affinity sub-lists
	nonHost   int                  // length of the shard's required non-host-scoped anti-affinity sub-list
	stale     map[string][3]int32  // pod key -> its stale entries in the shard's affinity sub-lists, by list (lists.go); nil when none
	pvc       map[string]int       // PVCRefCounts of the entry (nil when empty)
	names     []string             // image names of node, each once (nodeinfo.ImageNames); immutable, shared with the shard
	sent      *nodeinfo.ImageTable // registry version of the image view the shard has
	viewStale bool                 // names changed since the shard got its view
	ghost     []ghostImage         // a ghost's summaries from its last registration (upstream keeps them; Dump shows them)
	pvcOn     bool                 // its PVC keys count in core.pvcUsed: it has a node object and is in the node list (upstream builds the used set from its list)
	indexed   bool                 // in the published name index
	dirty     bool                 // touched in the current epoch
	deleted   bool
}

// core is the coordinator's state. Contract: not safe for concurrent use;
// owned by one goroutine at a time. Operations never block; the mutations they imply
// accumulate per shard until the driver publishes the epoch with Ready and
// Advance (epoch.go).
//
// Every field is owned by the goroutine that owns the core (the holder of
// the coordinator's token, or a test's through local); nothing here is
// shared.
type core struct {
	ttl     time.Duration          // read-only after newCore
	nshards int                    // read-only after newCore
	seed    maphash.Seed           // node name -> shard hash; read-only after newCore
	pods    map[string]*podRecord  // pod key -> state; the pod state machine
	nodes   map[string]*entry      // node name -> entry, ghosts and nodeless ones included
	tree    *nodetree.Tree         // zone-interleaved order of the node objects
	images  map[string]*imageState // image name -> size and number of nodes listing it
	// nodeImages is the registry's membership: node name -> the image names
	// registered for it (upstream's per-image node sets, stored per node).
	nodeImages    map[string][]string
	strays        immutable.Map[[]string]                         // node name -> names registered for it that its node object lacks (imagereg.Strays); published in table
	straysChanged bool                                            // strays changed since the last syncTable
	table         *nodeinfo.ImageTable                            // the registry as of the last syncTable; immutable
	tableEd       immutable.MapEditor[nodeinfo.ImageStateSummary] // scratch editor of table
	imgChanged    []string                                        // names whose summary may have changed since the last syncTable
	imgChangedSet map[string]struct{}                             // the same names, for dedup
	expiry        expiryHeap                                      // armed deadlines, earliest first; stale items skipped
	armSeq        uint64                                          // generation of the last armed deadline

	freeSlots  []int32 // reusable slots
	freedEpoch []int32 // slots freed in the current epoch; reusable after commit
	nextSlot   int32

	seq           uint64                                // operations applied
	muts          [][]shard.Mutation                    // per shard, current epoch
	dirtyEntries  []*entry                              // touched entries, current epoch
	dirtyPods     []dirtyPod                            // pod changes of the current epoch, in order (a key may repeat: the last wins)
	dirtyPVC      []string                              // used-PVC keys whose membership may have changed
	pvcUsed       nodelists.MapCounts                   // PVC key -> listed entries with a node that reference it (nodelists.UsePVC)
	pvcCum        map[string]int64                      // PVC key -> cumulative change of every entry's PVC reference counts, listed or not (upstream's pvcRefCountsDelta, never reset); 0 entries deleted
	dirtyCum      []string                              // pvcCum keys changed this epoch
	listsDirty    bool                                  // node list (and so the affinity lists) must be rebuilt
	affFlips      []*entry                              // entries whose aff, anti or nonHost count crossed zero this epoch (duplicates allowed)
	listPos       []int32                               // slot -> index in the node list of the last buildLists; -1: not listed
	listIrregular bool                                  // the last buildLists saw a slot twice: affinity edits rebuild
	byListPos     func(a, b int32) int                  // compareListPos, bound once: Seq.Edit's order
	bySlot        []*entry                              // slot -> live entry (nil when free)
	slots         []slotState                           // slot -> list-building state; zero when free
	treeVersion   uint64                                // tree version the published lists were built from
	treeStale     bool                                  // a removed node's name stayed in the tree: a listed name may have outlived its entry (and slot)
	withNode      int                                   // entries with a node object
	unlisted      bool                                  // the last buildLists left out some entry with a node object (see reconcilePVC)
	builder       snapbuild.Builder[*snapshot.Snapshot] // the next snapshot; the last committed one is published
	assumed       int                                   // pods in the assumed state (kept by aggregate, replace and subtract)
	groups        *podgroup.Editor                      // the pod groups (groups.go): the open edit of the published table
	groupsOn      bool                                  // the GenericWorkload gate: members are tracked
	groupsDirty   bool                                  // groups changed since the last publication
	scratch       scratch                               // reused buffers; no state survives a call
}

// scratch holds the buffers the flush steps reuse so that an epoch
// allocates only what it publishes. None carries state from one call to
// the next: each user truncates its buffer before use (listSlots' result
// is valid until its next call). Owned by the goroutine that owns the core.
type scratch struct {
	affEdits, antiEdits []immutable.SeqEdit[int32] // editAffinityLists
	nonHostEdits        []immutable.SeqEdit[int32] // editAffinityLists
	affBuf, antiBuf     []int32                    // buildAffinityLists
	nonHostBuf          []int32                    // buildAffinityLists
	listBuf             []string                   // listSlots: the tree's list by name
	idBuf               []int32                    // listSlots: the tree's list by slot
	slotBuf             []int32                    // prefetchFrozen
}

// newCore returns an empty coordinator state for nshards shards (>= 1) and
// the given assumed-pod TTL (0: never expire).
func newCore(nshards int, ttl time.Duration) *core {
	if nshards < 1 {
		nshards = 1
	}
	c := &core{
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
		pvcUsed:       make(nodelists.MapCounts),
		pvcCum:        make(map[string]int64),
		builder:       snapbuild.New[*snapshot.Snapshot](),
	}
	c.treeVersion = c.tree.Version()
	c.byListPos = c.compareListPos
	return c
}

// Shards returns the number of shards the core routes to.
func (c *core) Shards() int { return c.nshards }

// Last returns the last committed snapshot.
func (c *core) Last() *snapshot.Snapshot { return c.builder.Last() }

// Dirty reports whether operations since the last publication changed anything
// a snapshot shows.
func (c *core) Dirty() bool {
	return len(c.dirtyEntries) > 0 || len(c.dirtyPods) > 0 || len(c.dirtyPVC) > 0 || len(c.dirtyCum) > 0 || c.groupsDirty || c.listsDirty || len(c.affFlips) > 0
}

func (c *core) shardOf(name string) int {
	if c.nshards == 1 {
		return 0
	}
	return int(maphash.String(c.seed, name) % uint64(c.nshards))
}

func (c *core) emit(e *entry, m shard.Mutation) {
	m.Slot = e.slot
	c.muts[e.shard] = append(c.muts[e.shard], m)
	c.touch(e)
}

func (c *core) touch(e *entry) {
	if !e.dirty {
		e.dirty = true
		c.dirtyEntries = append(c.dirtyEntries, e)
	}
}

func (c *core) newEntry(name string) *entry {
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
	c.emit(e, shard.Mutation{Kind: shard.Create})
	return e
}

func (c *core) deleteEntry(e *entry) {
	c.emit(e, shard.Mutation{Kind: shard.Delete})
	e.deleted = true
	delete(c.nodes, e.name)
	c.bySlot[e.slot] = nil
	c.freedEpoch = append(c.freedEpoch, e.slot)
}

// Entry reports the shard and slot of the entry named name.
func (c *core) Entry(name string) (shardIdx int, slot int32, ok bool) {
	e := c.nodes[name]
	if e == nil {
		return 0, 0, false
	}
	return e.shard, e.slot, true
}

// NodeCount returns the number of entries, ghosts and nodeless included.
func (c *core) NodeCount() int { return len(c.nodes) }

// SlotNames returns slot -> name for every entry (for Dump).
func (c *core) SlotNames() map[int32]string {
	out := make(map[int32]string, len(c.nodes))
	for name, e := range c.nodes {
		out[e.slot] = name
	}
	return out
}

// AssumedKeys returns the set of assumed pod keys.
func (c *core) AssumedKeys() map[string]struct{} {
	out := make(map[string]struct{})
	for k, r := range c.pods {
		if r.assumed {
			out[k] = struct{}{}
		}
	}
	return out
}
