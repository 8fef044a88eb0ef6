package actor

import (
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache/internal/zonemodel"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/nodetree"
	"github.com/schedcache/schedcache/snapshot"
)

// ---- a deliberately simple model of a fork: maps, totals recomputed ----

type fmEntry struct {
	node *v1.Node // nil: a ghost
	pods map[string]bool
	imgs map[string]nodeinfo.ImageStateSummary // the node's summaries as cloned at its last change; never written
}

// fmImage is upstream's shared summary of an image name: the size its
// first node listed and the set of node names listing it.
type fmImage struct {
	size  int64
	nodes map[string]bool
}

type fmodel struct {
	pods    map[string]*v1.Pod // key -> stored object
	assumed map[string]bool
	entries map[string]*fmEntry
	tree    *zonemodel.Model
	images  map[string]*fmImage // upstream's imageStates, transcribed
}

func newFModel() *fmodel {
	return &fmodel{pods: map[string]*v1.Pod{}, assumed: map[string]bool{}, entries: map[string]*fmEntry{}, tree: zonemodel.New(),
		images: map[string]*fmImage{}}
}

func (m *fmodel) clone() *fmodel {
	c := &fmodel{pods: maps.Clone(m.pods), assumed: maps.Clone(m.assumed), entries: map[string]*fmEntry{}, tree: m.tree.Clone(),
		images: map[string]*fmImage{}}
	for n, e := range m.entries {
		c.entries[n] = &fmEntry{node: e.node, pods: maps.Clone(e.pods), imgs: e.imgs}
	}
	for n, im := range m.images {
		c.images[n] = &fmImage{size: im.size, nodes: maps.Clone(im.nodes)}
	}
	return c
}

// register and unregister are upstream's addNodeImageStates and
// removeNodeImageStates, literally: per-image sets of node names.
func (m *fmodel) register(n *v1.Node) {
	for _, im := range n.Status.Images {
		for _, name := range im.Names {
			if m.images[name] == nil {
				m.images[name] = &fmImage{size: im.SizeBytes, nodes: map[string]bool{}}
			}
			m.images[name].nodes[n.Name] = true
		}
	}
}

func (m *fmodel) unregister(n *v1.Node) {
	if n == nil {
		return
	}
	for _, im := range n.Status.Images {
		for _, name := range im.Names {
			if st := m.images[name]; st != nil {
				delete(st.nodes, n.Name)
				if len(st.nodes) == 0 {
					delete(m.images, name)
				}
			}
		}
	}
}

// summaries is what a clone of node taken now shows: for each name it
// lists, the shared summary's size and node count now.
func (m *fmodel) summaries(n *v1.Node) map[string]nodeinfo.ImageStateSummary {
	out := map[string]nodeinfo.ImageStateSummary{}
	if n == nil {
		return out
	}
	for _, im := range n.Status.Images {
		for _, name := range im.Names {
			if st := m.images[name]; st != nil {
				out[name] = nodeinfo.ImageStateSummary{Size: st.size, NumNodes: len(st.nodes)}
			}
		}
	}
	return out
}

// touch notes a change of node name's entry: a snapshot published now
// clones it with the image counts now.
func (m *fmodel) touch(name string) {
	if e := m.entries[name]; e != nil && e.node != nil {
		e.imgs = m.summaries(e.node)
	}
}

// touchAll clones every node with the counts now (a snapshot published
// after several operations in one epoch, as the base).
func (m *fmodel) touchAll() {
	for name := range m.entries {
		m.touch(name)
	}
}

func (m *fmodel) put(p *v1.Pod, assumed bool) {
	k := string(p.UID)
	m.pods[k], m.assumed[k] = p, assumed
	m.entries[p.Spec.NodeName].pods[k] = true
	m.touch(p.Spec.NodeName)
}

func (m *fmodel) drop(k string) {
	name := m.pods[k].Spec.NodeName
	m.touch(name)
	e := m.entries[name]
	delete(e.pods, k)
	if len(e.pods) == 0 && e.node == nil {
		delete(m.entries, name)
	}
	delete(m.pods, k)
	delete(m.assumed, k)
}

func (m *fmodel) assume(p *v1.Pod) error {
	if _, ok := m.pods[string(p.UID)]; ok {
		return ErrPodAlreadyCached
	}
	if m.entries[p.Spec.NodeName] == nil {
		return ErrNodeNotFound
	}
	m.put(p, true)
	return nil
}

func (m *fmodel) forget(k string) error {
	if _, ok := m.pods[k]; !ok {
		return nil
	}
	if !m.assumed[k] {
		return ErrPodNotAssumed
	}
	m.drop(k)
	return nil
}

func (m *fmodel) add(p *v1.Pod) error {
	k := string(p.UID)
	if _, ok := m.pods[k]; ok && !m.assumed[k] {
		return ErrPodAlreadyAdded
	}
	if m.entries[p.Spec.NodeName] == nil {
		return ErrNodeNotFound
	}
	if _, ok := m.pods[k]; ok {
		m.touch(m.pods[k].Spec.NodeName)
		delete(m.entries[m.pods[k].Spec.NodeName].pods, k)
		if e := m.entries[m.pods[k].Spec.NodeName]; len(e.pods) == 0 && e.node == nil && m.pods[k].Spec.NodeName != p.Spec.NodeName {
			delete(m.entries, m.pods[k].Spec.NodeName)
		}
	}
	m.put(p, false)
	return nil
}

func (m *fmodel) update(p *v1.Pod) error {
	k := string(p.UID)
	if _, ok := m.pods[k]; !ok {
		return ErrPodNotFound
	}
	if m.assumed[k] {
		return ErrPodAssumed
	}
	m.put(p, false)
	return nil
}

func (m *fmodel) remove(k string) error {
	if _, ok := m.pods[k]; !ok {
		return ErrPodNotFound
	}
	m.drop(k)
	return nil
}

func (m *fmodel) addNode(n *v1.Node) {
	e := m.entries[n.Name]
	if e == nil {
		e = &fmEntry{pods: map[string]bool{}}
		m.entries[n.Name] = e
	}
	m.unregister(e.node)
	m.register(n)
	e.node = n
	m.touch(n.Name)
	m.tree.Add(n.Name, nodetree.ZoneKey(n))
}

func (m *fmodel) updateNode(old, n *v1.Node) {
	e := m.entries[n.Name]
	m.unregister(e.node)
	m.register(n)
	e.node = n
	m.touch(n.Name)
	if ok, nk := nodetree.ZoneKey(old), nodetree.ZoneKey(n); ok != nk {
		m.tree.Remove(old.Name, ok)
		m.tree.Add(n.Name, nk)
	}
}

// removeNode removes the node n names; n (the object passed in, which
// may list other images than the stored one) is unregistered. If n's zone
// does not list the name (n names another zone), the tree keeps it,
// nothing is unregistered, and the error is ErrNodeNotFound, after the
// entry changed (upstream's removeNode).
func (m *fmodel) removeNode(n *v1.Node) error {
	e := m.entries[n.Name]
	if e == nil {
		return ErrNodeNotFound
	}
	e.node = nil
	if len(e.pods) == 0 {
		delete(m.entries, n.Name)
	}
	if !m.tree.Remove(n.Name, nodetree.ZoneKey(n)) {
		return ErrNodeNotFound
	}
	m.unregister(n)
	return nil
}

