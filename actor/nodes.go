package actor

import (
	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/errs"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/shard"
)

// setNode makes node the entry's object. Its image names change only if
// node lists other images than the object it replaces.
func (c *core) setNode(e *entry, node *v1.Node) {
	if (e.node == nil) != (node == nil) {
		c.withNode += boolSign(node != nil)
	}
	if e.node == nil || node == nil || !sameImages(e.node, node) {
		c.setNames(e, nodeinfo.ImageNames(node))
	}
	if node != nil {
		e.ghost = nil
	}
	e.node = node
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
func (c *core) AddNode(node *v1.Node) {
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
	c.syncStrays(node.Name)
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
func (c *core) UpdateNode(oldNode, newNode *v1.Node) error {
	c.seq++
	if err := errs.CheckUpdateNodeArgs(oldNode, newNode); err != nil {
		return err
	}
	live := func(name string) bool { e := c.nodes[name]; return e != nil && e.node != nil }
	if err := errs.CheckUpdateNodeName(oldNode, newNode, c.tree.InZone, live); err != nil {
		return err
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
	c.syncStrays(newNode.Name)
	return nil
}

// RemoveNode clears the node object; the entry stays as a ghost while it
// holds pods. Tree and image bookkeeping use the passed node, as upstream;
// a node missing from its zone yields an error after the entry changed.
func (c *core) RemoveNode(node *v1.Node) error {
	c.seq++
	e := c.nodes[node.Name]
	if e == nil {
		return errs.NodeNotFound("RemoveNode", node.Name)
	}
	for k, n := range e.pvc { // upstream subtracts the entry's claims from its pending delta
		c.cumPVC(k, -n)
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
		c.syncStrays(node.Name) // the registration stays, unexplained now
		// Upstream returns the tree's error (the node is not in the zone
		// its labels name: a second RemoveNode of a ghost, or stale
		// labels) after the entry changed, as here.
		return errs.RemoveNodeNotInZone(node.Name, err)
	}
	c.unregisterImages(node)
	c.syncStrays(node.Name)
	return nil
}
