package nodetree

import (
	"slices"

	v1 "k8s.io/api/core/v1"
)

// Overlay is a zone tree made of a base Tree, which it never changes, and
// changes made on top of it: the same zones, order, names and ids as a
// Clone of the base changed by the same calls (AddID, UpdateID, Remove,
// SetID), without
// copying the base. It is what a what-if fork (snapshot.Fork) changes: a
// change costs O(zones + the changes already made in the zone it touches),
// not O(names).
//
// Contract: an Overlay is immutable: every change returns a new Overlay
// and leaves the receiver as it was, so any number of goroutines may read
// one and keep old ones. The base must not change while overlays of it
// live (a tree no one changes any more; reading it from many goroutines
// is safe). AppendIDs costs O(names). The zero Overlay and a nil *Overlay
// are not usable: make one with NewOverlay.
type Overlay struct {
	zones    []*ozone // zone order; immutable, never written
	numNodes int      // immutable
}

// ozone is one zone of an Overlay: the names of a base zone not removed
// since, then the names added on the overlay. Immutable once made.
type ozone struct {
	key   string
	base  *zone               // the base tree's zone (nil: a zone made on the overlay); read only
	gone  map[string]struct{} // names of base removed on the overlay; never written once made
	added []oname             // names added on the overlay, in order, with their ids; never written below their length
	ids   map[string]int32    // new ids of base names (SetID), read only where the name is not gone; never written once made
}

// oname is a name added on an Overlay and its id.
type oname struct {
	name string
	id   int32
}

// indexAdded returns the index of name in z.added, -1 if absent.
func (z *ozone) indexAdded(name string) int {
	for i := range z.added {
		if z.added[i].name == name {
			return i
		}
	}
	return -1
}

// NewOverlay returns an overlay of base with no changes. base must not
// change afterwards.
func NewOverlay(base *Tree) *Overlay {
	o := &Overlay{zones: make([]*ozone, len(base.zones)), numNodes: base.numNodes}
	for i, z := range base.zones {
		o.zones[i] = &ozone{key: z.key, base: z}
	}
	return o
}

// NumNodes is Tree.NumNodes.
func (o *Overlay) NumNodes() int { return o.numNodes }

func (o *Overlay) find(key string) int {
	for i, z := range o.zones {
		if z.key == key {
			return i
		}
	}
	return -1
}

// has reports whether z lists name.
func (z *ozone) has(name string) bool {
	if z.base != nil {
		if _, ok := z.base.members[name]; ok {
			if _, gone := z.gone[name]; !gone {
				return true
			}
		}
	}
	return z.indexAdded(name) >= 0
}

func (z *ozone) size() int {
	n := len(z.added)
	if z.base != nil {
		n += len(z.base.names) - len(z.gone)
	}
	return n
}

// InZone is Tree.InZone.
func (o *Overlay) InZone(name, zoneKey string) bool {
	i := o.find(zoneKey)
	return i >= 0 && o.zones[i].has(name)
}

// AddID returns o with node.Name added to the zone ZoneKey(node) with id,
// as Tree.AddID (a name already in that zone keeps its place and id).
func (o *Overlay) AddID(node *v1.Node, id int32) *Overlay {
	// The key is built only for a new zone.
	region, zone := zoneParts(node)
	for i, z := range o.zones {
		if isZoneKey(z.key, region, zone) {
			return o.addAt(i, z.key, node.Name, id)
		}
	}
	return o.addAt(-1, ZoneKey(node), node.Name, id)
}

func (o *Overlay) add(name, key string, id int32) *Overlay {
	return o.addAt(o.find(key), key, name, id)
}

// addAt is add with i = o.find(key).
func (o *Overlay) addAt(i int, key, name string, id int32) *Overlay {
	if i >= 0 && o.zones[i].has(name) {
		return o
	}
	// The new overlay, its changed zone, a zone's first added name and up
	// to overlayZones zones are one allocation.
	p := &struct {
		o   Overlay
		z   ozone
		one [1]oname
		zs  [overlayZones]*ozone
	}{o: Overlay{numNodes: o.numNodes + 1}}
	c := &p.o
	n := len(o.zones)
	if i < 0 {
		n++
	}
	if n <= overlayZones {
		c.zones = append(p.zs[:0:n], o.zones...)
	} else {
		c.zones = append(make([]*ozone, 0, n), o.zones...)
	}
	if i < 0 {
		p.one[0] = oname{name, id}
		p.z = ozone{key: key, added: p.one[:1:1]}
		c.zones = append(c.zones, &p.z)
		return c
	}
	p.z = *o.zones[i]
	if len(p.z.added) == 0 {
		p.one[0] = oname{name, id}
		p.z.added = p.one[:1:1]
	} else {
		p.z.added = append(p.z.added[:len(p.z.added):len(p.z.added)], oname{name, id})
	}
	c.zones[i] = &p.z
	return c
}