// check compares every observable of s with the model.
func (m *fmodel) check(t *testing.T, s *snapshot.Snapshot, step string) {
	t.Helper()
	require.Equal(t, len(m.pods), s.PodCount(), step)
	require.Equal(t, len(m.entries), s.NodeCount(), step)
	for k, p := range m.pods {
		e, ok := s.Pod(k)
		require.True(t, ok, "%s: pod %s", step, k)
		require.Same(t, p, e.Pod, "%s: pod %s", step, k)
		require.Equal(t, m.assumed[k], e.Assumed, "%s: pod %s", step, k)
	}
	seen := 0
	s.RangePods(func(k string, e snapshot.PodEntry) bool {
		seen++
		require.Same(t, m.pods[k], e.Pod, "%s: RangePods %s", step, k)
		return true
	})
	require.Equal(t, len(m.pods), seen, step)

	var list []string
	for _, name := range m.tree.List() {
		if e := m.entries[name]; e != nil && e.node != nil {
			list = append(list, name)
		}
	}
	require.Equal(t, len(list), s.NumNodes(), step)
	var aff, anti, nonHost []string
	used := map[string]bool{}
	for i, name := range list {
		ni := s.At(i)
		require.Equal(t, name, ni.NodeName(), "%s: list[%d]", step, i)
		got, err := s.Get(name)
		require.NoError(t, err)
		require.Same(t, ni, got)
		e := m.entries[name]
		require.Same(t, e.node, ni.Node(), step)
		var cpu, mem int64
		var na, nr, nh int
		var keys []string
		for k := range e.pods {
			pi, err := nodeinfo.NewPodInfo(m.pods[k])
			require.NoError(t, err)
			cpu += pi.Requests().MilliCPU
			mem += pi.Requests().Memory
			keys = append(keys, k)
			if pi.HasAffinity() {
				na++
			}
			if pi.HasRequiredAntiAffinity() {
				nr++
			}
			if pi.HasRequiredNonHostScopedAntiAffinity() {
				nh++
			}
			for _, c := range pi.PVCKeys() {
				used[c] = true
			}
		}
		var gotKeys []string
		for _, pi := range ni.Pods() {
			gotKeys = append(gotKeys, pi.Key())
		}
		sort.Strings(keys)
		sort.Strings(gotKeys)
		require.Equal(t, keys, gotKeys, "%s: pods of %s", step, name)
		require.Equal(t, cpu, ni.Requested().MilliCPU, "%s: cpu of %s", step, name)
		require.Equal(t, mem, ni.Requested().Memory, "%s: memory of %s", step, name)
		require.Equal(t, na, ni.NumPodsWithAffinity(), step)
		require.Equal(t, nr, ni.NumPodsWithRequiredAntiAffinity(), step)
		require.Equal(t, nh, ni.NumPodsWithRequiredNonHostScopedAntiAffinity(), step)
		require.Equal(t, e.imgs, ni.ImageStates(), "%s: image states of %s", step, name)
		require.Equal(t, len(e.imgs), ni.NumImageStates(), "%s: image states of %s", step, name)
		for _, im := range forkImages {
			want, wok := e.imgs[im]
			got, ok := ni.ImageState(im)
			require.Equal(t, wok, ok, "%s: image %s of %s", step, im, name)
			require.Equal(t, want, got, "%s: image %s of %s", step, im, name)
		}
		if na > 0 {
			aff = append(aff, name)
		}
		if nr > 0 {
			anti = append(anti, name)
		}
		if nh > 0 {
			nonHost = append(nonHost, name)
		}
	}
	names := func(l []*nodeinfo.NodeInfo, _ error) []string {
		var out []string
		for _, ni := range l {
			out = append(out, ni.NodeName())
		}
		return out
	}
	require.Equal(t, aff, names(s.HavePodsWithAffinityList()), step)
	require.Equal(t, anti, names(s.HavePodsWithRequiredAntiAffinityList()), step)
	require.Equal(t, nonHost, names(s.HavePodsWithRequiredNonHostScopedAntiAffinityList()), step)
	require.Equal(t, len(nonHost), s.NumNodesWithRequiredNonHostScopedAntiAffinity(), step)
	require.Equal(t, len(used), s.NumUsedPVCs(), step)
	for k := range used {
		require.True(t, s.IsPVCUsedByPods(k), "%s: pvc %s", step, k)
	}
	for name, e := range m.entries {
		if e.node == nil {
			_, err := s.Get(name)
			require.ErrorIs(t, err, snapshot.ErrNodeInfoNotFound, step)
		}
	}
	// The list is inconsistent when the tree names nodes without an
	// object (a RemoveNode naming another zone).
	require.Equal(t, m.tree.Count() != len(list), s.Err() != nil, "%s: %v", step, s.Err())
	// A fresh clone of every node (a snapshot refreshed from s for the
	// first time) shows the counts of s's registry.
	own := snapshot.NewEmptySnapshot()
	require.Equal(t, s.Err() != nil, own.UpdateFrom(s) != nil, step)
	for _, name := range list {
		ni, err := own.Get(name)
		require.NoError(t, err, step)
		require.Equal(t, m.summaries(m.entries[name].node), ni.ImageStates(), "%s: fresh clone's image states of %s", step, name)
	}
}

// ---- generators ----

var forkZones = []map[string]string{
	{v1.LabelTopologyZone: "a"}, {v1.LabelTopologyZone: "b"}, {v1.LabelTopologyZone: "c"}, nil,
}

func forkNode(r *rand.Rand, name string) *v1.Node {
	n := &v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: forkZones[r.Intn(len(forkZones))], ResourceVersion: fmt.Sprint(r.Int())},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{
			v1.ResourceCPU:    *resource.NewQuantity(int64(4+r.Intn(4)), resource.DecimalSI),
			v1.ResourceMemory: *resource.NewQuantity(int64(8+r.Intn(8))<<30, resource.BinarySI),
		}},
	}
	// Image lists overlap: up to 3 images from a pool of 6 names, an image
	// sometimes under a second name or listed twice, with sizes that
	// differ from node to node (a name keeps its first node's size).
	for i := r.Intn(4); i > 0; i-- {
		j := r.Intn(len(forkImages))
		names := []string{forkImages[j]}
		if r.Intn(3) == 0 {
			names = append(names, forkImages[(j+1)%len(forkImages)])
		}
		n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: names, SizeBytes: int64(100*(j+1) + r.Intn(3))})
	}
	return n
}

// forkImages is the pool of image names fork test nodes list.
var forkImages = []string{"img0", "img1", "img2", "img3", "img4", "img5"}

// staleNode returns an object for a RemoveNode of n as an informer may
// deliver it: n's name and zone, other images.
func staleNode(r *rand.Rand, n *v1.Node) *v1.Node {
	s := forkNode(r, n.Name)
	s.Labels = n.Labels
	return s
}

func forkPod(r *rand.Rand, uid, node string) *v1.Pod {
	c := v1.Container{Name: "c", Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU:    *resource.NewMilliQuantity(int64(50+r.Intn(500)), resource.DecimalSI),
		v1.ResourceMemory: *resource.NewQuantity(int64(1+r.Intn(64))<<20, resource.BinarySI),
	}}}
	p := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p-" + uid, Namespace: "ns", UID: types.UID(uid), ResourceVersion: fmt.Sprint(r.Int())},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{c}},
	}
	if r.Intn(4) == 0 {
		p.Spec.Volumes = []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: fmt.Sprintf("claim-%d", r.Intn(4))}}}}
	}
	switch r.Intn(6) {
	case 0:
		p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "zone"}}}}
	case 1:
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname"}}}}
	case 2: // non-host-scoped
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "zone"}}}}
	case 3: // a hostname term and a zone term: non-host-scoped
		p.Spec.Affinity = &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
			{TopologyKey: "kubernetes.io/hostname"}, {TopologyKey: "zone"}}}}
	}
	return p
}

// baseCluster builds a cache state with nodes and pods through the real
// coordinator core (the package's local driver) and its model.
func baseCluster(t testing.TB, r *rand.Rand, nodes, pods int) (*local, *snapshot.Snapshot, *fmodel) {
	ns := make([]*v1.Node, nodes)
	for i := range ns {
		ns[i] = forkNode(r, fmt.Sprintf("n%d", i))
	}
	ps := make([]*v1.Pod, pods)
	for i := range ps {
		ps[i] = forkPod(r, fmt.Sprintf("b%d", i), fmt.Sprintf("n%d", r.Intn(nodes)))
	}
	return baseClusterOf(t, ns, ps)
}

// baseClusterOf builds the cache state of baseCluster from its objects.
func baseClusterOf(t testing.TB, nodes []*v1.Node, pods []*v1.Pod) (*local, *snapshot.Snapshot, *fmodel) {
	l := newLocal(2, 0)
	m := newFModel()
	for _, n := range nodes {
		l.core.AddNode(n)
		m.addNode(n)
	}
	for i, p := range pods {
		info, err := nodeinfo.NewPodInfo(p)
		require.NoError(t, err)
		if i%3 == 0 {
			require.NoError(t, l.core.AssumePod(info))
			require.NoError(t, m.assume(p))
		} else {
			require.NoError(t, l.core.AddPod(info))
			require.NoError(t, m.add(p))
		}
	}
	s, err := l.Publish()
	require.NoError(t, err)
	m.touchAll() // one epoch: every node cloned with the counts at its end
	return l, s, m
}

