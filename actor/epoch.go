package actor

import (
	"github.com/schedcache/schedcache/framework"
	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

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
		c.syncSlot(e)
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

// PrefetchFrozen loads what ApplyFrozen of this epoch's entries will copy
// (their vector leaves), with the misses in flight together; the
// coordinator calls it while the shards freeze those entries.
func (c *Core) PrefetchFrozen() {
	slots := c.scratch.slotBuf[:0]
	for _, e := range c.dirtyEntries {
		slots = append(slots, e.slot)
	}
	c.builder.PrefetchNodes(slots)
	c.scratch.slotBuf = slots[:0]
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
