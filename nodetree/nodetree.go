// Package nodetree implements the zone-interleaved node order of the upstream
// kube-scheduler cache (k8s.io/kubernetes v1.35.4,
// pkg/scheduler/backend/cache/node_tree.go), as written in
// docs/upstream-semantics.md section 6.
//
// Nodes are grouped by zone key (see ZoneKey). Zones keep the order in which
// they were created; nodes keep the order in which they were added to their
// zone. List interleaves the zones round-robin: element 0 of every zone in
// zone order, then element 1, and so on.
package nodetree

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	v1 "k8s.io/api/core/v1"
)

// ErrNodeNotInZone is returned, wrapped, by Remove and RemoveName when the
// node name is not in the zone named by the zone key.
var ErrNodeNotInZone = errors.New("nodetree: node not found in zone")

// NotInZoneError is Remove's and RemoveName's error for a name its zone
// does not list; its text is upstream's node tree's. It wraps
// ErrNodeNotInZone.
type NotInZoneError struct {
	Name, Zone string
}

func (e *NotInZoneError) Error() string {
	return fmt.Sprintf("node %q in group %q was not found", e.Name, e.Zone)
}

func (e *NotInZoneError) Unwrap() error { return ErrNodeNotInZone }

// ErrZonesExhausted is returned by List and AppendList, together with the
// partial list, when every zone is exhausted before NumNodes names have been
// collected. It indicates an internal inconsistency and cannot occur through
// the exported methods.
var ErrZonesExhausted = errors.New("nodetree: all zones exhausted before reaching count of nodes expected")