// fingerprint renders everything a snapshot shows, to check it never
// changes.
func fingerprint(s *snapshot.Snapshot) string {
	out := fmt.Sprint(s.Epoch(), s.NumNodes(), s.NodeCount(), s.PodCount(), s.NumUsedPVCs(), s.NumNodesWithAffinity(), s.NumNodesWithRequiredAntiAffinity(),
		s.NumNodesWithRequiredNonHostScopedAntiAffinity(), "|")
	s.Range(func(i int, ni *nodeinfo.NodeInfo) bool {
		out += fmt.Sprint(ni.NodeName(), ni.Generation(), ni.NumPods(), ni.Requested().MilliCPU, ni.Requested().Memory, ni.Node().ResourceVersion, ";")
		return true
	})
	var keys []string
	s.RangePods(func(k string, e snapshot.PodEntry) bool {
		keys = append(keys, fmt.Sprint(k, e.Assumed, e.Pod.Spec.NodeName, e.Pod.ResourceVersion))
		return true
	})
	sort.Strings(keys)
	return out + fmt.Sprint(keys)
}

func errSentinel(err error) error {
	for _, s := range []error{ErrPodAlreadyCached, ErrPodAlreadyAdded, ErrPodNotFound, ErrPodAssumed,
		ErrPodNotAssumed, ErrNodeNotFound, snapshot.ErrNoForkPoint, snapshot.ErrStaleForkPoint} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// TestForkModel runs random fork operations (pods, nodes, nested forks,
// reverts to any point, commits of a level) against the simple model,
// comparing every observable after every step; snapshots taken on the way
// and the base are checked unchanged at the end.
// forkAssume and forkAdd call the fork's AssumePod and AddPod, or, half
// the time for a pod NewPodInfo accepts, AssumePodInfo and AddPodInfo with
// its PodInfo: both forms must behave alike.
func forkAssume(r *rand.Rand, f *snapshot.Fork, p *v1.Pod) error {
	if info, err := nodeinfo.NewPodInfo(p); err == nil && r.Intn(2) == 0 {
		return f.AssumePodInfo(info)
	}
	return f.AssumePod(p)
}

func forkAdd(r *rand.Rand, f *snapshot.Fork, p *v1.Pod) error {
	if info, err := nodeinfo.NewPodInfo(p); err == nil && r.Intn(2) == 0 {
		return f.AddPodInfo(info)
	}
	return f.AddPod(p)
}

func TestForkModel(t *testing.T) {
	seeds, steps := 20, 400
	if testing.Short() {
		seeds, steps = 6, 250
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runForkModel(t, seed, steps) })
	}
}

type heldSnap struct {
	s  *snapshot.Snapshot
	fp string
}

func runForkModel(t *testing.T, seed int64, steps int) {
	r := rand.New(rand.NewSource(seed))
	// Odd seeds give the base a pod log long enough to be indexed
	// (podLogIndex) after the fork's first lookups.
	_, base, m := baseCluster(t, r, 8, 30+int(seed%2)*90)
	baseFP := fingerprint(base)
	f := base.Fork()
	require.Same(t, base, f.Base())
	m.check(t, f.Snapshot(), "start")
	type level struct {
		m     *fmodel
		point snapshot.ForkPoint // zero when made by Fork()
	}
	var stack []level
	var held []heldSnap
	var points []snapshot.ForkPoint // every point handed out, stale ones too
	uid := 0
	podKeys := func() []string { return slices.Sorted(maps.Keys(m.pods)) }
	nodeNames := func(withObj bool) []string {
		var out []string
		for n, e := range m.entries {
			if !withObj || e.node != nil {
				out = append(out, n)
			}
		}
		sort.Strings(out)
		return out
	}
	someNode := func() string {
		if r.Intn(10) == 0 {
			return fmt.Sprintf("n%d", 8+r.Intn(4)) // maybe unknown
		}
		ns := nodeNames(false)
		if len(ns) == 0 {
			return "n0"
		}
		return ns[r.Intn(len(ns))]
	}
	for step := 0; step < steps; step++ {
		var name string
		var err, want error
		switch op := r.Intn(16); {
		case op < 3: // AssumePod
			uid++
			p := forkPod(r, fmt.Sprintf("f%d", uid), someNode())
			if ks := podKeys(); r.Intn(8) == 0 && len(ks) > 0 {
				p.UID = types.UID(ks[r.Intn(len(ks))])
			}
			name = "AssumePod " + string(p.UID) + " on " + p.Spec.NodeName
			err, want = forkAssume(r, f, p), m.assume(p)
		case op < 5: // AddPod: confirm an assumed pod or add a new one
			uid++
			p := forkPod(r, fmt.Sprintf("f%d", uid), someNode())
			if ks := podKeys(); r.Intn(2) == 0 && len(ks) > 0 {
				p.UID = types.UID(ks[r.Intn(len(ks))])
			}
			name = "AddPod " + string(p.UID) + " on " + p.Spec.NodeName
			err, want = forkAdd(r, f, p), m.add(p)
		case op < 6: // ForgetPod
			ks := podKeys()
			if len(ks) == 0 {
				continue
			}
			k := ks[r.Intn(len(ks))]
			name = "ForgetPod " + k
			err, want = f.ForgetPod(m.pods[k]), m.forget(k)
		case op < 7: // UpdatePod (same node)
			ks := podKeys()
			if len(ks) == 0 {
				continue
			}
			k := ks[r.Intn(len(ks))]
			old := m.pods[k]
			p := forkPod(r, k, old.Spec.NodeName)
			name = "UpdatePod " + k
			err, want = f.UpdatePod(old, p), m.update(p)
		case op < 8: // RemovePod
			ks := podKeys()
			if len(ks) == 0 {
				continue
			}
			k := ks[r.Intn(len(ks))]
			name = "RemovePod " + k
			err, want = f.RemovePod(m.pods[k]), m.remove(k)
		case op < 9: // AddNode (new, re-added ghost, or replaced)
			n := forkNode(r, fmt.Sprintf("n%d", r.Intn(12)))
			if e := m.entries[n.Name]; e != nil && e.node != nil && r.Intn(4) != 0 {
				n.Labels = e.node.Labels // mostly in its zone; else the tree lists it in two
			}
			name = "AddNode " + n.Name
			err = f.AddNode(n)
			m.addNode(n)
		case op < 10: // UpdateNode (maybe moving zones)
			ns := nodeNames(true)
			if len(ns) == 0 {
				continue
			}
			old := m.entries[ns[r.Intn(len(ns))]].node
			n := forkNode(r, old.Name)
			name = "UpdateNode " + n.Name
			err = f.UpdateNode(old, n)
			m.updateNode(old, n)
		case op < 11: // RemoveNode
			ns := nodeNames(true)
			if len(ns) == 0 {
				continue
			}
			n := m.entries[ns[r.Intn(len(ns))]].node
			if r.Intn(3) == 0 {
				n = staleNode(r, n) // other images: registrations may stay (strays)
			}
			if r.Intn(4) == 0 {
				// Maybe another zone: the tree keeps the name, maybe
				// without entry (a podless node), until it is added again.
				n = n.DeepCopy()
				n.Labels = forkZones[r.Intn(len(forkZones))]
			}
			name = "RemoveNode " + n.Name
			err, want = f.RemoveNode(n), m.removeNode(n)
		case op < 12: // Fork or Point
			if r.Intn(2) == 0 {
				f.Fork()
				stack = append(stack, level{m: m.clone()})
				name = "Fork"
			} else {
				p := f.Point()
				stack = append(stack, level{m: m.clone(), point: p})
				points = append(points, p)
				name = "Point"
			}
		case op < 13: // Revert
			name = "Revert"
			err = f.Revert()
			if len(stack) == 0 {
				want = snapshot.ErrNoForkPoint
			} else {
				m = stack[len(stack)-1].m
				stack = stack[:len(stack)-1]
			}
		case op < 14: // RevertTo any point handed out (maybe stale)
			if len(points) == 0 {
				continue
			}
			p := points[r.Intn(len(points))]
			if len(stack) > 0 && r.Intn(2) == 0 {
				p = stack[r.Intn(len(stack))].point // zero for a Fork() level: stale
			}
			name = "RevertTo"
			err = f.RevertTo(p)
			i := slices.IndexFunc(stack, func(l level) bool { return l.point == p && p != (snapshot.ForkPoint{}) })
			if i < 0 {
				want = snapshot.ErrStaleForkPoint
			} else {
				m = stack[i].m
				stack = stack[:i]
			}
		case op < 15: // Commit of a level
			name = "Commit"
			err = f.Commit()
			if len(stack) == 0 {
				want = snapshot.ErrNoForkPoint
			} else {
				stack = stack[:len(stack)-1]
			}
		default: // hold a snapshot
			s := f.Snapshot()
			require.Same(t, s, f.Snapshot(), "Snapshot without changes is the same value")
			held = append(held, heldSnap{s, fingerprint(s)})
			continue
		}
		step := fmt.Sprintf("step %d: %s", step, name)
		require.Equal(t, want, errSentinel(err), "%s: %v", step, err)
		require.Equal(t, len(stack), f.Depth(), step)
		// Seeds divisible by 3 read the fork after about one step in 4
		// only, so that node operations, fork points and reverts pile up
		// between two reads (the fork defers its list to the next read).
		if seed%3 != 0 || r.Intn(4) == 0 {
			m.check(t, f.Snapshot(), step)
		}
	}
	m.check(t, f.Snapshot(), "end")
	for i, h := range held {
		require.Equal(t, h.fp, fingerprint(h.s), "held snapshot %d changed", i)
	}
	require.Equal(t, baseFP, fingerprint(base), "base changed")
}

