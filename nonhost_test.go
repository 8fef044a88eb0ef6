package schedcache_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
)

// The required non-host-scoped anti-affinity list (upstream v1.37's
// PodsWithRequiredNonHostScopedAntiAffinity per node and
// HavePodsWithRequiredNonHostScopedAntiAffinityList per snapshot, which
// upstream fills only under its feature gate InterPodAffinityHostnameFastPath;
// schedcache always keeps them) is checked here beside the other two
// affinity lists, against a model of upstream's rules: the cache, the
// snapshots refreshed by UpdateSnapshot and what-if forks.

// nhAffinity returns an affinity of kind k (0 to nhKinds-1): none; pod
// affinity only; preferred anti-affinity in a zone (not required);
// required anti-affinity on the hostname only (two terms); in a zone; a
// hostname term and a zone term; a hostname term and a rack term.
func nhAffinity(k int) *v1.Affinity {
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	anti := func(keys ...string) *v1.Affinity {
		a := &v1.PodAntiAffinity{}
		for _, key := range keys {
			a.RequiredDuringSchedulingIgnoredDuringExecution = append(a.RequiredDuringSchedulingIgnoredDuringExecution,
				v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: key})
		}
		return &v1.Affinity{PodAntiAffinity: a}
	}
	switch k {
	case 1:
		return &v1.Affinity{PodAffinity: &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{
			{LabelSelector: sel, TopologyKey: v1.LabelTopologyZone}}}}
	case 2:
		return &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{PreferredDuringSchedulingIgnoredDuringExecution: []v1.WeightedPodAffinityTerm{
			{Weight: 1, PodAffinityTerm: v1.PodAffinityTerm{LabelSelector: sel, TopologyKey: v1.LabelTopologyZone}}}}}
	case 3:
		return anti(v1.LabelHostname, v1.LabelHostname)
	case 4:
		return anti(v1.LabelTopologyZone)
	case 5:
		return anti(v1.LabelHostname, v1.LabelTopologyZone)
	case 6:
		return anti(v1.LabelHostname, "rack")
	}
	return nil
}

const nhKinds = 7

func nhPod(uid, node string, kind int) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pod-" + uid, Namespace: "ns", UID: types.UID(uid)},
		Spec:       v1.PodSpec{NodeName: node, Affinity: nhAffinity(kind)},
	}
}

// nhWithAffinity returns a copy of p with the affinity of kind k: what a
// stale informer object or a stripped tombstone of p may hold.
func nhWithAffinity(p *v1.Pod, k int) *v1.Pod {
	c := p.DeepCopy()
	c.Spec.Affinity = nhAffinity(k)
	return c
}

// nhClasses is upstream's classification of a pod (framework/types.go:
// podWithAffinity, podWithRequiredAntiAffinity,
// podWithRequiredNonHostScopedAntiAffinity), written out again here: which
// of a node's sub-lists (1 affinity, 2 required anti-affinity, 3 required
// non-host-scoped anti-affinity) it goes in; list 0 (the pods) takes all.
func nhClasses(p *v1.Pod) [4]bool {
	in := [4]bool{true}
	a := p.Spec.Affinity
	if a == nil {
		return in
	}
	in[1] = a.PodAffinity != nil || a.PodAntiAffinity != nil
	if a.PodAntiAffinity != nil {
		terms := a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		in[2] = len(terms) != 0
		for _, term := range terms {
			if term.TopologyKey != "kubernetes.io/hostname" {
				in[3] = true
			}
		}
	}
	return in
}

// nhModel holds what upstream's cache holds of the lists: per entry its
// four pod lists by key, in upstream's order (appended on add; a removal
// moves the list's last element into the removed one's slot, and searches
// each sub-list only if the pod object the removal uses qualifies for it).
type nhModel struct {
	pods    map[string]*nhPodState
	entries map[string]*nhEntry
}

type nhPodState struct {
	pod     *v1.Pod
	assumed bool
}

type nhEntry struct {
	node  bool
	lists [4][]string // pods, affinity, required anti-affinity, required non-host-scoped anti-affinity
}

func newNHModel() *nhModel {
	return &nhModel{pods: map[string]*nhPodState{}, entries: map[string]*nhEntry{}}
}

