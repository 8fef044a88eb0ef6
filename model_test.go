package schedcache_test

import (
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
	"github.com/schedcache/schedcache/internal/zonemodel"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/nodetree"
)

// model is a deliberately simple, single-goroutine statement of the
// upstream cache semantics (docs/upstream-semantics.md)
// plus schedcache's documented deviations. Everything is recomputed from
// scratch; nothing is incremental except what upstream makes history
// dependent (pod order, host-port sets, image registry, affinity sub-lists).
type model struct {
	ttl     time.Duration
	pods    map[string]*mPod
	entries map[string]*mEntry
	tree    *zonemodel.Model // the zone tree, naive
	images  map[string]*mImage
	touched map[string]bool // entries changed by the current op
	// pvcDelta is upstream v1.37's pending PVC delta as the long-lived
	// snapshot sees it: every change of any entry's PVC counts (nodeless
	// entries' included) and RemoveNode's subtraction since its last refresh.
	pvcDelta map[string]int
	// pvcCum is the same, never cleared: what a new snapshot's first
	// refresh applies while the cache has no node object.
	pvcCum map[string]int
}

type mPod struct {
	info        *nodeinfo.PodInfo
	assumed     bool
	finished    bool
	deadline    time.Time
	hasDeadline bool
}

type mEntry struct {
	node      *v1.Node
	pods      []*nodeinfo.PodInfo
	aff, anti []*nodeinfo.PodInfo
	ports     map[string]map[nodeinfo.ProtocolPort]bool
	images    map[string]nodeinfo.ImageStateSummary // as of the entry's last change
	scalars   map[v1.ResourceName]bool              // every scalar a pod of the entry ever requested (upstream never prunes a key)
}

type mImage struct {
	size  int64
	nodes map[string]bool
}

func newModel(ttl time.Duration) *model {
	return &model{
		ttl:      ttl,
		pods:     map[string]*mPod{},
		entries:  map[string]*mEntry{},
		tree:     zonemodel.New(),
		images:   map[string]*mImage{},
		touched:  map[string]bool{},
		pvcDelta: map[string]int{},
		pvcCum:   map[string]int{},
	}
}

func (m *model) entry(name string) *mEntry {
	e := m.entries[name]
	if e == nil {
		e = &mEntry{ports: map[string]map[nodeinfo.ProtocolPort]bool{}, scalars: map[v1.ResourceName]bool{}}
		m.entries[name] = e
	}
	m.touched[name] = true
	return e
}

func (m *model) agg(info *nodeinfo.PodInfo, assumed bool) {
	e := m.entry(info.NodeName())
	e.pods = append(e.pods, info)
	for _, s := range info.Requests().Scalars() {
		e.scalars[s.Name] = true
	}
	if info.HasAffinity() {
		e.aff = append(e.aff, info)
	}
	if info.HasRequiredAntiAffinity() {
		e.anti = append(e.anti, info)
	}
	for _, k := range info.PVCKeys() {
		m.pvcDelta[k]++
		m.pvcCum[k]++
	}
	for _, hp := range info.HostPorts() {
		if e.ports[hp.IP] == nil {
			e.ports[hp.IP] = map[nodeinfo.ProtocolPort]bool{}
		}
		e.ports[hp.IP][nodeinfo.ProtocolPort{Protocol: string(hp.Protocol), Port: hp.Port}] = true
	}
	m.pods[info.Key()] = &mPod{info: info, assumed: assumed}
}

func swapRemove(s []*nodeinfo.PodInfo, key string) []*nodeinfo.PodInfo {
	for i := range s {
		if s[i].Key() == key {
			s[i] = s[len(s)-1]
			s = s[:len(s)-1]
			break
		}
	}
	if len(s) == 0 {
		return nil
	}
	return s
}

func (m *model) sub(p *mPod, aff, anti bool) {
	name := p.info.NodeName()
	e := m.entry(name)
	key := p.info.Key()
	if aff {
		e.aff = swapRemove(e.aff, key)
	}
	if anti {
		e.anti = swapRemove(e.anti, key)
	}
	e.pods = swapRemove(e.pods, key)
	for _, k := range p.info.PVCKeys() {
		m.pvcDelta[k]--
		m.pvcCum[k]--
	}
	for _, hp := range p.info.HostPorts() {
		delete(e.ports[hp.IP], nodeinfo.ProtocolPort{Protocol: string(hp.Protocol), Port: hp.Port})
		if len(e.ports[hp.IP]) == 0 {
			delete(e.ports, hp.IP)
		}
	}
	delete(m.pods, key)
	if len(e.pods) == 0 && e.node == nil {
		delete(m.entries, name)
	}
}