// view renders what a snapshot shows (generations and image counts aside)
// for comparing a fork with the real coordinator core; pod lists in their
// order, which the fork must keep exactly as the cache does.
func view(s *snapshot.Snapshot) string {
	out := fmt.Sprint(s.NumNodes(), s.NodeCount(), s.PodCount(), s.Err(), "|")
	s.Range(func(i int, ni *nodeinfo.NodeInfo) bool {
		var keys []string
		for _, pi := range ni.Pods() {
			keys = append(keys, pi.Key())
		}
		var aff, anti, nonHost []string
		for _, pi := range ni.PodsWithAffinity() {
			aff = append(aff, pi.Key())
		}
		for _, pi := range ni.PodsWithRequiredAntiAffinity() {
			anti = append(anti, pi.Key())
		}
		for _, pi := range ni.PodsWithRequiredNonHostScopedAntiAffinity() {
			nonHost = append(nonHost, pi.Key())
		}
		out += fmt.Sprint(ni.NodeName(), ni.Node().ResourceVersion, keys, aff, anti, nonHost, ni.Requested().MilliCPU, ni.Requested().Memory,
			ni.NonZeroRequested().MilliCPU, ni.NumUsedPorts(), ni.PVCRefCounts(), ";")
		return true
	})
	names := func(l []*nodeinfo.NodeInfo, _ error) (out []string) {
		for _, ni := range l {
			out = append(out, ni.NodeName())
		}
		return out
	}
	out += fmt.Sprint(names(s.HavePodsWithAffinityList()), names(s.HavePodsWithRequiredAntiAffinityList()),
		names(s.HavePodsWithRequiredNonHostScopedAntiAffinityList()), "|")
	var pvcs, pods []string
	s.RangeUsedPVCs(func(k string) bool { pvcs = append(pvcs, k); return true })
	s.RangePods(func(k string, e snapshot.PodEntry) bool {
		pods = append(pods, fmt.Sprint(k, e.Assumed, e.Pod.ResourceVersion))
		return true
	})
	sort.Strings(pvcs)
	sort.Strings(pods)
	return out + fmt.Sprint(pvcs, pods)
}

// imageView renders the image summaries of every listed node as s shows
// them, and as a fresh clone of s (a snapshot refreshed from it for the
// first time: every node with the counts of s's registry) shows them.
func imageView(t *testing.T, s *snapshot.Snapshot) string {
	var b strings.Builder
	render := func(ni *nodeinfo.NodeInfo) {
		fmt.Fprint(&b, ni.NodeName(), ni.NumImageStates(), ni.ImageStates())
		for _, im := range forkImages {
			if st, ok := ni.ImageState(im); ok {
				fmt.Fprint(&b, im, st)
			}
		}
		b.WriteString(";")
	}
	s.Range(func(_ int, ni *nodeinfo.NodeInfo) bool { render(ni); return true })
	b.WriteString("|fresh:")
	own := snapshot.NewEmptySnapshot()
	_ = own.UpdateFrom(s) // a list error is compared by view
	own.Range(func(_ int, ni *nodeinfo.NodeInfo) bool { render(ni); return true })
	return b.String()
}

// TestForkMatchesCore applies the same random operations to a fork and to
// the coordinator's own core (the package's local driver, the cache's
// state machine and publication, publishing after every operation) and
// compares what their snapshots show, image summaries included: one
// implementation of the rules, zone order, aggregation and image
// registry. Node operations use overlapping image lists and stale
// RemoveNode objects; the fork takes nested fork points, reverts (the
// core is then rebuilt by replaying its operations up to the point),
// commits levels and is sometimes replaced by a fork of its own snapshot
// or of the core's.
func TestForkMatchesCore(t *testing.T) {
	seeds, steps := 10, 300
	if testing.Short() {
		seeds, steps = 4, 200
	}
	for seed := int64(1); seed <= int64(seeds); seed++ {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { runForkMatchesCore(t, seed, steps) })
	}
}

