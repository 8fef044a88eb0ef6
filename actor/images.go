package actor

import (
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache/internal/imagereg"
	"github.com/schedcache/schedcache/internal/imagetable"
	"github.com/schedcache/schedcache/nodeinfo"
)

// imageState is one incarnation of the registry's summary of an image
// name (upstream's shared *ImageStateSummary): the size the first node
// reported and how many nodes list it. Which nodes those are is kept per
// node in core.nodeImages (a few names per node instead of a set of node
// names per image). It dies (count 0, out of the registry) when its last
// node leaves; the name registered again gets a new incarnation. Owned by
// the coordinator's token holder.
type imageState struct {
	size  int64
	count int
}

// ghostImage is one image summary a ghost keeps from its last
// registration: the incarnation (nil if the name was not registered) and
// the size the node listed. Owned by the coordinator's token holder.
type ghostImage struct {
	name string
	st   *imageState
	size int64
}

func imageNames(node *v1.Node, fn func(name string, size int64)) {
	for i := range node.Status.Images {
		img := &node.Status.Images[i]
		for _, name := range img.Names {
			fn(name, img.SizeBytes)
		}
	}
}

// regCounts is the core as the registry's imagereg.Counts: the shared
// rule (imagereg.Register, Unregister) changes c.images through it.
type regCounts core

// Join implements imagereg.Counts: a name not in the registry gets a new
// incarnation with size.
func (r *regCounts) Join(name string, size int64) {
	c := (*core)(r)
	st, ok := c.images[name]
	if !ok {
		st = &imageState{size: size}
		c.images[name] = st
	}
	st.count++
	c.imageChanged(name)
}

// Leave implements imagereg.Counts: an incarnation left with no nodes
// dies.
func (r *regCounts) Leave(name string) {
	c := (*core)(r)
	if st := c.images[name]; st != nil {
		if st.count--; st.count <= 0 {
			delete(c.images, name)
		}
		c.imageChanged(name)
	}
}

// registerImages adds node to the node set of every name it lists (3.5),
// with the rule forks share (imagereg.Register).
func (c *core) registerImages(node *v1.Node) {
	list := imagereg.Register(c.nodeImages[node.Name], node, (*regCounts)(c))
	if len(list) > 0 {
		c.nodeImages[node.Name] = list
	}
}

// unregisterImages removes node's name from the node set of every name
// node lists (imagereg.Unregister); an incarnation left with no nodes
// dies.
func (c *core) unregisterImages(node *v1.Node) {
	list := c.nodeImages[node.Name]
	if len(list) == 0 {
		return
	}
	list = imagereg.Unregister(list, node, (*regCounts)(c))
	if len(list) == 0 {
		delete(c.nodeImages, node.Name)
	} else {
		c.nodeImages[node.Name] = list
	}
}

// syncStrays records, after a node operation on name, the image names
// registered for name that its node object now (if any) does not list
// (imagereg.Strays): published in the registry's table, so that a fork
// of the snapshot counts as the registry does. Nothing to do, O(1), in
// the usual case of none before and none now.
func (c *core) syncStrays(name string) {
	var names []string
	if e := c.nodes[name]; e != nil && e.node != nil {
		names = e.names
	}
	strays := imagereg.Strays(c.nodeImages[name], names)
	if strays == nil && (c.strays.Len() == 0 || !c.hasStrays(name)) {
		return
	}
	ed := c.strays.Edit()
	if strays == nil {
		ed.Delete(name)
	} else {
		ed.Set(name, strays)
	}
	c.strays = ed.Done()
	c.straysChanged = true
}

func (c *core) hasStrays(name string) bool {
	_, ok := c.strays.Get(name)
	return ok
}

// imageChanged notes that name's summary may have changed; syncTable
// settles it.
func (c *core) imageChanged(name string) {
	if _, ok := c.imgChangedSet[name]; !ok {
		c.imgChangedSet[name] = struct{}{}
		c.imgChanged = append(c.imgChanged, name)
	}
}

// syncTable brings the published registry version up to date with the
// names changed since the last call. A name whose summary ended where it
// started (a node re-registered with the same images) changes nothing;
// if no summary changed, table stays the same version.
func (c *core) syncTable() {
	if len(c.imgChanged) == 0 {
		if c.straysChanged {
			c.straysChanged = false
			c.table = imagetable.New(c.table.Map(), c.strays)
		}
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
		v := nodeinfo.ImageStateSummary{Size: st.size, NumNodes: st.count}
		if !had || old != v {
			c.tableEd.Set(name, v)
			changed = true
		}
	}
	clear(c.imgChanged)
	c.imgChanged = c.imgChanged[:0]
	m := c.tableEd.Done()
	if changed || c.straysChanged {
		c.straysChanged = false
		c.table = imagetable.New(m, c.strays)
	}
}

// replaceImages swaps the registration of old (may be nil) for node's,
// exactly as upstream unregisters and re-registers (an image only node
// holds is re-created with the size node lists first). A heartbeat with
// the same images, whose re-registration would leave the registry as it
// is, skips both steps.
func (c *core) replaceImages(old, node *v1.Node) {
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
func (c *core) reregisterIsNoop(node *v1.Node) bool {
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
func (c *core) setNames(e *entry, names []string) {
	e.names = names
	e.viewStale = true
}

// CurrentImages returns ni with the image summaries an upstream clone of
// the entry taken now shows (Dump, GetNode): a node's names read from the
// registry now; a ghost's summaries of its last registration, with their
// counts now (a dead incarnation counts no nodes); none for an entry that
// never had a node object.
func (c *core) CurrentImages(name string, ni *nodeinfo.NodeInfo) *nodeinfo.NodeInfo {
	e := c.nodes[name]
	if ni == nil || e == nil {
		return ni
	}
	if e.node == nil {
		m := make(map[string]nodeinfo.ImageStateSummary, len(e.ghost))
		for _, g := range e.ghost {
			s := nodeinfo.ImageStateSummary{Size: g.size}
			if g.st != nil {
				s = nodeinfo.ImageStateSummary{Size: g.st.size, NumNodes: g.st.count}
			}
			m[g.name] = s
		}
		return ni.WithImageStates(m)
	}
	c.syncTable()
	return ni.WithImages(nodeinfo.ImageView{Names: e.names, Table: c.table})
}