func (m *model) assume(info *nodeinfo.PodInfo) error {
	if m.pods[info.Key()] != nil {
		return schedcache.ErrPodAlreadyCached
	}
	m.agg(info, true)
	return nil
}

func (m *model) finish(key string, now time.Time) {
	p := m.pods[key]
	if p == nil || !p.assumed {
		return
	}
	p.finished = true
	if m.ttl > 0 {
		p.deadline, p.hasDeadline = now.Add(m.ttl), true
	}
}

func (m *model) forget(pod *v1.Pod) error {
	p := m.pods[string(pod.UID)]
	switch {
	case p == nil:
		return nil
	case p.info.NodeName() != pod.Spec.NodeName:
		return schedcache.ErrPodNodeMismatch
	case !p.assumed:
		return schedcache.ErrPodNotAssumed
	}
	m.sub(p, nodeinfo.PodHasAffinity(pod), nodeinfo.PodHasRequiredAntiAffinity(pod))
	return nil
}

func (m *model) add(info *nodeinfo.PodInfo) error {
	p := m.pods[info.Key()]
	switch {
	case p == nil:
		m.agg(info, false)
	case p.assumed:
		m.sub(p, p.info.HasAffinity(), p.info.HasRequiredAntiAffinity())
		m.agg(info, false)
	default:
		return schedcache.ErrPodAlreadyAdded
	}
	return nil
}

func (m *model) update(oldPod *v1.Pod, info *nodeinfo.PodInfo) error {
	p := m.pods[string(oldPod.UID)]
	switch {
	case p == nil:
		return schedcache.ErrPodNotFound
	case p.assumed:
		return schedcache.ErrPodAssumed
	case info.NodeName() != p.info.NodeName():
		return schedcache.ErrCorrupted
	case oldPod.Spec.NodeName != p.info.NodeName():
		return schedcache.ErrPodNodeMismatch
	case info.Key() != string(oldPod.UID) && m.pods[info.Key()] != nil:
		return schedcache.ErrUIDMismatch // a rename to a free UID is accepted
	}
	m.sub(p, nodeinfo.PodHasAffinity(oldPod), nodeinfo.PodHasRequiredAntiAffinity(oldPod))
	m.agg(info, false)
	return nil
}

func (m *model) remove(pod *v1.Pod) error {
	p := m.pods[string(pod.UID)]
	if p == nil {
		return schedcache.ErrPodNotFound
	}
	if pod.Spec.NodeName != "" && pod.Spec.NodeName != p.info.NodeName() {
		return schedcache.ErrCorrupted
	}
	m.sub(p, p.info.HasAffinity(), p.info.HasRequiredAntiAffinity())
	return nil
}

// expire runs one upstream expiry pass at now.
func (m *model) expire(now time.Time) {
	var keys []string
	for k, p := range m.pods {
		if p.assumed && p.finished && p.hasDeadline && now.After(p.deadline) {
			keys = append(keys, k)
		}
	}
	for _, k := range keys {
		p := m.pods[k]
		m.sub(p, p.info.HasAffinity(), p.info.HasRequiredAntiAffinity())
	}
}

// ---- images ----

func (m *model) register(n *v1.Node) {
	for _, img := range n.Status.Images {
		for _, name := range img.Names {
			st := m.images[name]
			if st == nil {
				st = &mImage{size: img.SizeBytes, nodes: map[string]bool{}}
				m.images[name] = st
			}
			st.nodes[n.Name] = true
		}
	}
}

func (m *model) unregister(n *v1.Node) {
	for _, img := range n.Status.Images {
		for _, name := range img.Names {
			if st := m.images[name]; st != nil {
				delete(st.nodes, n.Name)
				if len(st.nodes) == 0 {
					delete(m.images, name)
				}
			}
		}
	}
}

