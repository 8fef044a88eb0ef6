package snapshot

import (
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/errs"
	"github.com/schedcache/schedcache/nodeinfo"
)

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