// ZoneKey returns the zone key of node, exactly as upstream GetZoneKey
// (k8s.io/component-helpers/node/topology): "" if node has no labels or
// neither a region nor a zone, else region + ":\x00:" + zone. The zone is
// the value of label failure-domain.beta.kubernetes.io/zone if that label is
// present (even if empty), else of topology.kubernetes.io/zone; the region
// likewise from failure-domain.beta.kubernetes.io/region, then
// topology.kubernetes.io/region. A nil node has key "".
func ZoneKey(node *v1.Node) string {
	region, zone := zoneParts(node)
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// zoneParts returns the region and zone ZoneKey joins.
func zoneParts(node *v1.Node) (region, zone string) {
	if node == nil || node.Labels == nil {
		return "", ""
	}
	labels := node.Labels
	zone, ok := labels[v1.LabelFailureDomainBetaZone]
	if !ok {
		zone = labels[v1.LabelTopologyZone]
	}
	region, ok = labels[v1.LabelFailureDomainBetaRegion]
	if !ok {
		region = labels[v1.LabelTopologyRegion]
	}
	return region, zone
}

// isZoneKey reports whether key == ZoneKey of a node with region and
// zone, without building the key.
func isZoneKey(key, region, zone string) bool {
	if region == "" && zone == "" {
		return key == ""
	}
	return len(key) == len(region)+3+len(zone) && key[:len(region)] == region &&
		key[len(region):len(region)+3] == ":\x00:" && key[len(region)+3:] == zone
}

// zone is one zone of a Tree: its key and its node names in insertion order,
// each with the id its adder gave it (-1 if none).
type zone struct {
	key     string
	names   []string
	ids     []int32             // parallel to names
	members map[string]struct{} // the set of names, for the duplicate check
}

// Tree holds node names grouped by zone key and lists them zone-interleaved.
//
// Contract: a Tree is not safe for concurrent use. It is owned by one
// goroutine (the coordinator), which alone may call any method, including
// the read-only ones. No method blocks. The zero Tree is empty and ready to
// use.
type Tree struct {
	byKey    map[string]*zone
	zones    []*zone // zone order
	numNodes int
	version  uint64
	active   []*zone // scratch for interleave, reused by the next list
}

// New returns an empty Tree.
func New() *Tree {
	return &Tree{byKey: make(map[string]*zone)}
}

// Add adds node.Name under ZoneKey(node), as AddName.
func (t *Tree) Add(node *v1.Node) {
	t.AddName(node.Name, ZoneKey(node))
}

// AddName appends name to the zone zoneKey, creating the zone at the end of
// the zone order if it does not exist. If name is already in that zone, AddName
// does nothing. Duplicates are detected per zone only: a name present under
// another zone key is added a second time.
func (t *Tree) AddName(name, zoneKey string) {
	t.AddNameID(name, zoneKey, -1)
}

// AddID is Add with an id that AppendIDs lists in place of the name: the
// owner's handle for the node, so that it can walk the list without
// looking names up. A name added again to the same zone keeps its first id.
func (t *Tree) AddID(node *v1.Node, id int32) {
	t.AddNameID(node.Name, ZoneKey(node), id)
}

// AddNameID is AddName with an id (see AddID).
func (t *Tree) AddNameID(name, zoneKey string, id int32) {
	if t.add(name, zoneKey, id) {
		t.version++
	}
}

// Remove removes node.Name from the zone ZoneKey(node), as RemoveName.
func (t *Tree) Remove(node *v1.Node) error {
	return t.RemoveName(node.Name, ZoneKey(node))
}

// RemoveName removes name from the zone zoneKey, keeping the order of the
// other names. A zone left empty is deleted and dropped from the zone order;
// the other zones keep their order. If name is not in that zone, RemoveName
// changes nothing and returns an error wrapping ErrNodeNotInZone.
func (t *Tree) RemoveName(name, zoneKey string) error {
	if !t.remove(name, zoneKey) {
		return &NotInZoneError{Name: name, Zone: zoneKey}
	}
	t.version++
	return nil
}

// Update moves a node whose labels changed from oldNode to newNode. oldNode
// may be nil, which stands for a node named newNode.Name with zone key "".
// If the zone keys of oldNode and newNode are equal, Update does nothing and
// the node keeps its position. Otherwise it removes oldNode.Name from the old
// zone, ignoring a failure, and adds newNode.Name to the new zone as AddName.
//
// Upstream panics when oldNode is nil and newNode has a non-empty zone key;
// Update does not.
func (t *Tree) Update(oldNode, newNode *v1.Node) {
	t.UpdateID(oldNode, newNode, -1)
}

// UpdateID is Update that gives the name id in its new zone (see AddID).
func (t *Tree) UpdateID(oldNode, newNode *v1.Node, id int32) {
	oldName, oldKey := newNode.Name, ""
	if oldNode != nil {
		oldName, oldKey = oldNode.Name, ZoneKey(oldNode)
	}
	t.update(oldName, oldKey, newNode.Name, ZoneKey(newNode), id)
}

// UpdateName is Update for a node named name whose zone key changes from
// oldZoneKey to newZoneKey.
func (t *Tree) UpdateName(name, oldZoneKey, newZoneKey string) {
	t.UpdateNameID(name, oldZoneKey, newZoneKey, -1)
}

// UpdateNameID is UpdateName that gives name id in its new zone (see AddID).
func (t *Tree) UpdateNameID(name, oldZoneKey, newZoneKey string, id int32) {
	t.update(name, oldZoneKey, name, newZoneKey, id)
}

func (t *Tree) update(oldName, oldKey, newName, newKey string, id int32) {
	if oldKey == newKey {
		return
	}
	removed := t.remove(oldName, oldKey)
	added := t.add(newName, newKey, id)
	if removed || added {
		t.version++
	}
}

// SetID gives every occurrence of name, in any zone, the id id, each
// keeping its place (an owner whose handle for a node changed while the
// tree still lists the node's name, see AddID: a name keeps the id it was
// first added with). It reports whether it changed an id; Version
// increases then. O(zones + names of the zones listing name).
func (t *Tree) SetID(name string, id int32) bool {
	changed := false
	for _, z := range t.zones {
		if _, ok := z.members[name]; !ok {
			continue
		}
		if i := slices.Index(z.names, name); z.ids[i] != id {
			z.ids[i] = id
			changed = true
		}
	}
	if changed {
		t.version++
	}
	return changed
}

// NumNodes returns the number of names in the tree, duplicates included.
func (t *Tree) NumNodes() int {
	return t.numNodes
}

// List returns the node names zone-interleaved: element 0 of every zone in
// zone order, then element 1 of every zone long enough, and so on. It returns
// nil for an empty tree. If the zones are exhausted before NumNodes names are
// collected, it returns the names collected and ErrZonesExhausted.
func (t *Tree) List() ([]string, error) {
	if len(t.zones) == 0 {
		return nil, nil
	}
	return t.AppendList(make([]string, 0, t.numNodes))
}

// AppendList appends the names List would return to dst and returns the
// extended slice. It allocates only if dst lacks capacity for NumNodes more
// names.
func (t *Tree) AppendList(dst []string) ([]string, error) {
	var err error
	dst, t.active, err = interleave(t.zones, t.numNodes, dst, t.active, func(z *zone) []string { return z.names })
	return dst, err
}

// AppendIDs appends, in List's order, the id each name was added with (-1
// for names added without one) and returns the extended slice, with the
// error List would return. It allocates only if dst lacks capacity for
// NumNodes more ids.
func (t *Tree) AppendIDs(dst []int32) ([]int32, error) {
	var err error
	dst, t.active, err = interleave(t.zones, t.numNodes, dst, t.active, func(z *zone) []int32 { return z.ids })
	return dst, err
}

// interleave appends count elements of(z) of the zones zone-interleaved:
// element 0 of every zone in zone order, then element 1, and so on. The
// result is upstream's list(), so that even an inconsistent count gives
// upstream's result: rounds always complete, and the zones are declared
// exhausted only at the start of a round (when none is left with an
// element for that round).
//
// Each round walks only the zones still active: a zone that contributed
// nothing to a round is dropped from the scratch slice active (kept in
// zone order), so the cost is O(zones + names appended), where upstream's
// loop, visiting every zone in every round, is O(zones x longest zone)
// (BenchmarkZoneMove20kZones in actor). active is returned for reuse.
func interleave[T any](zones []*zone, count int, dst []T, active []*zone, of func(*zone) []T) ([]T, []*zone, error) {
	if len(zones) == 0 {
		return dst, active, nil
	}
	active = append(active[:0], zones...)
	defer clear(active) // the scratch must not keep removed zones alive
	want := len(dst) + count
	for idx := 0; len(dst) < want; idx++ {
		// Upstream counts a zone as exhausted in the first round it has
		// no element for; it fails at the start of a round once every
		// zone is exhausted, that is when no zone is active.
		if len(active) == 0 {
			return dst, active[:0], ErrZonesExhausted
		}
		n := 0
		for _, z := range active {
			elems := of(z)
			if idx >= len(elems) {
				continue // exhausted in this round: drop it
			}
			dst = append(dst, elems[idx])
			active[n] = z
			n++
		}
		active = active[:n]
	}
	return dst, active[:0], nil
}

// Has reports whether name is in any zone. It costs one map lookup per zone.
func (t *Tree) Has(name string) bool {
	for _, z := range t.zones {
		if _, ok := z.members[name]; ok {
			return true
		}
	}
	return false
}

// Zones returns a copy of the zone keys in zone order.
func (t *Tree) Zones() []string {
	keys := make([]string, len(t.zones))
	for i, z := range t.zones {
		keys[i] = z.key
	}
	return keys
}

// Version returns a counter that increases on every call that changes the
// tree (adds or removes a name, and with it possibly a zone). The output of
// List changes only when Version does, so the owner may cache it by Version.
// Calls that change nothing leave Version unchanged. A new Tree has Version 0.
func (t *Tree) Version() uint64 {
	return t.version
}

// add reports whether it added name, with id, to the zone zoneKey.
func (t *Tree) add(name, zoneKey string, id int32) bool {
	z, ok := t.byKey[zoneKey]
	if !ok {
		if t.byKey == nil {
			t.byKey = make(map[string]*zone)
		}
		z = &zone{key: zoneKey, members: make(map[string]struct{})}
		t.byKey[zoneKey] = z
		t.zones = append(t.zones, z)
	} else if _, dup := z.members[name]; dup {
		return false
	}
	z.names = append(z.names, name)
	z.ids = append(z.ids, id)
	z.members[name] = struct{}{}
	t.numNodes++
	return true
}

// remove reports whether it removed name from the zone zoneKey.
func (t *Tree) remove(name, zoneKey string) bool {
	z, ok := t.byKey[zoneKey]
	if !ok {
		return false
	}
	if _, ok := z.members[name]; !ok {
		return false
	}
	for i, n := range z.names {
		if n == name {
			last := len(z.names) - 1
			copy(z.names[i:], z.names[i+1:])
			z.names[last] = ""
			z.names = z.names[:last]
			copy(z.ids[i:], z.ids[i+1:])
			z.ids = z.ids[:last]
			break
		}
	}
	delete(z.members, name)
	t.numNodes--
	if len(z.names) == 0 {
		t.removeZone(z)
	}
	return true
}

func (t *Tree) removeZone(z *zone) {
	delete(t.byKey, z.key)
	for i, zz := range t.zones {
		if zz == z {
			last := len(t.zones) - 1
			copy(t.zones[i:], t.zones[i+1:])
			t.zones[last] = nil
			t.zones = t.zones[:last]
			return
		}
	}
}

// InZone reports whether the zone zoneKey lists name: whether Remove of a
// node with that name and zone key would remove something.
func (t *Tree) InZone(name, zoneKey string) bool {
	z, ok := t.byKey[zoneKey]
	if !ok {
		return false
	}
	_, ok = z.members[name]
	return ok
}

// Clone returns an independent copy of t, which it does not change: the
// zones, their order, names, ids and Version. O(names). Like every method
// it must be called by t's owner (or, on a Tree no one changes any more,
// by any number of goroutines: it only reads t).
func (t *Tree) Clone() *Tree {
	c := &Tree{byKey: make(map[string]*zone, len(t.zones)), zones: make([]*zone, len(t.zones)), numNodes: t.numNodes, version: t.version}
	for i, z := range t.zones {
		cz := &zone{key: z.key, names: slices.Clone(z.names), ids: slices.Clone(z.ids), members: maps.Clone(z.members)}
		c.zones[i] = cz
		c.byKey[z.key] = cz
	}
	return c
}
