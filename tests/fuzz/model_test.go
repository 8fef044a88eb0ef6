package fuzz

import (
	"errors"

	v1 "k8s.io/api/core/v1"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/zonemodel"
)

// sentinels are the exported errors; every error the cache returns must
// match one of them with errors.Is.
var sentinels = []error{
	schedcache.ErrNilPod, schedcache.ErrNilNode, schedcache.ErrEmptyUID,
	schedcache.ErrClosed, schedcache.ErrFailed, schedcache.ErrPodAlreadyCached, schedcache.ErrPodAlreadyAdded,
	schedcache.ErrPodNotFound, schedcache.ErrPodAssumed, schedcache.ErrPodNotAssumed, schedcache.ErrPodNodeMismatch,
	schedcache.ErrCorrupted, schedcache.ErrUIDMismatch,
	// ErrNodeNotInZone before ErrNodeNotFound: a RemoveNode error matches both.
	schedcache.ErrNodeNotInZone, schedcache.ErrNodeNotFound, schedcache.ErrNodeNameMismatch,
	schedcache.ErrNodeInfoNotFound, schedcache.ErrInconsistentList,
	schedcache.ErrSnapshotPublished, schedcache.ErrNilSnapshot, schedcache.ErrInvalidArgument,
	schedcache.ErrTooManyPods, schedcache.ErrQuantityOverflow,
}