func runForkMatchesCore(t *testing.T, seed int64, steps int) {
	r := rand.New(rand.NewSource(seed))
	baseNodes := make([]*v1.Node, 6)
	for i := range baseNodes {
		baseNodes[i] = forkNode(r, fmt.Sprintf("n%d", i))
	}
	basePods := make([]*v1.Pod, 20+int(seed%2)*100)
	for i := range basePods {
		basePods[i] = forkPod(r, fmt.Sprintf("b%d", i), fmt.Sprintf("n%d", r.Intn(len(baseNodes))))
	}
	l, base, m := baseClusterOf(t, baseNodes, basePods)
	f := base.Fork()
	// log holds the operations applied to the core, to rebuild it at a
	// fork point by replaying them on a new base.
	var log []func(*local) error
	apply := func(op func(*local) error) error {
		log = append(log, op)
		err := op(l)
		_, perr := l.Publish()
		require.NoError(t, perr)
		requireShadowCounts(t, l, fmt.Sprint("seed ", seed, " op ", len(log)))
		return err
	}
	type level struct {
		m     *fmodel
		ops   int
		point snapshot.ForkPoint
	}
	var stack []level
	back := func(i int) {
		m = stack[i].m
		log = log[:stack[i].ops]
		stack = stack[:i]
		l, _, _ = baseClusterOf(t, baseNodes, basePods)
		for _, op := range log {
			_ = op(l)
			_, err := l.Publish()
			require.NoError(t, err)
		}
	}
	uid := 0
	for step := 0; step < steps; step++ {
		keys := slices.Sorted(maps.Keys(m.pods))
		var live []string
		for n, e := range m.entries {
			if e.node != nil {
				live = append(live, n)
			}
		}
		sort.Strings(live)
		anyKey := func() string {
			if len(keys) == 0 {
				return "none"
			}
			return keys[r.Intn(len(keys))]
		}
		node := "n0"
		if len(live) > 0 {
			node = live[r.Intn(len(live))]
		}
		var ef, ec error
		switch op := r.Intn(12); op {
		case 0, 1:
			if m.entries[node] == nil {
				continue // the fork refuses unknown nodes; the cache makes a nodeless entry
			}
			uid++
			p := forkPod(r, fmt.Sprintf("f%d", uid), node)
			if r.Intn(4) == 0 {
				p.UID = types.UID(anyKey())
			}
			info, _ := nodeinfo.NewPodInfo(p)
			if op == 0 {
				ef, ec = forkAssume(r, f, p), apply(func(l *local) error { return l.core.AssumePod(info) })
				_ = m.assume(p)
			} else {
				ef, ec = forkAdd(r, f, p), apply(func(l *local) error { return l.core.AddPod(info) })
				_ = m.add(p)
			}
		case 2, 3:
			k := anyKey()
			p := m.pods[k]
			if p == nil {
				continue
			}
			if op == 2 {
				ef, ec = f.ForgetPod(p), apply(func(l *local) error { return l.core.ForgetPod(k, p) })
				_ = m.forget(k)
			} else {
				ef, ec = f.RemovePod(p), apply(func(l *local) error { return l.core.RemovePod(k, p) })
				_ = m.remove(k)
			}
		case 4:
			k := anyKey()
			old := m.pods[k]
			if old == nil {
				continue
			}
			p := forkPod(r, k, old.Spec.NodeName)
			info, _ := nodeinfo.NewPodInfo(p)
			ef, ec = f.UpdatePod(old, p), apply(func(l *local) error { return l.core.UpdatePod(old, info) })
			_ = m.update(p)
		case 5, 6:
			n := forkNode(r, fmt.Sprintf("n%d", r.Intn(9)))
			if e := m.entries[n.Name]; e != nil && e.node != nil && r.Intn(4) != 0 {
				n.Labels = e.node.Labels // mostly in its zone; else the tree lists it in two
			}
			ef = f.AddNode(n)
			_ = apply(func(l *local) error { l.core.AddNode(n); return nil })
			m.addNode(n)
		case 7:
			if len(live) == 0 {
				continue
			}
			old := m.entries[node].node
			n := forkNode(r, node)
			ef, ec = f.UpdateNode(old, n), apply(func(l *local) error { return l.core.UpdateNode(old, n) })
			m.updateNode(old, n)
		case 8:
			if len(live) == 0 {
				continue
			}
			n := m.entries[node].node
			if r.Intn(3) == 0 {
				n = staleNode(r, n) // other images: registrations may stay (strays)
			}
			if r.Intn(4) == 0 {
				// Maybe another zone: the tree keeps the name, maybe
				// without entry (a podless node), until it is added again.
				n = n.DeepCopy()
				n.Labels = forkZones[r.Intn(len(forkZones))]
			}
			ef, ec = f.RemoveNode(n), apply(func(l *local) error { return l.core.RemoveNode(n) })
			_ = m.removeNode(n)
		case 9: // a fork point
			lv := level{m: m.clone(), ops: len(log)}
			if r.Intn(2) == 0 {
				lv.point = f.Point()
			} else {
				f.Fork()
			}
			stack = append(stack, lv)
		case 10: // back to a fork point
			if len(stack) == 0 {
				ef, ec = f.Revert(), snapshot.ErrNoForkPoint
				break
			}
			i := len(stack) - 1
			if j := r.Intn(len(stack)); stack[j].point != (snapshot.ForkPoint{}) && r.Intn(2) == 0 {
				i = j
				ef = f.RevertTo(stack[j].point)
			} else {
				ef = f.Revert()
			}
			back(i)
		case 11: // keep a level's changes, or go on from a fork of the fork's snapshot
			if len(stack) > 0 && r.Intn(3) != 0 {
				ef = f.Commit()
				stack = stack[:len(stack)-1]
				break
			}
			if slices.ContainsFunc(slices.Collect(maps.Values(m.entries)), func(e *fmEntry) bool { return e.node == nil }) {
				continue // a fork knows only the ghosts it made itself
			}
			if !treeList(l.core.Last()) {
				continue // a fork of a list no tree gives refuses node operations
			}
			if r.Intn(2) == 0 {
				f = f.Snapshot().Fork()
			} else {
				f = l.core.Last().Fork() // the cache's registry, strays included
			}
			stack = nil
		}
		require.Equal(t, errSentinel(ec), errSentinel(ef), "seed %d step %d: %v / %v", seed, step, ec, ef)
		require.Equal(t, len(stack), f.Depth(), "seed %d step %d", seed, step)
		if seed%2 == 0 && step%3 != 2 && step != steps-1 {
			continue // even seeds compare every third step: node operations pile up unread
		}
		cs := l.core.Last()
		fs := f.Snapshot()
		require.Equal(t, view(cs), view(fs), "seed %d step %d", seed, step)
		require.Equal(t, imageView(t, cs), imageView(t, fs), "seed %d step %d: image summaries", seed, step)
		m.check(t, fs, fmt.Sprintf("seed %d step %d", seed, step))
	}
}

// treeList reports whether s's list is one a zone tree gives with each
// name once (a fork of s takes node operations): no list error, no name
// listed twice.
func treeList(s *snapshot.Snapshot) bool {
	seen := map[string]bool{}
	for i := 0; i < s.NumNodes(); i++ {
		name := s.At(i).NodeName()
		if seen[name] {
			return false
		}
		seen[name] = true
	}
	return s.Err() == nil
}

// Bad input gets typed errors and changes nothing; fork points of another
// fork, or dropped ones, are refused.
func TestForkRefusals(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	_, base, _ := baseCluster(t, r, 3, 5)
	f := base.Fork()
	before := f.Snapshot()
	var pe *PodError
	require.ErrorAs(t, f.AssumePod(nil), &pe)
	require.ErrorIs(t, f.AssumePod(nil), nodeinfo.ErrNilPod)
	require.ErrorIs(t, f.AddPod(&v1.Pod{}), nodeinfo.ErrEmptyUID)
	require.ErrorAs(t, f.AssumePodInfo(nil), &pe)
	require.Equal(t, "AssumePod", pe.Op)
	require.ErrorIs(t, f.AssumePodInfo(nil), nodeinfo.ErrNilPod)
	require.ErrorIs(t, f.AddPodInfo(nil), nodeinfo.ErrNilPod)
	require.ErrorIs(t, f.AddPodInfo(&nodeinfo.PodInfo{}), nodeinfo.ErrNilPod)
	anyUID, err := nodeinfo.NewPodInfoAnyUID(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "u"}})
	require.NoError(t, err)
	require.ErrorIs(t, f.AddPodInfo(anyUID), nodeinfo.ErrEmptyUID)
	require.ErrorIs(t, f.AssumePodInfo(anyUID), nodeinfo.ErrEmptyUID)
	require.ErrorIs(t, f.ForgetPod(nil), nodeinfo.ErrNilPod)
	require.ErrorIs(t, f.RemovePod(nil), nodeinfo.ErrNilPod)
	require.ErrorIs(t, f.UpdatePod(nil, nil), nodeinfo.ErrNilPod)
	require.ErrorIs(t, f.AddNode(nil), nodeinfo.ErrNilNode)
	require.ErrorIs(t, f.UpdateNode(nil, nil), nodeinfo.ErrNilNode)
	require.ErrorIs(t, f.RemoveNode(nil), nodeinfo.ErrNilNode)
	require.ErrorIs(t, f.RemoveNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nope"}}), ErrNodeNotFound)
	require.ErrorIs(t, f.AssumePod(forkPod(r, "x", "nope")), ErrNodeNotFound)
	require.ErrorIs(t, f.Revert(), snapshot.ErrNoForkPoint)
	require.ErrorIs(t, f.Commit(), snapshot.ErrNoForkPoint)
	require.ErrorIs(t, f.RevertTo(snapshot.ForkPoint{}), snapshot.ErrStaleForkPoint)
	require.ErrorIs(t, f.RevertTo(base.Fork().Point()), snapshot.ErrStaleForkPoint)
	require.Same(t, before, f.Snapshot(), "refusals changed nothing")

	p := f.Point()
	require.NoError(t, f.AssumePod(forkPod(r, "x", "n0")))
	q := f.Point()
	require.NoError(t, f.RevertTo(p))
	require.ErrorIs(t, f.RevertTo(q), snapshot.ErrStaleForkPoint, "a point after the one reverted to is dropped")
	require.ErrorIs(t, f.RevertTo(p), snapshot.ErrStaleForkPoint, "the point reverted to is dropped")
	require.Same(t, before, f.Snapshot())

	// A fork of a snapshot made by NewSnapshot (its list is by name, not
	// by zone) refuses node operations but takes pod operations.
	ns := snapshot.NewSnapshot(nil, []*v1.Node{forkNode(r, "a")})
	g := ns.Fork()
	require.ErrorIs(t, g.AddNode(forkNode(r, "b")), snapshot.ErrForkListInconsistent)
	require.NoError(t, g.AssumePod(forkPod(r, "y", "a")))
	require.Equal(t, 1, g.Snapshot().PodCount())
	require.Equal(t, 0, ns.PodCount())
}

