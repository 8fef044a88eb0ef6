package actor

import (
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/shard"
	"github.com/schedcache/schedcache/snapshot"
)

// ready is what a core's driver must do to publish the current epoch:
// deliver Muts[i] to shard i for every i whose slice is not empty, then
// call Advance, which takes each such shard's frozen entries from it.
// Muts belongs to the core and is valid until Advance returns; the driver
// must not keep it. The two-step protocol follows etcd-io/raft's
// Ready/Advance: the core says what must happen, the driver does it and
// acknowledges it.
type ready struct {
	Muts [][]shard.Mutation // per shard; empty: the shard has nothing this epoch
}

// Ready reports whether operations since the last publication changed
// anything a snapshot shows and, if so, returns the epoch's work. The
// driver must call Advance with it before the next operation. Like the
// operations, it may panic only on a bug; the driver runs it through guard.
func (c *core) Ready() (rd ready, ok bool) {
	if !c.Dirty() {
		return ready{}, false
	}
	return ready{Muts: c.pendingMutations()}, true
}

// Advance completes the publication rd describes and returns the new
// snapshot. It records the coordinator's part (while the shards, which the
// driver has started on rd.Muts, apply theirs), then calls frozen(i) once
// for every shard i with mutations, in index order, records what it
// returns, and commits. frozen is called for each such shard even after a
// failure, so a driver that sent every request receives every reply. On a
// failure (frozen's error, or a panic of a step, as a *shard.PanicError)
// the epoch is dropped and the error returned: the core's state no longer
// matches the shards', and the driver must publish nothing more (the
// coordinator's failure mode).
func (c *core) Advance(rd ready, frozen func(shard int) ([]shard.Frozen, error)) (*snapshot.Snapshot, error) {
	err := guard(func() {
		c.buildMeta()
		c.prefetchFrozen()
	})
	for i, m := range rd.Muts {
		if len(m) == 0 {
			continue
		}
		fs, ferr := frozen(i)
		if err == nil {
			err = ferr
		}
		if err == nil {
			err = guard(func() { c.applyFrozen(fs) })
		}
	}
	c.resetMutations()
	if err != nil {
		return nil, err
	}
	var snap *snapshot.Snapshot
	if err := guard(func() { snap = c.commit() }); err != nil {
		return nil, err
	}
	return snap, nil
}

// pendingMutations completes the epoch's mutations (the image view of
// every touched node whose shard copy reads an older registry version or
// other names) and returns them per shard. The actor delivers shard i's
// slice and must call ResetMutations after every shard has replied.
func (c *core) pendingMutations() [][]shard.Mutation {
	c.syncTable()
	for _, e := range c.dirtyEntries {
		if e.deleted || e.node == nil {
			continue
		}
		if e.viewStale || e.sent != c.table {
			e.viewStale, e.sent = false, c.table
			c.muts[e.shard] = append(c.muts[e.shard], shard.Mutation{Kind: shard.SetImages, Slot: e.slot,
				Images: &nodeinfo.ImageView{Names: e.names, Table: c.table}})
		}
	}
	return c.muts
}

// resetMutations empties the per-shard mutation buffers for reuse.
func (c *core) resetMutations() {
	for i := range c.muts {
		clear(c.muts[i])
		c.muts[i] = c.muts[i][:0]
	}
}

// buildMeta records in the snapshot builder everything the coordinator
// itself knows: pods, the name index, the used-PVC set, and the lists;
// it folds the pod log when it is due, while the shards apply the epoch.
func (c *core) buildMeta() {
	b := c.builder
	for _, d := range c.dirtyPods {
		if d.rec != nil {
			b.SetPod(d.key, d.rec.info.Pod(), d.rec.assumed)
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
	for _, k := range c.dirtyCum {
		b.SetPVCCum(k, c.pvcCum[k])
	}
	if c.groupsDirty {
		b.SetGroups(c.groups.Table())
		c.groupsDirty = false
	}
	c.refreshListError()
	c.listsDirty = false
	clear(c.affFlips)
	c.affFlips = c.affFlips[:0]
	b.SetImages(c.table)
	b.FoldPods()
}

// prefetchFrozen loads what applyFrozen of this epoch's entries will copy
// (their vector leaves), with the misses in flight together; the
// coordinator calls it while the shards freeze those entries.
func (c *core) prefetchFrozen() {
	slots := c.scratch.slotBuf[:0]
	for _, e := range c.dirtyEntries {
		slots = append(slots, e.slot)
	}
	c.builder.PrefetchNodes(slots)
	c.scratch.slotBuf = slots[:0]
}

// applyFrozen records the entries a shard froze for this epoch.
func (c *core) applyFrozen(fs []shard.Frozen) {
	for _, f := range fs {
		c.builder.SetNode(f.Slot, f.Info)
	}
}

// commit ends the epoch and returns the new snapshot.
func (c *core) commit() *snapshot.Snapshot {
	s := c.builder.Commit(c.seq, len(c.nodes), len(c.pods))
	for _, e := range c.dirtyEntries {
		e.dirty = false
	}
	clear(c.dirtyEntries)
	c.dirtyEntries = c.dirtyEntries[:0]
	clear(c.dirtyPods)
	c.dirtyPods = c.dirtyPods[:0]
	c.dirtyPVC = c.dirtyPVC[:0]
	c.dirtyCum = c.dirtyCum[:0]
	c.freeSlots = append(c.freeSlots, c.freedEpoch...)
	c.freedEpoch = c.freedEpoch[:0]
	return s
}