// ---- nodes ----

func (m *model) addNode(n *v1.Node) {
	e := m.entry(n.Name)
	if e.node != nil {
		m.unregister(e.node)
	}
	m.tree.Add(n.Name, nodetree.ZoneKey(n))
	m.register(n)
	e.node = n
}

// updateNode is upstream's UpdateNode: old serves only the zone move (nil:
// zone key ""), with the two refusals of docs/rejections.md.
func (m *model) updateNode(old, n *v1.Node) error {
	oldZone, newZone := nodetree.ZoneKey(old), nodetree.ZoneKey(n)
	if old == nil && newZone != "" {
		return schedcache.ErrNilNode
	}
	if old != nil && old.Name != n.Name && oldZone != newZone && m.tree.Lists(old.Name, oldZone) {
		if e := m.entries[old.Name]; e != nil && e.node != nil {
			return schedcache.ErrNodeNameMismatch
		}
	}
	e, ok := m.entries[n.Name]
	if !ok {
		e = m.entry(n.Name)
		m.tree.Add(n.Name, nodetree.ZoneKey(n))
	} else {
		m.touched[n.Name] = true
		if e.node != nil {
			m.unregister(e.node)
		}
	}
	if oldZone != newZone {
		m.tree.Remove(old.Name, oldZone)
		m.tree.Add(n.Name, newZone)
	}
	m.register(n)
	e.node = n
	return nil
}

func (m *model) removeNode(n *v1.Node) error {
	e, ok := m.entries[n.Name]
	if !ok {
		return schedcache.ErrNodeNotFound
	}
	m.touched[n.Name] = true
	for k, c := range e.aggregate().pvc {
		m.pvcDelta[k] -= c
		m.pvcCum[k] -= c
	}
	e.node = nil
	if len(e.pods) == 0 {
		delete(m.entries, n.Name)
	}
	if !m.tree.Remove(n.Name, nodetree.ZoneKey(n)) {
		return schedcache.ErrNodeNotInZone
	}
	m.unregister(n)
	return nil
}

// endOp refreshes the image summaries of the entries the op touched: a
// published snapshot shows each node's counts as of its last change, as
// upstream's long-lived snapshot refreshed after every operation does.
func (m *model) endOp() {
	for name := range m.touched {
		e := m.entries[name]
		if e == nil || e.node == nil {
			continue
		}
		e.images = m.imagesNow(e)
	}
	clear(m.touched)
}

// imagesNow returns the image summaries a clone of e taken now shows:
// each name of its node's images with the registry's size and node count.
func (m *model) imagesNow(e *mEntry) map[string]nodeinfo.ImageStateSummary {
	out := map[string]nodeinfo.ImageStateSummary{}
	for _, img := range e.node.Status.Images {
		for _, in := range img.Names {
			st := m.images[in]
			if st == nil {
				out[in] = nodeinfo.ImageStateSummary{Size: img.SizeBytes}
				continue
			}
			out[in] = nodeinfo.ImageStateSummary{Size: st.size, NumNodes: len(st.nodes)}
		}
	}
	return out
}

// ---- expectations derived from scratch ----

type aggregate struct {
	requested, nonZero nodeinfo.Resource
	scalars            map[v1.ResourceName]int64 // Requested's scalars: every key the entry's pods ever requested, nil if none
	pvc                map[string]int
}

func (e *mEntry) aggregate() aggregate {
	var a aggregate
	a.pvc = map[string]int{}
	if len(e.scalars) > 0 {
		a.scalars = map[v1.ResourceName]int64{}
		for k := range e.scalars {
			a.scalars[k] = 0
		}
	}
	for _, p := range e.pods {
		r := p.Requests()
		a.requested.MilliCPU += r.MilliCPU
		a.requested.Memory += r.Memory
		a.requested.EphemeralStorage += r.EphemeralStorage
		for _, s := range r.Scalars() {
			a.scalars[s.Name] += s.Value
		}
		a.nonZero.MilliCPU += p.NonZeroCPU()
		a.nonZero.Memory += p.NonZeroMemory()
		for _, k := range p.PVCKeys() {
			a.pvc[k]++
		}
	}
	return a
}

func keys(ps []*nodeinfo.PodInfo) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Key())
	}
	return out
}