// Many goroutines fork one snapshot at once and change their forks; the
// base and every other fork stay as they were (run with -race).
func TestForkConcurrent(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	_, base, _ := baseCluster(t, r, 20, 100)
	fp := fingerprint(base)
	const workers, forks = 8, 25
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func(w int) {
			r := rand.New(rand.NewSource(int64(w)))
			for i := 0; i < forks; i++ {
				f := base.Fork()
				for j := 0; j < 10; j++ {
					p := forkPod(r, fmt.Sprintf("w%d-%d-%d", w, i, j), fmt.Sprintf("n%d", r.Intn(20)))
					if err := f.AssumePod(p); err != nil {
						errc <- err
						return
					}
				}
				f.Fork()
				if err := f.AddNode(forkNode(r, fmt.Sprintf("new%d", w))); err != nil {
					errc <- err
					return
				}
				if got := f.Snapshot().PodCount(); got != base.PodCount()+10 {
					errc <- fmt.Errorf("fork has %d pods, want %d", got, base.PodCount()+10)
					return
				}
				if err := f.Revert(); err != nil {
					errc <- err
					return
				}
			}
			errc <- nil
		}(w)
	}
	for w := 0; w < workers; w++ {
		require.NoError(t, <-errc)
	}
	require.Equal(t, fp, fingerprint(base))
}

// Commit folds a level into the one below without freezing what the open
// edit changed (0 allocations: the nodes are frozen on the next read),
// and the changes stay visible there, reverted with the lower point.
func TestForkCommitKeepsEditOpen(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	_, base, _ := baseCluster(t, r, 3, 5)
	f := base.Fork()
	low := f.Point()
	f.Fork()
	require.NoError(t, f.AddPod(forkPod(r, "a", "n0")))
	f.Fork()
	require.NoError(t, f.AddPod(forkPod(r, "b", "n1")))
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	err := f.Commit()
	runtime.ReadMemStats(&m1)
	require.NoError(t, err)
	require.Zero(t, m1.Mallocs-m0.Mallocs, "Commit froze the open edit")
	require.NoError(t, f.Commit())
	require.Equal(t, 1, f.Depth())
	s := f.Snapshot()
	require.Equal(t, base.PodCount()+2, s.PodCount())
	n0, err := s.Get("n0")
	require.NoError(t, err)
	require.Len(t, n0.Pods(), mustGet(t, base, "n0").NumPods()+1)
	require.NoError(t, f.RevertTo(low))
	require.Equal(t, base.PodCount(), f.Snapshot().PodCount(), "Revert below drops the committed levels")
}

func mustGet(t *testing.T, s *snapshot.Snapshot, name string) *nodeinfo.NodeInfo {
	t.Helper()
	ni, err := s.Get(name)
	require.NoError(t, err)
	return ni
}

// Node operations change the fork's image table on the first read of
// their list; each node they set shows its images' summaries as of its
// operation, and a Revert brings back the table and the summaries before.
func TestForkNodeImages(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	_, base, _ := baseCluster(t, r, 3, 5)
	img := func(name string, ims ...v1.ContainerImage) *v1.Node {
		n := forkNode(r, name)
		n.Status.Images = ims
		return n
	}
	ci := func(name string, size int64) v1.ContainerImage {
		return v1.ContainerImage{Names: []string{name}, SizeBytes: size}
	}
	type sum = nodeinfo.ImageStateSummary
	states := func(s *snapshot.Snapshot, name string) map[string]sum {
		ni, err := s.Get(name)
		require.NoError(t, err)
		return ni.ImageStates()
	}
	a := img("ia", ci("x", 10), ci("y", 20))
	b := img("ib", ci("y", 30), ci("z", 5))
	f := base.Fork()
	require.NoError(t, f.AddNode(a))
	require.NoError(t, f.AddNode(b)) // no read between
	s := f.Snapshot()
	require.Equal(t, map[string]sum{"x": {Size: 10, NumNodes: 1}, "y": {Size: 20, NumNodes: 1}}, states(s, "ia"))
	require.Equal(t, map[string]sum{"y": {Size: 20, NumNodes: 2}, "z": {Size: 5, NumNodes: 1}}, states(s, "ib"))

	f.Fork()
	require.NoError(t, f.RemoveNode(a))
	c := img("ic", ci("x", 7))
	require.NoError(t, f.AddNode(c))
	b2 := img("ib", ci("z", 6))
	require.NoError(t, f.UpdateNode(b, b2))
	s2 := f.Snapshot()
	require.Equal(t, map[string]sum{"x": {Size: 7, NumNodes: 1}}, states(s2, "ic"))
	require.Equal(t, map[string]sum{"z": {Size: 6, NumNodes: 1}}, states(s2, "ib"))

	require.NoError(t, f.Revert())
	s3 := f.Snapshot()
	require.Equal(t, states(s, "ia"), states(s3, "ia"))
	require.Equal(t, states(s, "ib"), states(s3, "ib"))
	require.Equal(t, s.NumNodes(), s3.NumNodes())
}

// A RemoveNode naming the wrong zone fails in the zone tree after the
// node's object is cleared, and upstream then unregisters nothing: its
// image registrations stay (strays), so a later AddNode of the name counts
// no new node for those images. A fork does as the cache, whether it
// starts before the failed removal or from the cache's snapshot after it,
// whether a holds a pod (its entry outlives the removal) or not (its entry
// goes while the tree still lists it).
func TestForkImageStraysMatchCore(t *testing.T) {
	for _, withPod := range []bool{true, false} {
		t.Run(fmt.Sprint("pod=", withPod), func(t *testing.T) { runForkImageStrays(t, withPod) })
	}
}

