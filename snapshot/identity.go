package snapshot

import (
	"slices"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/nodeinfo"
)

// ListKey is a comparable value: two snapshots with equal ListKeys list the
// same NodeInfos in the same order (List, At, Range), and so have the same
// affinity lists (derived from the listed NodeInfos). It keeps the parts
// it names alive, so a held key is never equal to the key of other
// contents. Snapshots with the same list may still have different keys (a
// change to an entry outside the list), never the other way round. For
// adapters that keep a view of the list across snapshots (kube/fwkadapter).
type ListKey struct {
	nodes any    // the node vector's Identity
	order *int32 // the node list's first slot; nil when empty
	n     int
}

// ListKey returns s's list key in O(1) without allocating.
func (s *Snapshot) ListKey() ListKey {
	k := ListKey{nodes: s.nodes.Identity(), n: len(s.order)}
	if len(s.order) > 0 {
		k.order = &s.order[0]
	}
	return k
}

// OrderKey identifies the order of a snapshot's node list, not the
// NodeInfos in it: snapshots with equal OrderKeys list the same slots in
// the same order (a fork's pod changes keep it; a node added or removed
// changes it). It keeps the order it names alive.
type OrderKey struct {
	order *int32 // the node list's first slot; nil when empty
	n     int
}

// OrderKey returns s's order key in O(1) without allocating.
func (s *Snapshot) OrderKey() OrderKey {
	k := OrderKey{n: len(s.order)}
	if len(s.order) > 0 {
		k.order = &s.order[0]
	}
	return k
}

// DiffList calls fn(i, ni) for every position i of s's node list whose
// NodeInfo differs from old's at i (ni is s's), in position order, and
// returns true, when old lists the same slots in the same order (equal
// OrderKeys) and s has its slot -> position table (published snapshots
// do; a caller's copy does not). Otherwise it calls nothing and returns
// false: the caller reads the whole list instead. Subtrees the two share
// are skipped: O(changes x log n) after the table's first use, which
// builds it in O(n) once per order. For adapters that keep a view of the
// list across snapshots (bench/fwkpick).
func (s *Snapshot) DiffList(old *Snapshot, fn func(i int, ni *nodeinfo.NodeInfo)) bool {
	if s == nil || old == nil || s.OrderKey() != old.OrderKey() {
		return false
	}
	pos, dup := s.listPos()
	if pos == nil || dup {
		return false
	}
	var changed []int32
	immutable.DiffVectors(old.nodes, s.nodes, func(slot int, _, _ *nodeinfo.NodeInfo) {
		if slot < len(pos) && pos[slot] >= 0 {
			changed = append(changed, pos[slot])
		}
	})
	slices.Sort(changed)
	for _, i := range changed {
		fn(int(i), s.nodes.Get(int(s.order[i])))
	}
	return true
}