func (m *nhModel) clone() *nhModel {
	c := newNHModel()
	for k, p := range m.pods {
		cp := *p
		c.pods[k] = &cp
	}
	for k, e := range m.entries {
		ce := *e
		for l := range ce.lists {
			ce.lists[l] = append([]string(nil), e.lists[l]...)
		}
		c.entries[k] = &ce
	}
	return c
}

func (m *nhModel) entry(name string) *nhEntry {
	e := m.entries[name]
	if e == nil {
		e = &nhEntry{}
		m.entries[name] = e
	}
	return e
}

// add is upstream's AddPodInfo.
func (m *nhModel) add(p *v1.Pod, assumed bool) {
	e := m.entry(p.Spec.NodeName)
	for l, in := range nhClasses(p) {
		if in {
			e.lists[l] = append(e.lists[l], string(p.UID))
		}
	}
	m.pods[string(p.UID)] = &nhPodState{pod: p, assumed: assumed}
}

// remove is upstream's removePod of the cached pod key, with by the pod
// object the removal uses; an entry left without pods and node goes.
func (m *nhModel) remove(key string, by *v1.Pod) {
	name := m.pods[key].pod.Spec.NodeName
	e := m.entries[name]
	in := nhClasses(by)
	for l := 3; l >= 0; l-- {
		if in[l] {
			e.lists[l] = nhSwapRemove(e.lists[l], key)
		}
	}
	delete(m.pods, key)
	if len(e.lists[0]) == 0 && !e.node {
		delete(m.entries, name)
	}
}