func runForkImageStrays(t *testing.T, withPod bool) {
	zone := func(z string) map[string]string { return map[string]string{v1.LabelTopologyZone: z} }
	mk := func(name, z string, ims ...string) *v1.Node {
		n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: zone(z)}}
		for i, im := range ims {
			n.Status.Images = append(n.Status.Images, v1.ContainerImage{Names: []string{im}, SizeBytes: int64(10 * (i + 1))})
		}
		return n
	}
	l := newLocal(2, 0)
	a, b := mk("a", "z1", "x", "y"), mk("b", "z1", "x")
	l.core.AddNode(a)
	l.core.AddNode(b)
	if withPod { // a's entry (and slot) outlives the failed removal
		info, err := nodeinfo.NewPodInfo(forkPod(rand.New(rand.NewSource(1)), "p", "a"))
		require.NoError(t, err)
		require.NoError(t, l.core.AddPod(info))
	}
	base, err := l.Publish()
	require.NoError(t, err)

	ops := []struct {
		name string
		do   func(f *snapshot.Fork, c *core) (error, error)
	}{
		{"RemoveNode a in the wrong zone", func(f *snapshot.Fork, c *core) (error, error) {
			wrong := mk("a", "z2", "x", "y")
			return f.RemoveNode(wrong), c.RemoveNode(wrong)
		}},
		{"AddNode a again", func(f *snapshot.Fork, c *core) (error, error) {
			n := mk("a", "z1", "x", "y", "z")
			return f.AddNode(n), func() error { c.AddNode(n); return nil }()
		}},
		{"RemoveNode b with other images", func(f *snapshot.Fork, c *core) (error, error) {
			stale := mk("b", "z1", "y")
			return f.RemoveNode(stale), c.RemoveNode(stale)
		}},
		{"AddNode b", func(f *snapshot.Fork, c *core) (error, error) {
			n := mk("b", "z1", "y")
			return f.AddNode(n), func() error { c.AddNode(n); return nil }()
		}},
		{"UpdateNode a", func(f *snapshot.Fork, c *core) (error, error) {
			old, n := mk("a", "z1", "x", "y", "z"), mk("a", "z1", "z")
			return f.UpdateNode(old, n), c.UpdateNode(old, n)
		}},
	}
	forks := []*snapshot.Fork{base.Fork()}
	for _, op := range ops {
		for i, f := range forks {
			var ef, ec error
			if i == 0 {
				ef, ec = op.do(f, l.core)
			} else {
				ef, _ = op.do(f, newLocal(1, 0).core) // the cache has done it
			}
			require.Equal(t, errSentinel(ec), errSentinel(ef), "%s, fork %d: %v / %v", op.name, i, ec, ef)
		}
		cs, err := l.Publish()
		require.NoError(t, err)
		for i, f := range forks {
			fs := f.Snapshot()
			require.Equal(t, view(cs), view(fs), "%s: fork %d", op.name, i)
			require.Equal(t, imageView(t, cs), imageView(t, fs), "%s: fork %d", op.name, i)
		}
		if cs.Err() == nil { // a fork of an inconsistent list refuses node operations
			forks = append(forks, cs.Fork()) // takes the ops from here on
		}
	}
	require.Len(t, forks, len(ops), "every state but the failed removal's forked")
	// After the failed removal and the AddNode of a again, x counted a
	// and b, once each (a stayed registered); the stale removal of b left
	// b registered for x, so UpdateNode of a leaves x to b alone.
	type sum = nodeinfo.ImageStateSummary
	require.Equal(t, map[string]sum{"z": {Size: 10, NumNodes: 1}}, mustGet(t, forks[0].Snapshot(), "a").ImageStates())
	require.Equal(t, map[string]sum{"y": {Size: 20, NumNodes: 2}}, mustGet(t, forks[0].Snapshot(), "b").ImageStates(), "as of b's AddNode")
	own := snapshot.NewEmptySnapshot()
	require.NoError(t, own.UpdateFrom(forks[0].Snapshot()))
	require.Equal(t, map[string]sum{"y": {Size: 20, NumNodes: 1}}, mustGet(t, own, "b").ImageStates(), "now: a left y")
	g := forks[0]
	require.NoError(t, g.AddNode(mk("c", "z1", "x")))
	require.Equal(t, map[string]sum{"x": {Size: 10, NumNodes: 2}}, mustGet(t, g.Snapshot(), "c").ImageStates(), "b's stray registration of x counts")
}

// A fork of a snapshot the caller refreshes (UpdateSnapshot) continues
// from the registry of its last refresh, not its first.
func TestForkOfRefreshedSnapshotImages(t *testing.T) {
	mk := func(name string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: v1.NodeStatus{Images: []v1.ContainerImage{{Names: []string{"x"}, SizeBytes: 7}}}}
	}
	l := newLocal(1, 0)
	l.core.AddNode(mk("a"))
	s1, err := l.Publish()
	require.NoError(t, err)
	own := snapshot.NewEmptySnapshot()
	require.NoError(t, own.UpdateFrom(s1))
	l.core.AddNode(mk("b"))
	s2, err := l.Publish()
	require.NoError(t, err)
	require.NoError(t, own.UpdateFrom(s2))
	f := own.Fork()
	require.NoError(t, f.AddNode(mk("c")))
	require.Equal(t, map[string]nodeinfo.ImageStateSummary{"x": {Size: 7, NumNodes: 3}}, mustGet(t, f.Snapshot(), "c").ImageStates())
}

// ---- a RemoveNode naming the wrong zone, then the same name again ----

// zoneStep is one operation applied to a fork and, separately, to the
// core.
type zoneStep struct {
	name string
	fork func(*snapshot.Fork) error
	core func(*core) error
}

// compareForkCore requires fs to show what the core's cs shows: the list
// (NumNodes, At(i) names and objects), Get of every name in names, the
// affinity lists and the list error (view).
func compareForkCore(t *testing.T, cs, fs *snapshot.Snapshot, names []string, msg string) {
	t.Helper()
	require.Equal(t, view(cs), view(fs), msg)
	require.Equal(t, cs.NumNodes(), fs.NumNodes(), msg)
	for i := 0; i < cs.NumNodes(); i++ {
		require.Equal(t, cs.At(i).NodeName(), fs.At(i).NodeName(), "%s: At(%d)", msg, i)
		require.Same(t, cs.At(i).Node(), fs.At(i).Node(), "%s: At(%d)", msg, i)
	}
	for _, name := range names {
		cn, cerr := cs.Get(name)
		fn, ferr := fs.Get(name)
		require.Equal(t, cerr, ferr, "%s: Get(%s)", msg, name)
		if cerr == nil {
			require.Same(t, cn.Node(), fn.Node(), "%s: Get(%s)", msg, name)
		}
	}
}

