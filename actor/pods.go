package actor

import (
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/errs"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/shard"
)

// podRecord is the coordinator's state of one cached pod. Owned by the
// coordinator's token holder.
type podRecord struct {
	info    *nodeinfo.PodInfo // the stored pod and what was aggregated for it
	entry   *entry            // the entry holding it (the stored pod's node)
	assumed bool
	// armed is the generation of the expiry-heap item that may expire the
	// pod; 0 while none may (binding not finished, or no TTL). Only an
	// assumed pod whose binding finished under a TTL is armed, so "binding
	// finished" and "has a deadline" are both armed != 0.
	armed uint64
}

// dirtyPod is a change of a pod's snapshot entry: the record that holds
// the pod now, or nil if it was removed. A record replaced in place later in
// the epoch is read as it is at buildMeta; since the changes are applied in
// order and the last change of a key wins, the snapshot gets the final
// state either way. Owned by the coordinator's token holder.
type dirtyPod struct {
	key string
	rec *podRecord
}

func (c *core) aggregate(info *nodeinfo.PodInfo, assumed bool) {
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
func (c *core) attach(info *nodeinfo.PodInfo) *entry {
	e := c.nodes[info.NodeName()]
	if e == nil {
		e = c.newEntry(info.NodeName())
	}
	c.emit(e, shard.Mutation{Kind: shard.AddPod, Pod: info})
	e.pods++
	if info.HasAffinity() {
		e.aff++
		if e.aff == 1 {
			c.affFlips = append(c.affFlips, e)
		}
	}
	if info.HasRequiredAntiAffinity() {
		e.anti++
		if e.anti == 1 {
			c.affFlips = append(c.affFlips, e)
		}
	}
	if info.HasRequiredNonHostScopedAntiAffinity() {
		e.nonHost++
		if e.nonHost == 1 {
			c.affFlips = append(c.affFlips, e)
		}
	}
	for _, k := range info.PVCKeys() {
		if e.pvc == nil {
			e.pvc = make(map[string]int)
		}
		e.pvc[k]++
		c.cumPVC(k, +1)
		if e.pvc[k] == 1 && e.pvcOn {
			c.bumpPVC(k, +1)
		}
	}
	return e
}

// subtract removes the stored pod of r from its entry and from the cache.
// aff, anti and nonHost say whether the affinity sub-lists are searched
// (decided by the pod object the caller passed, as upstream).
func (c *core) subtract(r *podRecord, aff, anti, nonHost bool) {
	if r.assumed {
		c.assumed--
	}
	c.detach(r, aff, anti, nonHost)
	key := r.info.Key()
	delete(c.pods, key)
	c.dirtyPods = append(c.dirtyPods, dirtyPod{key: key})
}

// replace swaps the stored pod of r for info (same key), exactly as a
// subtract followed by an aggregate of an added pod (upstream's updatePod:
// removePod then addPod), but keeps r in the pod map: the record is reset
// in place, so the map is neither searched nor written. An expiry-heap item
// still pointing at r is stale from then on (r is no longer assumed).
func (c *core) replace(r *podRecord, aff, anti, nonHost bool, info *nodeinfo.PodInfo) {
	if r.assumed {
		c.assumed--
	}
	c.detach(r, aff, anti, nonHost)
	*r = podRecord{info: info, entry: c.attach(info)}
	c.dirtyPods = append(c.dirtyPods, dirtyPod{key: info.Key(), rec: r})
}

// detach removes the stored pod of r from its entry, deleting the entry if
// that left it without pods and without a node.
func (c *core) detach(r *podRecord, aff, anti, nonHost bool) {
	e := r.entry
	key := r.info.Key()
	c.emit(e, shard.Mutation{Kind: shard.RemovePod, Pod: r.info, Key: key, Affinity: aff, AntiAffinity: anti, NonHostAnti: nonHost})
	e.pods--
	c.dropFromSubList(e, &e.aff, listAff, key, r.info.HasAffinity(), aff)
	c.dropFromSubList(e, &e.anti, listAnti, key, r.info.HasRequiredAntiAffinity(), anti)
	c.dropFromSubList(e, &e.nonHost, listNonHost, key, r.info.HasRequiredNonHostScopedAntiAffinity(), nonHost)
	for _, k := range r.info.PVCKeys() {
		e.pvc[k]--
		c.cumPVC(k, -1)
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

// cachedKey reports whether pod key is cached.
func (c *core) cachedKey(key string) bool {
	_, ok := c.pods[key]
	return ok
}

// full reports whether the entry named name, if any, already holds
// nodeinfo.MaxPodsPerNode pods: one more could make its totals overflow
// (the arithmetic is at nodeinfo.MaxPodQuantity).
func (c *core) full(name string) bool {
	e := c.nodes[name]
	return e != nil && e.pods >= nodeinfo.MaxPodsPerNode
}

// AssumePod moves an absent pod to Assumed and aggregates it. A pod
// without a node name is assumed on a nodeless entry named "", as upstream.
func (c *core) AssumePod(info *nodeinfo.PodInfo) error {
	c.seq++
	key := info.Key()
	if err := errs.CheckAssume(key, info.NodeName(), cached(c.pods[key]), c.full); err != nil {
		return err
	}
	c.aggregate(info, true)
	c.group(memberAssume, info.Pod())
	return nil
}

// cached is what the state machine's rules (errs.Check*) read of r.
func cached(r *podRecord) errs.Cached {
	if r == nil {
		return errs.Cached{}
	}
	return errs.Cached{OK: true, Assumed: r.assumed, Node: r.info.NodeName()}
}

// ForgetPod removes an assumed pod. pod is the caller's object: its node
// name must match and its affinity decides the sub-list bookkeeping.
func (c *core) ForgetPod(key string, pod *v1.Pod) error {
	c.seq++
	r := c.pods[key]
	if apply, err := errs.CheckForget("ForgetPod", key, pod, cached(r)); !apply {
		return err
	}
	c.subtract(r, nodeinfo.PodHasAffinity(pod), nodeinfo.PodHasRequiredAntiAffinity(pod), nodeinfo.PodHasRequiredNonHostScopedAntiAffinity(pod))
	c.group(memberForget, pod)
	return nil
}

// RemoveAssumedPod is ForgetPod of an assumed pod deleted from the
// cluster (upstream v1.37): the same checks and change, but a pod-group
// member leaves its group instead of returning to its unscheduled pods.
func (c *core) RemoveAssumedPod(key string, pod *v1.Pod) error {
	c.seq++
	r := c.pods[key]
	if apply, err := errs.CheckForget("RemoveAssumedPod", key, pod, cached(r)); !apply {
		return err
	}
	c.subtract(r, nodeinfo.PodHasAffinity(pod), nodeinfo.PodHasRequiredAntiAffinity(pod), nodeinfo.PodHasRequiredNonHostScopedAntiAffinity(pod))
	c.group(memberRemove, pod)
	return nil
}

// AddPod confirms an assumed pod (possibly on another node), re-adds an
// expired one, or adds a new one.
func (c *core) AddPod(info *nodeinfo.PodInfo) error {
	c.seq++
	key := info.Key()
	r := c.pods[key]
	if err := errs.CheckAdd(key, info.NodeName(), cached(r), c.full); err != nil {
		return err
	}
	if r == nil {
		c.aggregate(info, false)
	} else {
		old := r.info.Pod()
		c.replace(r, r.info.HasAffinity(), r.info.HasRequiredAntiAffinity(), r.info.HasRequiredNonHostScopedAntiAffinity(), info)
		c.group(memberRemove, old) // upstream's updatePod: removePod, then addPod
	}
	c.group(memberConfirm, info.Pod())
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
func (c *core) UpdatePod(oldPod *v1.Pod, info *nodeinfo.PodInfo) error {
	c.seq++
	key := string(oldPod.UID)
	r := c.pods[key]
	if err := errs.CheckUpdate(key, oldPod, info.Key(), info.NodeName(), cached(r), c.cachedKey); err != nil {
		return err
	}
	aff, anti, nonHost := nodeinfo.PodHasAffinity(oldPod), nodeinfo.PodHasRequiredAntiAffinity(oldPod), nodeinfo.PodHasRequiredNonHostScopedAntiAffinity(oldPod)
	if info.Key() != key {
		c.subtract(r, aff, anti, nonHost)
		c.aggregate(info, false)
	} else {
		c.replace(r, aff, anti, nonHost, info)
	}
	c.group(memberRemove, oldPod)
	c.group(memberConfirm, info.Pod())
	return nil
}

// RemovePod removes a cached pod (assumed or added). A non-empty node name
// other than the cached pod's is a *CorruptionError (upstream exits).
func (c *core) RemovePod(key string, pod *v1.Pod) error {
	c.seq++
	r := c.pods[key]
	if err := errs.CheckRemove(key, pod, cached(r)); err != nil {
		return err
	}
	stored := r.info.Pod()
	c.subtract(r, r.info.HasAffinity(), r.info.HasRequiredAntiAffinity(), r.info.HasRequiredNonHostScopedAntiAffinity())
	c.group(memberRemove, stored) // upstream removes the cached pod
	return nil
}