// nhSwapRemove is upstream's removeFromSlice: the first element equal to
// key is replaced by the last; nil when the list empties.
func nhSwapRemove(s []string, key string) []string {
	for i := range s {
		if s[i] == key {
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

// nhTarget is what the model drives: the cache or a fork.
type nhTarget interface {
	AssumePod(pod *v1.Pod) error
	AddPod(pod *v1.Pod) error
	ForgetPod(pod *v1.Pod) error
	UpdatePod(oldPod, newPod *v1.Pod) error
	RemovePod(pod *v1.Pod) error
	AddNode(node *v1.Node) error
	RemoveNode(node *v1.Node) error
	Snapshot() *schedcache.Snapshot
}

type nhCache struct{ c *schedcache.Cache }

func (t nhCache) AssumePod(p *v1.Pod) error    { return t.c.AssumePod(upLog, p) }
func (t nhCache) AddPod(p *v1.Pod) error       { return t.c.AddPod(upLog, p) }
func (t nhCache) ForgetPod(p *v1.Pod) error    { return t.c.ForgetPod(upLog, p) }
func (t nhCache) UpdatePod(o, n *v1.Pod) error { return t.c.UpdatePod(upLog, o, n) }
func (t nhCache) RemovePod(p *v1.Pod) error    { return t.c.RemovePod(upLog, p) }
func (t nhCache) AddNode(n *v1.Node) error {
	_, err := t.c.AddNode(upLog, n)
	return err
}
func (t nhCache) RemoveNode(n *v1.Node) error    { return t.c.RemoveNode(upLog, n) }
func (t nhCache) Snapshot() *schedcache.Snapshot { return t.c.Snapshot() }

// nhKeys returns the keys of infos, nil when empty.
func nhKeys(infos []*schedcache.PodInfo) []string {
	var out []string
	for _, pi := range infos {
		out = append(out, pi.Key())
	}
	return out
}

func nhNames(nis []*schedcache.NodeInfo, err error) []string {
	if err != nil {
		panic(err)
	}
	var out []string
	for _, ni := range nis {
		out = append(out, ni.NodeName())
	}
	return out
}

// nhRequireLists checks s against m: every listed node's four pod lists,
// in order, and the snapshot's three affinity lists, which are its node
// list filtered by the model's sub-lists.
func nhRequireLists(t *testing.T, s *schedcache.Snapshot, m *nhModel, what string) {
	t.Helper()
	list, err := s.List()
	require.NoError(t, err)
	live := 0
	for _, e := range m.entries {
		if e.node {
			live++
		}
	}
	require.Len(t, list, live, "%s: listed nodes", what)
	var want [3][]string
	for _, ni := range list {
		name := ni.NodeName()
		e := m.entries[name]
		require.NotNil(t, e, "%s: node %s is not in the model", what, name)
		got := [4][]string{nhKeys(ni.Pods()), nhKeys(ni.PodsWithAffinity()), nhKeys(ni.PodsWithRequiredAntiAffinity()),
			nhKeys(ni.PodsWithRequiredNonHostScopedAntiAffinity())}
		for l := range got {
			require.Equal(t, e.lists[l], got[l], "%s: node %s, list %d", what, name, l)
		}
		nh := e.lists[3]
		require.Equal(t, len(nh), ni.NumPodsWithRequiredNonHostScopedAntiAffinity(), "%s: node %s", what, name)
		for i, k := range nh {
			require.Equal(t, k, ni.PodWithRequiredNonHostScopedAntiAffinityAt(i).Key(), "%s: node %s", what, name)
		}
		require.Nil(t, ni.PodWithRequiredNonHostScopedAntiAffinityAt(len(nh)))
		for l := 1; l < 4; l++ {
			if len(e.lists[l]) > 0 {
				want[l-1] = append(want[l-1], name)
			}
		}
	}
	require.Equal(t, want[0], nhNames(s.HavePodsWithAffinityList()), "%s: HavePodsWithAffinityList", what)
	require.Equal(t, want[1], nhNames(s.HavePodsWithRequiredAntiAffinityList()), "%s: HavePodsWithRequiredAntiAffinityList", what)
	require.Equal(t, want[2], nhNames(s.HavePodsWithRequiredNonHostScopedAntiAffinityList()),
		"%s: HavePodsWithRequiredNonHostScopedAntiAffinityList", what)
	require.Equal(t, len(want[0]), s.NumNodesWithAffinity(), what)
	require.Equal(t, len(want[1]), s.NumNodesWithRequiredAntiAffinity(), what)
	require.Equal(t, len(want[2]), s.NumNodesWithRequiredNonHostScopedAntiAffinity(), what)
}

// A pod whose required anti-affinity terms are all scoped to the hostname
// is not in the non-host-scoped list; one with a hostname term and a zone
// term is. The list follows the node list, a node leaves it with its last
// such pod (in the cache, a refreshed snapshot and a fork) and, as
// upstream, a removal whose pod object does not qualify leaves the pod's
// entry behind.
func TestNonHostScopedAntiAffinityList(t *testing.T) {
	c := upNew(t)
	for _, n := range []*v1.Node{upZoneNode("a", "", "z1"), upZoneNode("b", "", "z2"), upZoneNode("c", "", "z1")} {
		_, err := c.AddNode(upLog, n)
		require.NoError(t, err)
	}
	hostOnly, mixed, zone, aff := nhPod("p1", "a", 3), nhPod("p2", "b", 5), nhPod("p3", "c", 4), nhPod("p4", "a", 1)
	require.NoError(t, c.AddPod(upLog, hostOnly))
	require.NoError(t, c.AddPod(upLog, mixed))
	require.NoError(t, c.AssumePod(upLog, zone))
	require.NoError(t, c.AddPod(upLog, aff))
	ll := schedcache.NewEmptySnapshot()
	lists := func(s *schedcache.Snapshot) [3][]string {
		return [3][]string{nhNames(s.HavePodsWithAffinityList()), nhNames(s.HavePodsWithRequiredAntiAffinityList()),
			nhNames(s.HavePodsWithRequiredNonHostScopedAntiAffinityList())}
	}
	check := func(want [3][]string, what string) {
		t.Helper()
		require.Equal(t, want, lists(c.Snapshot()), what)
		require.NoError(t, c.UpdateSnapshot(upLog, ll))
		require.Equal(t, want, lists(ll), "%s: refreshed snapshot", what)
	}
	require.Equal(t, []string{"a", "b", "c"}, upListNames(t, c.Snapshot()))
	check([3][]string{{"a", "b", "c"}, {"a", "b", "c"}, {"b", "c"}}, "initial")
	a := upGetNode(t, c, "a")
	require.Equal(t, []string{"p1"}, nhKeys(a.PodsWithRequiredAntiAffinity()))
	require.Nil(t, a.PodsWithRequiredNonHostScopedAntiAffinity(), "hostname terms only")
	require.Equal(t, []string{"p2"}, nhKeys(upGetNode(t, c, "b").PodsWithRequiredNonHostScopedAntiAffinity()), "a hostname and a zone term")

	// Forgetting p3 through an object whose terms are hostname-scoped
	// searches the anti-affinity lists but not the non-host-scoped one.
	require.NoError(t, c.ForgetPod(upLog, nhWithAffinity(zone, 3)))
	cn := upGetNode(t, c, "c")
	require.Nil(t, cn.Pods())
	require.Nil(t, cn.PodsWithRequiredAntiAffinity())
	require.Equal(t, []string{"p3"}, nhKeys(cn.PodsWithRequiredNonHostScopedAntiAffinity()), "upstream's stale entry")
	check([3][]string{{"a", "b"}, {"a", "b"}, {"b", "c"}}, "after ForgetPod")

	require.NoError(t, c.RemovePod(upLog, nhWithAffinity(mixed, 0))) // the cached pod decides
	check([3][]string{{"a"}, {"a"}, {"c"}}, "after RemovePod")

	zoneP1 := nhWithAffinity(hostOnly, 4)
	require.NoError(t, c.UpdatePod(upLog, hostOnly, zoneP1))
	check([3][]string{{"a"}, {"a"}, {"a", "c"}}, "after UpdatePod")
	require.Equal(t, []string{"p4", "p1"}, nhKeys(upGetNode(t, c, "a").Pods()))

	// A fork keeps the list through its pod operations and reverts.
	f := c.Snapshot().Fork()
	f.Fork()
	require.NoError(t, f.RemovePod(zoneP1))
	require.Equal(t, [3][]string{{"a"}, nil, {"c"}}, lists(f.Snapshot()))
	require.NoError(t, f.AssumePod(nhPod("p5", "b", 6)))
	require.Equal(t, [3][]string{{"a", "b"}, {"b"}, {"b", "c"}}, lists(f.Snapshot()))
	require.NoError(t, f.ForgetPod(nhPod("p5", "b", 6)))
	require.Equal(t, [3][]string{{"a"}, nil, {"c"}}, lists(f.Snapshot()))
	require.NoError(t, f.Revert())
	require.Equal(t, [3][]string{{"a"}, {"a"}, {"a", "c"}}, lists(f.Snapshot()))
	require.Equal(t, [3][]string{{"a"}, {"a"}, {"a", "c"}}, lists(c.Snapshot()), "the fork did not change the cache")

	// Removing node c drops it from the list; its stale entry goes with
	// the entry, which holds no pod.
	require.NoError(t, c.RemoveNode(upLog, upZoneNode("c", "", "z1")))
	check([3][]string{{"a"}, {"a"}, {"a"}}, "after RemoveNode")
	_, err := c.AddNode(upLog, upZoneNode("c", "", "z1"))
	require.NoError(t, err)
	check([3][]string{{"a"}, {"a"}, {"a"}}, "after AddNode")
	require.Nil(t, upGetNode(t, c, "c").PodsWithRequiredNonHostScopedAntiAffinity())

	// NewSnapshot builds the list from its pods too.
	ns := schedcache.NewSnapshot([]*v1.Pod{nhPod("q1", "x", 3), nhPod("q2", "y", 5), nhPod("q3", "z", 2)},
		[]*v1.Node{upZoneNode("x", "", "z1"), upZoneNode("y", "", "z1"), upZoneNode("z", "", "z1")})
	require.Equal(t, [3][]string{{"x", "y", "z"}, {"x", "y"}, {"y"}}, lists(ns))
}

// nhDriver runs random operations on a target and the model alike.
type nhDriver struct {
	t     *testing.T
	r     *rand.Rand
	m     *nhModel
	tg    nhTarget
	nodes map[string]*v1.Node // every node name the test uses -> its object
	names []string            // the keys of nodes, in order
	seq   int
	gone  map[string]string // key -> node of the pods removed, whose keys may come back
	fork  bool              // the target is a fork: pods only on nodes with an object
}

func (d *nhDriver) liveNode() (string, bool) {
	var live []string
	for _, n := range d.names {
		if e := d.m.entries[n]; e != nil && e.node {
			live = append(live, n)
		}
	}
	if len(live) == 0 {
		return "", false
	}
	return live[d.r.IntN(len(live))], true
}

// pickPod returns a cached pod, assumed or added as asked (any if
// either), in key order so that runs repeat; on a fork only pods on nodes
// with an object.
func (d *nhDriver) pickPod(assumed, added bool) (*nhPodState, bool) {
	var keys []string
	for k, p := range d.m.pods {
		if (p.assumed && !assumed) || (!p.assumed && !added) {
			continue
		}
		if e := d.m.entries[p.pod.Spec.NodeName]; d.fork && !e.node {
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, false
	}
	slices.Sort(keys)
	return d.m.pods[keys[d.r.IntN(len(keys))]], true
}

// newPod returns a new pod of a random kind on a node with an object:
// half the time a pod removed before comes back on its node, with its key
// (whose stale entries the node's sub-lists may still hold), else a new
// key on a random node.
func (d *nhDriver) newPod() (*v1.Pod, bool) {
	node, ok := d.liveNode()
	if !ok {
		return nil, false
	}
	var uid string
	if len(d.gone) > 0 && d.r.IntN(2) == 0 {
		keys := slices.Sorted(maps.Keys(d.gone))
		uid = keys[d.r.IntN(len(keys))]
		if e := d.m.entries[d.gone[uid]]; e != nil && e.node {
			node = d.gone[uid]
		}
		delete(d.gone, uid)
	} else {
		d.seq++
		uid = fmt.Sprint("u", d.seq)
	}
	return nhPod(uid, node, d.r.IntN(nhKinds)), true
}

// removed records that pod key left the node it was on.
func (d *nhDriver) removed(key string, node string) {
	if d.gone == nil {
		d.gone = map[string]string{}
	}
	d.gone[key] = node
}

// variant returns the object a removal passes for p: p itself, or a copy
// with another affinity.
func (d *nhDriver) variant(p *v1.Pod) *v1.Pod {
	if d.r.IntN(2) == 0 {
		return p
	}
	return nhWithAffinity(p, d.r.IntN(nhKinds))
}

func (d *nhDriver) step() string {
	t, r, m := d.t, d.r, d.m
	switch op := r.IntN(20); {
	case op < 6: // a new pod, assumed or added
		p, ok := d.newPod()
		if !ok {
			return "no node"
		}
		if op < 3 {
			require.NoError(t, d.tg.AssumePod(p))
			m.add(p, true)
			return "AssumePod " + string(p.UID)
		}
		require.NoError(t, d.tg.AddPod(p))
		m.add(p, false)
		return "AddPod " + string(p.UID)
	case op < 8: // confirm an assumed pod, on its node or another
		st, ok := d.pickPod(true, false)
		node, live := d.liveNode()
		if !ok || !live {
			return "nothing to confirm"
		}
		if r.IntN(2) == 0 {
			node = st.pod.Spec.NodeName
		}
		p := nhWithAffinity(st.pod, r.IntN(nhKinds))
		p.Spec.NodeName = node
		require.NoError(t, d.tg.AddPod(p))
		m.remove(string(p.UID), st.pod)
		m.add(p, false)
		return "AddPod (confirm) " + string(p.UID)
	case op < 11:
		st, ok := d.pickPod(true, false)
		if !ok {
			return "nothing to forget"
		}
		obj := d.variant(st.pod)
		op := "ForgetPod "
		if c, ok := d.tg.(nhCache); ok && r.IntN(2) == 0 {
			op = "RemoveAssumedPod " // the same rules: the caller's object decides
			require.NoError(t, c.c.RemoveAssumedPod(upLog, obj))
		} else {
			require.NoError(t, d.tg.ForgetPod(obj))
		}
		d.removed(string(obj.UID), obj.Spec.NodeName)
		m.remove(string(obj.UID), obj)
		return op + string(obj.UID)
	case op < 14:
		st, ok := d.pickPod(false, true)
		if !ok {
			return "nothing to update"
		}
		old, p := d.variant(st.pod), nhWithAffinity(st.pod, r.IntN(nhKinds))
		require.NoError(t, d.tg.UpdatePod(old, p))
		m.remove(string(p.UID), old)
		m.add(p, false)
		return "UpdatePod " + string(p.UID)
	case op < 17:
		st, ok := d.pickPod(true, true)
		if !ok {
			return "nothing to remove"
		}
		key := string(st.pod.UID)
		require.NoError(t, d.tg.RemovePod(d.variant(st.pod)))
		d.removed(key, st.pod.Spec.NodeName)
		m.remove(key, st.pod) // the cached pod decides
		return "RemovePod " + key
	case op < 18:
		name, ok := d.liveNode()
		if !ok {
			return "no node"
		}
		require.NoError(t, d.tg.RemoveNode(d.nodes[name]))
		e := m.entries[name]
		e.node = false
		if len(e.lists[0]) == 0 {
			delete(m.entries, name)
		}
		return "RemoveNode " + name
	default:
		name := d.names[r.IntN(len(d.names))]
		if e := m.entries[name]; e != nil && (e.node || d.fork) {
			// A fork knows no pods of a nodeless entry of its base
			// (snapshots do not show them): it adds only new names.
			return "node " + name + " is there"
		}
		require.NoError(t, d.tg.AddNode(d.nodes[name]))
		m.entry(name).node = true
		return "AddNode " + name
	}
}

// Random operations on the cache, on snapshots it refreshes and on forks
// of its snapshots, with removals through objects whose affinity differs
// from the cached pod's (which leave stale entries) and keys that come
// back after their pod left (whose removals may take a stale entry out):
// after each, every listed node's four pod lists and the snapshot's three
// affinity lists are the model's.
func TestNonHostScopedAntiAffinityModel(t *testing.T) {
	steps := 1500
	if testing.Short() {
		steps = 400
	}
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			c := upNew(t)
			d := &nhDriver{t: t, r: rand.New(rand.NewPCG(seed, 11)), m: newNHModel(), tg: nhCache{c}, nodes: map[string]*v1.Node{}}
			for i := range 8 {
				name := fmt.Sprint("n", i)
				d.nodes[name] = upZoneNode(name, "", fmt.Sprint("z", i%3))
				d.names = append(d.names, name)
				if i < 6 {
					_, err := c.AddNode(upLog, d.nodes[name])
					require.NoError(t, err)
					d.m.entry(name).node = true
				}
			}
			ll := schedcache.NewEmptySnapshot()
			for i := range steps {
				what := fmt.Sprintf("step %d: %s", i, d.step())
				nhRequireLists(t, c.Snapshot(), d.m, what)
				if i%7 == 0 {
					require.NoError(t, c.UpdateSnapshot(upLog, ll), what)
					nhRequireLists(t, ll, d.m, what+" (refreshed snapshot)")
				}
				if i%100 == 50 {
					nhForkRound(t, d, c.Snapshot(), what)
					nhRequireLists(t, c.Snapshot(), d.m, what+" (after the fork)")
				}
			}
		})
	}
}

// nhForkRound drives a fork of base with a copy of d's model: some
// operations, a fork point, more, a check, then a revert to the point.
func nhForkRound(t *testing.T, d *nhDriver, base *schedcache.Snapshot, what string) {
	f := base.Fork()
	fd := *d
	fd.m, fd.tg, fd.fork = d.m.clone(), f, true
	fd.nodes, fd.gone = maps.Clone(d.nodes), maps.Clone(d.gone)
	for i := range 30 {
		w := fmt.Sprintf("%s, fork step %d: %s", what, i, fd.step())
		nhRequireLists(t, f.Snapshot(), fd.m, w)
	}
	f.Fork()
	at := fd.m.clone()
	for i := range 30 {
		w := fmt.Sprintf("%s, fork step %d after a point: %s", what, i, fd.step())
		if i%5 == 4 {
			nhRequireLists(t, f.Snapshot(), fd.m, w)
		}
	}
	require.NoError(t, f.Revert())
	nhRequireLists(t, f.Snapshot(), at, what+", fork reverted")
	d.seq = fd.seq // the fork's new keys are not the cache's
}