// A RemoveNode of a node whose object names another zone than the one the
// tree lists it in fails in the tree (upstream's removeNode, upstream
// semantics section 6): the name stays listed there after its entry is
// gone (podless) or became a ghost. The same name added again (same zone
// or another), updated, removed again, must be listed by the fork exactly
// as by the cache, which lists the tree by name: at the old place, and
// twice when it joined a second zone. Every step is tried at a fork point
// and reverted, then applied on a level of its own (kept), read at once
// or only at the end; the levels are reverted one by one at the end.
func TestForkWrongZoneRemoveThenReAdd(t *testing.T) {
	zone := func(z string) map[string]string {
		if z == "" {
			return nil
		}
		return map[string]string{v1.LabelTopologyZone: z}
	}
	rv := 0
	mk := func(name, z string) *v1.Node {
		rv++
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: zone(z), ResourceVersion: fmt.Sprint(rv)},
			Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: *resource.NewQuantity(8, resource.DecimalSI)}}}
	}
	r := rand.New(rand.NewSource(1))
	pod := func(uid, node string, aff bool) *v1.Pod {
		p := forkPod(r, uid, node)
		p.Spec.Affinity = nil
		if aff {
			p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "zone"}}}}
		}
		return p
	}
	addNode := func(n *v1.Node) zoneStep {
		return zoneStep{"AddNode " + n.Name + " " + nodetree.ZoneKey(n),
			func(f *snapshot.Fork) error { return f.AddNode(n) },
			func(c *core) error { c.AddNode(n); return nil }}
	}
	updateNode := func(old, n *v1.Node) zoneStep {
		return zoneStep{"UpdateNode " + n.Name + " " + nodetree.ZoneKey(old) + "->" + nodetree.ZoneKey(n),
			func(f *snapshot.Fork) error { return f.UpdateNode(old, n) },
			func(c *core) error { return c.UpdateNode(old, n) }}
	}
	removeNode := func(n *v1.Node) zoneStep {
		return zoneStep{"RemoveNode " + n.Name + " " + nodetree.ZoneKey(n),
			func(f *snapshot.Fork) error { return f.RemoveNode(n) },
			func(c *core) error { return c.RemoveNode(n) }}
	}
	addPod := func(p *v1.Pod) zoneStep {
		info, err := nodeinfo.NewPodInfo(p)
		require.NoError(t, err)
		return zoneStep{"AddPod " + string(p.UID) + " on " + p.Spec.NodeName,
			func(f *snapshot.Fork) error { return f.AddPod(p) },
			func(c *core) error { return c.AddPod(info) }}
	}
	removePod := func(p *v1.Pod) zoneStep {
		return zoneStep{"RemovePod " + string(p.UID),
			func(f *snapshot.Fork) error { return f.RemovePod(p) },
			func(c *core) error { return c.RemovePod(string(p.UID), p) }}
	}

	// Base: a (podless) and b in z1, c in z2; b holds a pod with
	// affinity, so the affinity list shows the order too.
	a1 := mk("a", "z1")
	variants := []struct {
		name  string
		steps func() []zoneStep
	}{
		{"same zone", func() []zoneStep {
			a2, a3, a4 := mk("a", "z1"), mk("a", "z1"), mk("a", "z3")
			return []zoneStep{
				removeNode(mk("a", "z2")), // wrong zone: a stays listed in z1 without entry
				addNode(a2),               // back at its old place in z1
				addPod(pod("pa", "a", true)),
				updateNode(a2, a3),              // same zone
				updateNode(a3, a4),              // moves to z3
				removeNode(mk("a", "z1")),       // wrong zone again (a is in z3), a holds a pod: a ghost
				addNode(mk("a", "z3")),          // the ghost's object again
				removeNode(mk("a", "z3")),       // a second RemoveNode, right zone: a ghost
				removePod(pod("pa", "a", true)), // the ghost's last pod: the entry goes
				addNode(mk("a", "z3")),          // a new entry, z3 lists a again
				removeNode(mk("a", "z3")),       // right zone, podless
				updateNode(mk("a", "z1"), a1),   // re-added by UpdateNode
				removeNode(mk("a", "z1")),       // gone for good
			}
		}},
		{"another zone", func() []zoneStep {
			a2, a3 := mk("a", "z3"), mk("a", "z2")
			return []zoneStep{
				removeNode(mk("a", "z2")),    // wrong zone: a stays listed in z1
				addNode(a2),                  // z1 and z3 list a: listed twice
				updateNode(a2, a3),           // z3 -> z2: z1 and z2 list a
				addPod(pod("pa", "a", true)), // a in the affinity list twice
				removePod(pod("pa", "a", true)),
				removeNode(mk("a", "z2")),              // right zone: z1 still lists a, without entry
				removeNode(mk("a", "z2")),              // no entry: ErrNodeNotFound
				updateNode(mk("a", ""), mk("a", "z3")), // re-added by UpdateNode: z1 and z3
				removeNode(mk("a", "z1")),              // a second RemoveNode, the old zone: z3 lists a
				addNode(mk("a", "z3")),                 // an entry again, z3 lists a
				removeNode(mk("a", "")),                // wrong zone: z3 keeps a
				addNode(mk("a", "")),                   // zone "" and z3
				removeNode(mk("a", "z3")),
				removeNode(mk("a", "")),
			}
		}},
		{"ghost whose last pod leaves", func() []zoneStep {
			return []zoneStep{
				addPod(pod("pa", "a", false)),
				removeNode(mk("a", "z3")),        // wrong zone, a ghost
				removePod(pod("pa", "a", false)), // entry gone, z1 still lists a
				addNode(mk("a", "z1")),
				removeNode(mk("a", "z1")),
			}
		}},
	}
	for _, v := range variants {
		for _, read := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/read=%v", v.name, read), func(t *testing.T) {
				l := newLocal(2, 0)
				l.core.AddNode(a1)
				l.core.AddNode(mk("b", "z1"))
				l.core.AddNode(mk("c", "z2"))
				require.NoError(t, addPod(pod("pb", "b", true)).core(l.core))
				base, err := l.Publish()
				require.NoError(t, err)
				names := []string{"a", "b", "c"}
				f := base.Fork()
				levels := []*snapshot.Snapshot{base}
				for i, st := range v.steps() {
					msg := fmt.Sprintf("step %d: %s", i, st.name)
					before := levels[len(levels)-1]
					if read {
						p := f.Point()
						ef := st.fork(f)
						ec := st.core(l.core)
						cs, err := l.Publish()
						require.NoError(t, err)
						require.Equal(t, errSentinel(ec), errSentinel(ef), "%s: %v / %v", msg, ec, ef)
						compareForkCore(t, cs, f.Snapshot(), names, msg+" (at a point)")
						require.NoError(t, f.RevertTo(p))
						compareForkCore(t, before, f.Snapshot(), names, msg+" (reverted)")
						f.Fork()
						require.Equal(t, errSentinel(ec), errSentinel(st.fork(f)), msg)
						compareForkCore(t, cs, f.Snapshot(), names, msg+" (kept)")
						levels = append(levels, cs)
						continue
					}
					f.Fork()
					ef := st.fork(f)
					ec := st.core(l.core)
					cs, err := l.Publish()
					require.NoError(t, err)
					require.Equal(t, errSentinel(ec), errSentinel(ef), "%s: %v / %v", msg, ec, ef)
					levels = append(levels, cs)
				}
				compareForkCore(t, levels[len(levels)-1], f.Snapshot(), names, "end")
				for i := len(levels) - 2; i >= 0; i-- {
					require.NoError(t, f.Revert())
					compareForkCore(t, levels[i], f.Snapshot(), names, fmt.Sprintf("reverted to level %d", i))
				}
			})
		}
	}
}

// A node whose pods a fork changes and changes back keeps its frozen
// entry (the same *NodeInfo, generation included) in the fork's next
// snapshot; a node left changed gets a new one.
func TestForkUndoneChangeKeepsEntry(t *testing.T) {
	r := rand.New(rand.NewSource(3))
	_, base, _ := baseCluster(t, r, 3, 6)
	f := base.Fork()
	n0, err := base.Get("n0")
	require.NoError(t, err)
	n1, err := base.Get("n1")
	require.NoError(t, err)
	p, q := forkPod(r, "undo", "n0"), forkPod(r, "kept", "n1")
	f.Fork()
	require.NoError(t, f.AddPod(p))
	require.NoError(t, f.AddPod(q))
	require.NoError(t, f.RemovePod(p))
	s := f.Snapshot()
	got0, err := s.Get("n0")
	require.NoError(t, err)
	require.Same(t, n0, got0, "n0 changed back")
	got1, err := s.Get("n1")
	require.NoError(t, err)
	require.NotSame(t, n1, got1)
	require.Equal(t, n1.NumPods()+1, got1.NumPods())
	require.Greater(t, got1.Generation(), n1.Generation())
	require.NoError(t, f.Revert())
}

// A fork defers the adds to an entry it has not thawed and applies them,
// in order, when the entry is read: the node's pod bound counts them
// while deferred (the add one past nodeinfo.MaxPodsPerNode is refused and
// changes nothing), and the entry then lists them in their order, as the
// cache does; a reverted run of adds leaves the base entry in place.
func TestForkDeferredAddsCountAndOrder(t *testing.T) {
	l := newLocal(2, 0)
	l.core.AddNode(testNode("full", "z"))
	mk := func(uid string, aff bool) *v1.Pod {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, Namespace: "ns", UID: types.UID(uid)}, Spec: v1.PodSpec{NodeName: "full"}}
		if aff {
			p.Spec.Affinity = &v1.Affinity{PodAffinity: &v1.PodAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{{Weight: 1}}}}
		}
		return p
	}
	for i := 0; i < nodeinfo.MaxPodsPerNode-3; i++ {
		info, err := nodeinfo.NewPodInfo(mk(fmt.Sprint("p", i), i == 0))
		require.NoError(t, err)
		require.NoError(t, l.core.AddPod(info))
	}
	base, err := l.Publish()
	require.NoError(t, err)
	f := base.Fork()

	// A reverted run of adds: the base entry itself stays.
	f.Fork()
	require.NoError(t, f.AddPod(mk("r", true)))
	require.NoError(t, f.Revert())
	n0, err := base.Get("full")
	require.NoError(t, err)
	got, err := f.Snapshot().Get("full")
	require.NoError(t, err)
	require.Same(t, n0, got)

	// Three deferred adds fill the node; a fourth is refused.
	require.NoError(t, f.AddPod(mk("a", true)))
	require.NoError(t, f.AssumePod(mk("b", false)))
	info, err := nodeinfo.NewPodInfo(mk("c", true))
	require.NoError(t, err)
	require.NoError(t, f.AddPodInfo(info))
	require.ErrorIs(t, f.AddPod(mk("d", false)), ErrTooManyPods)
	require.ErrorIs(t, f.AssumePod(mk("d", false)), ErrTooManyPods)

	s := f.Snapshot()
	ni, err := s.Get("full")
	require.NoError(t, err)
	require.Equal(t, nodeinfo.MaxPodsPerNode, ni.NumPods())
	pods := ni.Pods()
	tail := []string{pods[len(pods)-3].Key(), pods[len(pods)-2].Key(), pods[len(pods)-1].Key()}
	require.Equal(t, []string{"a", "b", "c"}, tail)
	var aff []string
	for _, pi := range ni.PodsWithAffinity() {
		aff = append(aff, pi.Key())
	}
	require.Equal(t, []string{"p0", "a", "c"}, aff)
	_, ok := s.Pod("d")
	require.False(t, ok)
	require.Greater(t, ni.Generation(), n0.Generation())
}