// errClass returns the first sentinel err matches, nil for nil, and err
// itself when it matches none (never equal to a model error).
func errClass(err error) error {
	if err == nil {
		return nil
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// zoneKey is upstream's GetZoneKey (docs/upstream-semantics.md section 6), written out here
// rather than borrowed from the nodetree package under test.
func zoneKey(n *v1.Node) string {
	if n == nil || n.Labels == nil {
		return ""
	}
	zone, ok := n.Labels["failure-domain.beta.kubernetes.io/zone"]
	if !ok {
		zone = n.Labels["topology.kubernetes.io/zone"]
	}
	region, ok := n.Labels["failure-domain.beta.kubernetes.io/region"]
	if !ok {
		region = n.Labels["topology.kubernetes.io/region"]
	}
	if region == "" && zone == "" {
		return ""
	}
	return region + ":\x00:" + zone
}

// model is a compact sequential statement of the upstream cache semantics
// (sections 1, 3 and 6) with schedcache's documented deviations (typed
// errors instead of process exits, UpdatePod/UpdateNode argument checks),
// restricted to what FuzzOperations compares: pod states, node entries and
// their pod counts and requests, and the zone-tree order. ttl is 0.
type model struct {
	pods    map[string]*mPod
	entries map[string]*mEntry
	tree    *zonemodel.Model // the zone tree (section 6), naive
}

// req is a pod's contribution to its node, from the fuzz pod table:
// Requested cpu (millicores) and memory, NonZeroRequested cpu and memory.
type req struct{ cpu, mem, nzCPU, nzMem int64 }

func (r *req) add(o req, sign int64) {
	r.cpu += sign * o.cpu
	r.mem += sign * o.mem
	r.nzCPU += sign * o.nzCPU
	r.nzMem += sign * o.nzMem
}

type mPod struct {
	pod     *v1.Pod
	assumed bool
	req     req
}

type mEntry struct {
	node *v1.Node
	pods int
	req  req // sum over the entry's pods
}

func newModel() *model {
	return &model{pods: map[string]*mPod{}, entries: map[string]*mEntry{}, tree: zonemodel.New()}
}

func (m *model) entry(name string) *mEntry {
	e := m.entries[name]
	if e == nil {
		e = &mEntry{}
		m.entries[name] = e
	}
	return e
}

func (m *model) agg(p *v1.Pod, assumed bool, r req) {
	e := m.entry(p.Spec.NodeName)
	e.pods++
	e.req.add(r, 1)
	m.pods[string(p.UID)] = &mPod{pod: p, assumed: assumed, req: r}
}

func (m *model) sub(uid string) {
	p := m.pods[uid]
	name := p.pod.Spec.NodeName
	e := m.entries[name]
	e.pods--
	e.req.add(p.req, -1)
	delete(m.pods, uid)
	if e.pods == 0 && e.node == nil {
		delete(m.entries, name)
	}
}

// ---- pods (section 1.3) ----

func (m *model) assume(p *v1.Pod, r req) error {
	if m.pods[string(p.UID)] != nil { // an empty node name is the nodeless entry ""
		return schedcache.ErrPodAlreadyCached
	}
	m.agg(p, true, r)
	return nil
}

func (m *model) forget(p *v1.Pod) error {
	s := m.pods[string(p.UID)]
	switch {
	case s == nil:
		return nil
	case s.pod.Spec.NodeName != p.Spec.NodeName:
		return schedcache.ErrPodNodeMismatch
	case !s.assumed:
		return schedcache.ErrPodNotAssumed
	}
	m.sub(string(p.UID))
	return nil
}

func (m *model) add(p *v1.Pod, r req) error {
	s := m.pods[string(p.UID)]
	switch {
	case s == nil:
	case s.assumed:
		m.sub(string(p.UID))
	default:
		return schedcache.ErrPodAlreadyAdded
	}
	m.agg(p, false, r)
	return nil
}

func (m *model) update(old, p *v1.Pod, r req) error {
	s := m.pods[string(old.UID)]
	switch {
	case s == nil:
		return schedcache.ErrPodNotFound
	case s.assumed:
		return schedcache.ErrPodAssumed
	case p.Spec.NodeName != s.pod.Spec.NodeName:
		return schedcache.ErrCorrupted
	case old.Spec.NodeName != s.pod.Spec.NodeName:
		return schedcache.ErrPodNodeMismatch
	case p.UID != old.UID && m.pods[string(p.UID)] != nil:
		return schedcache.ErrUIDMismatch // a rename to a free UID is accepted
	}
	m.sub(string(old.UID))
	m.agg(p, false, r)
	return nil
}

func (m *model) remove(p *v1.Pod) error {
	s := m.pods[string(p.UID)]
	switch {
	case s == nil:
		return schedcache.ErrPodNotFound
	case p.Spec.NodeName != "" && p.Spec.NodeName != s.pod.Spec.NodeName:
		return schedcache.ErrCorrupted
	}
	m.sub(string(p.UID))
	return nil
}

// ---- nodes (section 3) ----

func (m *model) addNode(n *v1.Node) {
	m.entry(n.Name)
	m.tree.Add(n.Name, zoneKey(n))
	m.entries[n.Name].node = n
}

// updateNode: old serves only the zone move (nil: zone key ""). Refused: a
// nil old with a zoned n (upstream panics), an old of another name whose
// zone move would unlist that live node (docs/rejections.md).
func (m *model) updateNode(old, n *v1.Node) error {
	switch {
	case n == nil || old == nil && zoneKey(n) != "":
		return schedcache.ErrNilNode
	case old != nil && old.Name != n.Name && zoneKey(old) != zoneKey(n) && m.tree.Lists(old.Name, zoneKey(old)) &&
		m.entries[old.Name] != nil && m.entries[old.Name].node != nil:
		return schedcache.ErrNodeNameMismatch
	}
	if m.entries[n.Name] == nil {
		m.entry(n.Name)
		m.tree.Add(n.Name, zoneKey(n))
	}
	if zoneKey(old) != zoneKey(n) {
		m.tree.Remove(old.Name, zoneKey(old)) // old != nil: a nil old with a zoned n was refused
		m.tree.Add(n.Name, zoneKey(n))
	}
	m.entries[n.Name].node = n
	return nil
}

func (m *model) removeNode(n *v1.Node) error {
	e := m.entries[n.Name]
	if e == nil {
		return schedcache.ErrNodeNotFound
	}
	e.node = nil
	if e.pods == 0 {
		delete(m.entries, n.Name)
	}
	if !m.tree.Remove(n.Name, zoneKey(n)) {
		return schedcache.ErrNodeNotInZone
	}
	return nil
}

// list is the snapshot node list: the tree order, skipping names whose
// entry has no node object.
func (m *model) list() []string {
	var out []string
	for _, name := range m.tree.List() {
		if e := m.entries[name]; e != nil && e.node != nil {
			out = append(out, name)
		}
	}
	return out
}