// overlayZones is the number of zones an overlay change copies into its
// own allocation; more take one more.
const overlayZones = 4

// Remove returns o without node.Name in the zone ZoneKey(node), as
// Tree.Remove: a zone left empty leaves the zone order; a name not in that
// zone returns o and an error wrapping ErrNodeNotInZone.
func (o *Overlay) Remove(node *v1.Node) (*Overlay, error) {
	name, key := node.Name, ZoneKey(node)
	c, ok := o.remove(name, key)
	if !ok {
		return o, &NotInZoneError{Name: name, Zone: key}
	}
	return c, nil
}

func (o *Overlay) remove(name, key string) (*Overlay, bool) {
	i := o.find(key)
	if i < 0 || !o.zones[i].has(name) {
		return o, false
	}
	z := *o.zones[i]
	if j := z.indexAdded(name); j >= 0 {
		z.added = slices.Delete(slices.Clone(z.added), j, j+1)
	} else {
		gone := make(map[string]struct{}, len(z.gone)+1)
		for k := range z.gone {
			gone[k] = struct{}{}
		}
		gone[name] = struct{}{}
		z.gone = gone
	}
	c := &Overlay{numNodes: o.numNodes - 1}
	if z.size() == 0 {
		c.zones = slices.Delete(slices.Clone(o.zones), i, i+1)
	} else {
		c.zones = slices.Clone(o.zones)
		c.zones[i] = &z
	}
	return c, true
}

// UpdateID returns o with the node moved as Tree.UpdateID: nothing changes
// when the zone keys of oldNode (nil: newNode.Name with key "") and
// newNode are equal; else oldNode.Name leaves its zone (a failure is
// ignored) and newNode.Name joins its new zone with id.
func (o *Overlay) UpdateID(oldNode, newNode *v1.Node, id int32) *Overlay {
	oldName, oldKey := newNode.Name, ""
	if oldNode != nil {
		oldName, oldKey = oldNode.Name, ZoneKey(oldNode)
	}
	newKey := ZoneKey(newNode)
	if oldKey == newKey {
		return o
	}
	c, _ := o.remove(oldName, oldKey)
	return c.add(newNode.Name, newKey, id)
}

// SetID returns o with every occurrence of name given id, each keeping
// its place, as Tree.SetID; o itself if no zone lists name or each lists
// it with id already. O(zones + the changes made in the zones listing
// name).
func (o *Overlay) SetID(name string, id int32) *Overlay {
	var c *Overlay
	for i, z := range o.zones {
		nz := z.withID(name, id)
		if nz == nil {
			continue
		}
		if c == nil {
			c = &Overlay{zones: slices.Clone(o.zones), numNodes: o.numNodes}
		}
		c.zones[i] = nz
	}
	if c == nil {
		return o
	}
	return c
}

// withID returns a copy of z that lists name with id, nil if z does not
// list name or lists it with id already (a base name whose id was not
// changed on the overlay is given id without comparing: its base id is
// found only by a scan).
func (z *ozone) withID(name string, id int32) *ozone {
	if j := z.indexAdded(name); j >= 0 {
		if z.added[j].id == id {
			return nil
		}
		c := *z
		c.added = slices.Clone(z.added)
		c.added[j].id = id
		return &c
	}
	if z.base == nil {
		return nil
	}
	if _, ok := z.base.members[name]; !ok {
		return nil
	}
	if _, gone := z.gone[name]; gone {
		return nil
	}
	if old, ok := z.ids[name]; ok && old == id {
		return nil
	}
	c := *z
	c.ids = make(map[string]int32, len(z.ids)+1)
	for k, v := range z.ids {
		c.ids[k] = v
	}
	c.ids[name] = id
	return &c
}

// AppendIDs is Tree.AppendIDs: the ids in the zone-interleaved order of
// the names, with List's error. O(names).
func (o *Overlay) AppendIDs(dst []int32) ([]int32, error) {
	ids := make([][]int32, len(o.zones))
	zs := make([]*zone, len(o.zones))
	for i, z := range o.zones {
		if z.base != nil && len(z.gone) == 0 && len(z.added) == 0 && len(z.ids) == 0 {
			ids[i] = z.base.ids
		} else {
			l := make([]int32, 0, z.size())
			if z.base != nil {
				for j, n := range z.base.names {
					if _, gone := z.gone[n]; !gone {
						id, ok := z.ids[n]
						if !ok {
							id = z.base.ids[j]
						}
						l = append(l, id)
					}
				}
			}
			for _, a := range z.added {
				l = append(l, a.id)
			}
			ids[i] = l
		}
		zs[i] = &zone{key: z.key, ids: ids[i]}
	}
	dst, _, err := interleave(zs, o.numNodes, dst, nil, func(z *zone) []int32 { return z.ids })
	return dst, err
}