// ---- random objects ----

var (
	modelZones = []map[string]string{
		nil,
		{"topology.kubernetes.io/region": "r1", "topology.kubernetes.io/zone": "a"},
		{"topology.kubernetes.io/region": "r1", "topology.kubernetes.io/zone": "b"},
		{"topology.kubernetes.io/zone": "c"},
	}
	modelImages = [][]string{{"img-a"}, {"img-b", "img-b:v1"}, {"img-c"}, {"img-d"}}
)

func randNode(r *rand.Rand, name string) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: modelZones[r.Intn(len(modelZones))]},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU:              *resource.NewQuantity(int64(4+r.Intn(4)), resource.DecimalSI),
			v1.ResourceMemory:           *resource.NewQuantity(int64(8+r.Intn(8))<<30, resource.BinarySI),
			v1.ResourceEphemeralStorage: *resource.NewQuantity(int64(50+r.Intn(50))<<30, resource.BinarySI),
			v1.ResourcePods:             *resource.NewQuantity(110, resource.DecimalSI),
		}},
	}
	if r.Intn(2) == 0 {
		n.Status.Allocatable["nvidia.com/gpu"] = *resource.NewQuantity(int64(r.Intn(8)), resource.DecimalSI)
		n.Status.Allocatable[v1.ResourceHugePagesPrefix+"2Mi"] = *resource.NewQuantity(int64(r.Intn(64))<<21, resource.BinarySI)
	}
	for i, names := range modelImages {
		if r.Intn(2) == 0 {
			n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: names, SizeBytes: int64(100*(i+1) + r.Intn(3))})
		}
	}
	return n
}

func randPod(r *rand.Rand, uid, node string) *v1.Pod {
	c := v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{}}}
	if r.Intn(5) > 0 {
		c.Resources.Requests[v1.ResourceCPU] = *resource.NewMilliQuantity(int64(50+r.Intn(500)), resource.DecimalSI)
		c.Resources.Requests[v1.ResourceMemory] = *resource.NewQuantity(int64(1+r.Intn(64))<<20, resource.BinarySI)
	}
	if r.Intn(3) == 0 {
		c.Resources.Requests[v1.ResourceEphemeralStorage] = *resource.NewQuantity(int64(1+r.Intn(1024))<<20, resource.BinarySI)
	}
	if r.Intn(6) == 0 {
		c.Resources.Requests["example.com/gpu"] = *resource.NewQuantity(int64(r.Intn(3)), resource.DecimalSI)
	}
	if r.Intn(6) == 0 {
		c.Resources.Requests["nvidia.com/gpu"] = *resource.NewQuantity(int64(1+r.Intn(2)), resource.DecimalSI)
	}
	if r.Intn(8) == 0 {
		c.Resources.Requests[v1.ResourceHugePagesPrefix+"2Mi"] = *resource.NewQuantity(int64(1+r.Intn(4))<<21, resource.BinarySI)
	}
	if r.Intn(5) == 0 {
		c.Ports = []v1.ContainerPort{{HostPort: int32(8000 + r.Intn(2)), ContainerPort: 80}}
	}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid), ResourceVersion: fmt.Sprint(r.Int())},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{c}},
	}
	if r.Intn(4) == 0 {
		p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("claim-%d", r.Intn(3))}}}}
	}
	switch r.Intn(6) {
	case 0:
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{}}
	case 1:
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}}}}
	}
	return p
}

func sortedKeys[V any](mp map[string]V) []string {
	out := make([]string, 0, len(mp))
	for k := range mp {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func errClass(err error) error {
	for _, s := range []error{schedcache.ErrNilNode, schedcache.ErrNodeNameMismatch, schedcache.ErrPodAlreadyCached, schedcache.ErrPodAlreadyAdded,
		schedcache.ErrPodNotFound, schedcache.ErrPodAssumed, schedcache.ErrPodNotAssumed, schedcache.ErrPodNodeMismatch,
		schedcache.ErrCorrupted, schedcache.ErrUIDMismatch,
		// ErrNodeNotInZone before ErrNodeNotFound: a RemoveNode error matches both.
		schedcache.ErrNodeNotInZone, schedcache.ErrNodeNotFound} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}
