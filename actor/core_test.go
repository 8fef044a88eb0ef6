package actor

import (
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache/internal/watchdog"
	"github.com/schedcache/schedcache/nodeinfo"
	"github.com/schedcache/schedcache/snapshot"
	"github.com/schedcache/schedcache/workload"
)

func TestMain(m *testing.M) {
	watchdog.Enable(watchdog.Default) // a deadlock fails in seconds, with every goroutine's stack
	goleak.VerifyTestMain(m)
}

func testNode(name, zone string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"topology.kubernetes.io/zone": zone}},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse("8")}}}
}

func testPod(t testing.TB, uid, node string, milli int64) *nodeinfo.PodInfo {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}, Spec: v1.PodSpec{NodeName: node,
		Containers: []v1.Container{{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}}}}}}
	pi, err := nodeinfo.NewPodInfo(p)
	require.NoError(t, err)
	return pi
}

// The core is deterministic: a scenario as data, applied step by step,
// with the expected error and the published state after each step.
func TestCoreScenario(t *testing.T) {
	l := newLocal(3, 0)
	c := l.core
	steps := []struct {
		name     string
		do       func() error
		wantErr  error
		list     []string
		requests map[string]int64 // node -> millicpu
		pods     int
		entries  int
	}{
		{"add n1(A)", func() error { c.AddNode(testNode("n1", "A")); return nil }, nil, []string{"n1"}, map[string]int64{"n1": 0}, 0, 1},
		{"add n2(B)", func() error { c.AddNode(testNode("n2", "B")); return nil }, nil, []string{"n1", "n2"}, nil, 0, 2},
		{"add n3(A)", func() error { c.AddNode(testNode("n3", "A")); return nil }, nil, []string{"n1", "n2", "n3"}, nil, 0, 3},
		{"assume p1@n1", func() error { return c.AssumePod(testPod(t, "p1", "n1", 100)) }, nil, nil, map[string]int64{"n1": 100}, 1, 3},
		{"assume p1 again", func() error { return c.AssumePod(testPod(t, "p1", "n2", 100)) }, ErrPodAlreadyCached, nil, map[string]int64{"n1": 100, "n2": 0}, 1, 3},
		{"add p1@n2 moves it", func() error { return c.AddPod(testPod(t, "p1", "n2", 300)) }, nil, nil, map[string]int64{"n1": 0, "n2": 300}, 1, 3},
		{"add p1 again", func() error { return c.AddPod(testPod(t, "p1", "n2", 300)) }, ErrPodAlreadyAdded, nil, nil, 1, 3},
		{"pod on unknown node", func() error { return c.AddPod(testPod(t, "p2", "ghost", 50)) }, nil, []string{"n1", "n2", "n3"}, nil, 2, 4},
		{"remove n2 with a pod: ghost", func() error { return c.RemoveNode(testNode("n2", "B")) }, nil, []string{"n1", "n3"}, nil, 2, 4},
		{"remove ghost again", func() error { return c.RemoveNode(testNode("n2", "B")) }, errNotInZone, []string{"n1", "n3"}, nil, 2, 4},
		{"last pod leaves the ghost", func() error { return c.RemovePod("p1", &v1.Pod{}) }, nil, nil, nil, 1, 3},
		{"remove deleted node", func() error { return c.RemoveNode(testNode("n2", "B")) }, ErrNodeNotFound, nil, nil, 1, 3},
		{"move n1 to zone B", func() error { c.UpdateNode(testNode("n1", "A"), testNode("n1", "B")); return nil }, nil, []string{"n3", "n1"}, nil, 1, 3},
	}
	for i, st := range steps {
		err := st.do()
		if st.wantErr == errNotInZone {
			require.Error(t, err, st.name)
		} else if st.wantErr != nil {
			require.ErrorIs(t, err, st.wantErr, st.name)
		} else {
			require.NoError(t, err, st.name)
		}
		s, err := l.Publish()
		require.NoError(t, err)
		if st.wantErr == nil {
			require.Equal(t, uint64(i+1), s.Epoch(), st.name) // the snapshot includes this step
		} else {
			require.LessOrEqual(t, s.Epoch(), uint64(i+1), st.name) // a refused step may publish nothing
		}
		if st.list != nil {
			var got []string
			s.Range(func(_ int, ni *nodeinfo.NodeInfo) bool { got = append(got, ni.NodeName()); return true })
			require.Equal(t, st.list, got, st.name)
		}
		for name, want := range st.requests {
			ni, err := s.Get(name)
			require.NoError(t, err, st.name)
			require.Equal(t, want, ni.Requested().MilliCPU, "%s: %s", st.name, name)
		}
		require.Equal(t, st.pods, s.PodCount(), st.name)
		require.Equal(t, st.entries, s.NodeCount(), st.name)
	}
}

var errNotInZone = errors.New("any tree error")

// Expiry removes exactly the pods whose binding finished and whose deadline
// passed, at most `limit` per step.
func TestCoreExpire(t *testing.T) {
	l := newLocal(2, 10*time.Second)
	c := l.core
	c.AddNode(testNode("n", "A"))
	t0 := time.Unix(1000, 0)
	for i := 0; i < 10; i++ {
		require.NoError(t, c.AssumePod(testPod(t, fmt.Sprint("p", i), "n", 10)))
		if i < 7 {
			require.NoError(t, c.FinishBinding(fmt.Sprint("p", i), t0.Add(time.Duration(i)*time.Second)))
		}
	}
	require.NoError(t, c.FinishBinding("p0", t0.Add(5*time.Second))) // re-armed: deadline t0+15s
	n, more := c.Expire(t0.Add(10*time.Second), 100)                 // nothing strictly after a deadline yet
	require.Equal(t, 0, n)
	require.False(t, more)
	n, more = c.Expire(t0.Add(14*time.Second+1), 3) // p1..p4 due (deadlines 11..14s), limit 3
	require.Equal(t, 3, n)
	require.True(t, more)
	n, more = c.Expire(t0.Add(14*time.Second+1), 3)
	require.Equal(t, 1, n)
	require.False(t, more)
	s, err := l.Publish()
	require.NoError(t, err)
	require.Equal(t, 6, s.PodCount()) // p0, p5, p6 (armed), p7..p9 (never finished)
	ni, _ := s.Get("n")
	require.Equal(t, int64(60), ni.Requested().MilliCPU)
	n, _ = c.Expire(t0.Add(time.Hour), 100)
	require.Equal(t, 3, n) // p0, p5, p6; unfinished bindings never expire
}

var bench50k = flag.Bool("publish.50k", false, "also run the publication benchmarks on the 50,000-node cluster")

var clusters sync.Map // spec -> *workload.Cluster

func cluster(spec workload.ClusterSpec) *workload.Cluster {
	if c, ok := clusters.Load(spec); ok {
		return c.(*workload.Cluster)
	}
	c := workload.Build(spec)
	clusters.Store(spec, c)
	return c
}

func loadLocal(b *testing.B, cl *workload.Cluster) *local {
	l := newLocal(1, 0)
	for _, n := range cl.Nodes {
		l.core.AddNode(n)
	}
	for _, p := range cl.Pods {
		pi, err := nodeinfo.NewPodInfo(p)
		require.NoError(b, err)
		require.NoError(b, l.core.AddPod(pi))
	}
	_, err := l.Publish()
	require.NoError(b, err)
	return l
}

// publishSpecs returns the clusters the publication benchmarks load: the
// standard one, and with -publish.50k the 50,000-node one.
func publishSpecs() []workload.ClusterSpec {
	specs := []workload.ClusterSpec{workload.Standard()}
	if *bench50k {
		specs = append(specs, workload.Standard50k())
	}
	return specs
}

// BenchmarkPublishOneChange measures one pod change plus the publication of
// the snapshot that includes it, on the loaded standard cluster. Guarantee
// 5: the cost depends on the changed node and its pods and on O(log nodes)
// path copies, never on a walk of the nodes (nodes=50000 against
// nodes=5000: docs/bench/scale.md).
func BenchmarkPublishOneChange(b *testing.B) {
	for _, spec := range publishSpecs() {
		b.Run(fmt.Sprintf("nodes=%d", spec.Nodes), func(b *testing.B) {
			cl := cluster(spec)
			l := loadLocal(b, cl)
			r := rand.New(rand.NewPCG(1, 2))
			infos := make([]*nodeinfo.PodInfo, 1024)
			for i := range infos {
				infos[i] = testPod(b, fmt.Sprint("bench-", i), cl.Nodes[r.IntN(len(cl.Nodes))].Name, 100)
			}
			runtime.GC() // the load's garbage is setup, not the measured work
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				pi := infos[i%len(infos)]
				if err := l.core.AddPod(pi); err != nil {
					b.Fatal(err)
				}
				if _, err := l.Publish(); err != nil {
					b.Fatal(err)
				}
				if err := l.core.RemovePod(pi.Key(), pi.Pod()); err != nil {
					b.Fatal(err)
				}
				if _, err := l.Publish(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/publish")
		})
	}
}

// BenchmarkPublishNodeAddRemove measures removing a node (that holds no
// pods) and adding it back, each followed by its publication, on the loaded
// standard cluster: the node list and its zone order change both times.
func BenchmarkPublishNodeAddRemove(b *testing.B) {
	for _, spec := range publishSpecs() {
		b.Run(fmt.Sprintf("nodes=%d", spec.Nodes), func(b *testing.B) {
			cl := cluster(spec)
			l := loadLocal(b, cl)
			extra := cl.Nodes[0].DeepCopy()
			extra.Name = "bench-extra-node"
			l.core.AddNode(extra)
			if _, err := l.Publish(); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if err := l.core.RemoveNode(extra); err != nil {
					b.Fatal(err)
				}
				if _, err := l.Publish(); err != nil {
					b.Fatal(err)
				}
				l.core.AddNode(extra)
				if _, err := l.Publish(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/publish")
		})
	}
}

// The node list is built from the slots the zone tree lists, not by name.
// Through random node adds, removes (some naming the wrong zone, which
// upstream reports and which leaves the name listed), zone moves, and pods
// that keep entries alive as ghosts, every published list must equal the
// tree's names resolved by name, skipping names without a node object.
func TestNodeListBySlotMatchesByName(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	l := newLocal(2, 0)
	c := l.core
	zone := map[string]string{}
	seq := 0
	const (
		clean     = iota // every removal names the node's one zone
		twoZones         // AddNode may list a name in a second zone
		wrongZone        // and RemoveNode may name a zone the node is not in
	)
	step := func(i int, mode int) {
		clean := mode == clean
		n := fmt.Sprintf("n%02d", rng.IntN(30))
		switch r := rng.IntN(10); {
		case r < 4:
			if _, ok := zone[n]; !ok || !clean {
				zone[n] = fmt.Sprintf("z%d", rng.IntN(3)) // unclean: a second zone lists the name
			}
			c.AddNode(testNode(n, zone[n]))
		case r < 6:
			z, ok := zone[n]
			if mode == wrongZone && rng.IntN(5) == 0 {
				z = "wrong" // the tree removal fails; the name stays listed
			}
			if mode != wrongZone && !ok {
				return // a node the tree does not list: its removal fails
			}
			if c.RemoveNode(testNode(n, z)) == nil {
				delete(zone, n)
			}
		case r < 8:
			if old, ok := zone[n]; ok {
				zone[n] = fmt.Sprintf("z%d", rng.IntN(3))
				c.UpdateNode(testNode(n, old), testNode(n, zone[n]))
			}
		default:
			seq++
			require.NoError(t, c.AddPod(testPod(t, fmt.Sprint("p", seq), n, 10)))
		}
		s, err := l.Publish()
		require.NoError(t, err)
		requireShadowCounts(t, l, fmt.Sprintf("step %d", i))
		names, _ := c.tree.List()
		var want []string
		for _, name := range names {
			if e := c.nodes[name]; e != nil && e.node != nil {
				want = append(want, name)
			}
		}
		var got []string
		for i := range s.NumNodes() {
			got = append(got, s.At(i).Node().Name)
		}
		require.Equal(t, want, got, "step %d (mode %d, stale=%v)", i, mode, c.treeStale)
	}
	for i := range 2000 {
		step(i, clean)
	}
	require.False(t, c.treeStale, "clean node operations never leave a name behind")
	for i := range 3000 {
		step(i, twoZones)
	}
	require.True(t, c.treeStale, "no removal left a name listed in a second zone")
	for i := range 3000 {
		step(i, wrongZone)
	}
}

// antiAffinityPod is a pod with required pod affinity if aff, and a
// required anti-affinity term per topology key of antiKeys: it is in the
// non-host-scoped anti-affinity list if some key is not the hostname.
func antiAffinityPod(t testing.TB, uid, node string, aff bool, antiKeys ...string) *nodeinfo.PodInfo {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}, Spec: v1.PodSpec{NodeName: node}}
	sel := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	term := []v1.PodAffinityTerm{{TopologyKey: "kubernetes.io/hostname", LabelSelector: sel}}
	if aff || len(antiKeys) > 0 {
		p.Spec.Affinity = &v1.Affinity{}
	}
	if aff {
		p.Spec.Affinity.PodAffinity = &v1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: term}
	}
	if len(antiKeys) > 0 {
		anti := &v1.PodAntiAffinity{}
		for _, k := range antiKeys {
			anti.RequiredDuringSchedulingIgnoredDuringExecution = append(anti.RequiredDuringSchedulingIgnoredDuringExecution,
				v1.PodAffinityTerm{TopologyKey: k, LabelSelector: sel})
		}
		p.Spec.Affinity.PodAntiAffinity = anti
	}
	pi, err := nodeinfo.NewPodInfo(p)
	require.NoError(t, err)
	return pi
}

// randomAntiKeys picks a pod's required anti-affinity terms: none, hostname
// only, a zone term, or a hostname and a zone term (non-host-scoped both).
func randomAntiKeys(rng *rand.Rand) []string {
	return [][]string{nil, {v1.LabelHostname}, {v1.LabelTopologyZone}, {v1.LabelHostname, v1.LabelTopologyZone}}[rng.IntN(4)]
}

// The affinity lists are edited in place of a rebuild when a few nodes gain
// or lose their last affinity pod. Whatever the mix of flips per epoch
// (none, one, several, past maxAffEdits, on nodeless entries, with node
// adds and removes in between), every published list must equal the node
// list filtered from scratch, and held snapshots must not change. With
// 3,000 nodes the lists span several persist.Seq chunks, which flips split
// and merge.
func TestAffinityListEdits(t *testing.T) {
	for _, nodes := range []int{40, 3000} {
		t.Run(fmt.Sprint(nodes), func(t *testing.T) { testAffinityListEdits(t, nodes) })
	}
}

func testAffinityListEdits(t *testing.T, nodes int) {
	rng := rand.New(rand.NewPCG(7, 7))
	l := newLocal(2, 0)
	c := l.core
	zone := map[string]string{}
	for i := range nodes {
		n := fmt.Sprintf("n%02d", i)
		zone[n] = fmt.Sprintf("z%d", i%3)
		c.AddNode(testNode(n, zone[n]))
	}
	_, err := l.Publish()
	require.NoError(t, err)

	type heldList struct {
		snap               *snapshot.Snapshot
		aff, anti, nonHost []string
	}
	names := func(list []*nodeinfo.NodeInfo) []string {
		out := make([]string, 0, len(list))
		for _, ni := range list {
			out = append(out, ni.Node().Name)
		}
		return out
	}
	// want filters the node list by whether any of the node's pods has
	// (anti-)affinity, from the NodeInfos themselves.
	want := func(s *snapshot.Snapshot) (aff, anti, nonHost []string) {
		aff, anti, nonHost = []string{}, []string{}, []string{}
		for i := range s.NumNodes() {
			ni := s.At(i)
			if len(ni.PodsWithAffinity()) > 0 {
				aff = append(aff, ni.Node().Name)
			}
			if len(ni.PodsWithRequiredAntiAffinity()) > 0 {
				anti = append(anti, ni.Node().Name)
			}
			if len(ni.PodsWithRequiredNonHostScopedAntiAffinity()) > 0 {
				nonHost = append(nonHost, ni.Node().Name)
			}
		}
		return aff, anti, nonHost
	}
	live := map[string]bool{}
	var held []heldList
	seq := 0
	if nodes > 100 { // start with long lists: 2/3 of the nodes hold an affinity pod
		for i := range nodes {
			if i%3 == 0 {
				continue
			}
			seq++
			uid := fmt.Sprintf("p%d", seq)
			require.NoError(t, c.AddPod(antiAffinityPod(t, uid, fmt.Sprintf("n%02d", i), true, [][]string{nil, {v1.LabelHostname}, {v1.LabelTopologyZone}}[i%3]...)))
			live[uid] = true
		}
	}
	for epoch := range 400 {
		ops := rng.IntN(4) // 0..3 changes per epoch
		if epoch%50 == 49 {
			ops = 48 // many flips in one epoch
		}
		for range ops {
			switch r := rng.IntN(20); {
			case r == 0: // remove and re-add a node: the node list changes
				n := fmt.Sprintf("n%02d", rng.IntN(nodes))
				require.NoError(t, c.RemoveNode(testNode(n, zone[n])))
				zone[n] = fmt.Sprintf("z%d", rng.IntN(3))
				c.AddNode(testNode(n, zone[n]))
			case r == 1: // a pod on a node with no node object: a nodeless entry flips
				seq++
				uid := fmt.Sprintf("g%d", seq)
				require.NoError(t, c.AddPod(antiAffinityPod(t, uid, "ghost", true, randomAntiKeys(rng)...)))
				live[uid] = true
			case r < 11 && len(live) > 0:
				for uid := range live {
					pi := l.core.pods[uid]
					require.NoError(t, c.RemovePod(uid, pi.info.Pod()))
					delete(live, uid)
					break
				}
			default:
				seq++
				uid := fmt.Sprintf("p%d", seq)
				require.NoError(t, c.AddPod(antiAffinityPod(t, uid, fmt.Sprintf("n%02d", rng.IntN(nodes)), rng.IntN(2) == 0, randomAntiKeys(rng)...)))
				live[uid] = true
			}
		}
		s, err := l.Publish()
		require.NoError(t, err)
		aff, err := s.HavePodsWithAffinityList()
		require.NoError(t, err)
		anti, err := s.HavePodsWithRequiredAntiAffinityList()
		require.NoError(t, err)
		nonHost, err := s.HavePodsWithRequiredNonHostScopedAntiAffinityList()
		require.NoError(t, err)
		wa, wn, wh := want(s)
		require.Equal(t, wa, names(aff), "epoch %d affinity list", epoch)
		require.Equal(t, wn, names(anti), "epoch %d anti-affinity list", epoch)
		require.Equal(t, wh, names(nonHost), "epoch %d non-host-scoped anti-affinity list", epoch)
		require.Equal(t, len(wh), s.NumNodesWithRequiredNonHostScopedAntiAffinity(), "epoch %d", epoch)
		requireShadowCounts(t, l, fmt.Sprintf("epoch %d", epoch))
		if epoch%20 == 0 {
			held = append(held, heldList{s, wa, wn, wh})
		}
	}
	for _, h := range held {
		aff, _ := h.snap.HavePodsWithAffinityList()
		anti, _ := h.snap.HavePodsWithRequiredAntiAffinityList()
		nonHost, _ := h.snap.HavePodsWithRequiredNonHostScopedAntiAffinityList()
		require.Equal(t, h.aff, names(aff), "held snapshot %d changed", h.snap.Epoch())
		require.Equal(t, h.anti, names(anti), "held snapshot %d changed", h.snap.Epoch())
		require.Equal(t, h.nonHost, names(nonHost), "held snapshot %d changed", h.snap.Epoch())
	}
}

func imageNode(name string, images ...v1.ContainerImage) *v1.Node {
	n := testNode(name, "A")
	n.Status.Images = images
	return n
}

// TestNodeHeartbeatImages: a node update listing the same images keeps the
// registry version and the node's names as they are, with the result
// upstream's unregister-then-register gives, including the case where that
// re-creates an image with the updated node's size.
func TestNodeHeartbeatImages(t *testing.T) {
	l := newLocal(2, 0)
	c := l.core
	img := func(name string, size int64) v1.ContainerImage {
		return v1.ContainerImage{Names: []string{name}, SizeBytes: size}
	}
	summary := func(node, image string) nodeinfo.ImageStateSummary {
		t.Helper()
		s, err := l.Publish()
		require.NoError(t, err)
		ni, err := s.Get(node)
		require.NoError(t, err)
		sum, ok := ni.ImageState(image)
		require.True(t, ok, "%s lists %s", node, image)
		return sum
	}
	c.AddNode(imageNode("n1", img("x", 100)))
	c.AddNode(imageNode("n2", img("x", 200), img("y", 50)))
	require.Equal(t, nodeinfo.ImageStateSummary{Size: 100, NumNodes: 2}, summary("n2", "x"))

	// A heartbeat: a new object, same images. Nothing moves.
	table, names := c.table, c.nodes["n2"].names
	old := c.nodes["n2"].node
	c.UpdateNode(old, imageNode("n2", img("x", 200), img("y", 50)))
	require.Empty(t, c.imgChanged, "a heartbeat changes no image summary")
	require.Len(t, c.nodes["n2"].names, 2)
	require.Equal(t, fmt.Sprintf("%p", names), fmt.Sprintf("%p", c.nodes["n2"].names), "names kept")
	require.Equal(t, nodeinfo.ImageStateSummary{Size: 100, NumNodes: 2}, summary("n2", "x"))
	require.Equal(t, nodeinfo.ImageStateSummary{Size: 50, NumNodes: 1}, summary("n2", "y"))
	require.Same(t, table, c.table, "a heartbeat publishes no new registry version")

	// n1 leaves: x keeps the size n1 fixed, now held by n2 alone; n2's
	// summary is as of its last change until n2 changes, as upstream's
	// long-lived snapshot's.
	require.NoError(t, c.RemoveNode(c.nodes["n1"].node))
	require.Equal(t, 1, c.images["x"].count)
	require.Equal(t, nodeinfo.ImageStateSummary{Size: 100, NumNodes: 2}, summary("n2", "x"))

	// A heartbeat of n2 now re-creates x with n2's size, as upstream's
	// unregister and register do.
	c.UpdateNode(c.nodes["n2"].node, imageNode("n2", img("x", 200), img("y", 50)))
	require.Equal(t, nodeinfo.ImageStateSummary{Size: 200, NumNodes: 1}, summary("n2", "x"))

	// An update that changes the list rebuilds the summaries.
	table = c.table
	c.UpdateNode(c.nodes["n2"].node, imageNode("n2", img("x", 200), img("y", 50), img("z", 7)))
	summary("n2", "z")
	require.NotSame(t, table, c.table)
	require.Equal(t, nodeinfo.ImageStateSummary{Size: 7, NumNodes: 1}, summary("n2", "z"))
	require.Equal(t, nodeinfo.ImageStateSummary{Size: 200, NumNodes: 1}, summary("n2", "x"))
}

// Several changes of one pod within an epoch (confirmations and updates
// reuse the pod's record in place; the epoch's changes are applied in order,
// last one winning) must publish exactly the final state. Random operations
// on a few keys, published every 1-20 operations, are checked against a
// plain model: each key's presence, node, assumed state and pod object, the
// pod count, every node's requested CPU and the number of entries (ghost
// entries, which exist only while they hold pods, included).
func TestPodChangesWithinEpoch(t *testing.T) {
	type modelPod struct {
		pod      *v1.Pod
		milli    int64
		assumed  bool
		deadline time.Time // zero: no deadline armed
	}
	const ttl = 10 * time.Second
	rng := rand.New(rand.NewPCG(21, 22))
	l := newLocal(3, ttl)
	c := l.core
	nodes := []string{"n0", "n1", "n2", "n3"}
	for i, n := range nodes {
		c.AddNode(testNode(n, fmt.Sprint("z", i%2)))
	}
	targets := append(slices.Clone(nodes), "ghost0", "ghost1") // ghosts: pods on nodes never added
	model := map[string]*modelPod{}
	now := time.Unix(1000, 0)
	pending := 0
	for step := range 20000 {
		key := fmt.Sprint("p", rng.IntN(40))
		m := model[key]
		milli := int64(10 * (1 + rng.IntN(9)))
		pi := testPod(t, key, targets[rng.IntN(len(targets))], milli)
		switch {
		case m == nil && rng.IntN(2) == 0:
			require.NoError(t, c.AssumePod(pi))
			model[key] = &modelPod{pod: pi.Pod(), milli: milli, assumed: true}
		case m == nil:
			require.NoError(t, c.AddPod(pi))
			model[key] = &modelPod{pod: pi.Pod(), milli: milli}
		case m.assumed && rng.IntN(3) == 0:
			require.NoError(t, c.FinishBinding(key, now))
			m.deadline = now.Add(ttl)
		case m.assumed && rng.IntN(2) == 0: // confirmation, possibly on another node
			require.NoError(t, c.AddPod(pi))
			model[key] = &modelPod{pod: pi.Pod(), milli: milli}
		case m.assumed:
			require.NoError(t, c.ForgetPod(key, m.pod))
			delete(model, key)
		case rng.IntN(2) == 0: // update in place: same node
			upd := testPod(t, key, m.pod.Spec.NodeName, milli)
			require.NoError(t, c.UpdatePod(m.pod, upd))
			model[key] = &modelPod{pod: upd.Pod(), milli: milli}
		default:
			require.NoError(t, c.RemovePod(key, m.pod))
			delete(model, key)
		}
		if rng.IntN(50) == 0 {
			now = now.Add(time.Duration(rng.IntN(15)) * time.Second)
			for {
				if _, more := c.Expire(now, 1000); !more {
					break
				}
			}
			for k, m := range model {
				if m.assumed && !m.deadline.IsZero() && now.After(m.deadline) {
					delete(model, k)
				}
			}
		}
		if pending++; pending < 1+rng.IntN(20) {
			continue
		}
		pending = 0
		s, err := l.Publish()
		require.NoError(t, err)
		require.Equal(t, len(model), s.PodCount(), "step %d", step)
		want := map[string]int64{}
		for i := range 40 {
			k := fmt.Sprint("p", i)
			got, ok := s.Pod(k)
			m := model[k]
			require.Equal(t, m != nil, ok, "step %d: %s present", step, k)
			if m == nil {
				continue
			}
			require.Same(t, m.pod, got.Pod, "step %d: %s object", step, k)
			require.Equal(t, m.assumed, got.Assumed, "step %d: %s assumed", step, k)
			want[m.pod.Spec.NodeName] += m.milli
		}
		entries := len(nodes)
		for _, n := range nodes {
			ni, err := s.Get(n)
			require.NoError(t, err, "step %d: %s", step, n)
			require.Equal(t, want[n], ni.Requested().MilliCPU, "step %d: %s requested", step, n)
		}
		// Ghost entries are not in the snapshot's name index: read their
		// aggregates from the shards.
		names := c.SlotNames()
		ghosts := map[string]int64{}
		for _, sh := range l.shards {
			for slot, ni := range sh.Dump() {
				if n := names[slot]; !slices.Contains(nodes, n) {
					ghosts[n] = ni.Requested().MilliCPU
				}
			}
		}
		for _, n := range targets[len(nodes):] {
			if want[n] > 0 {
				entries++
				require.Equal(t, want[n], ghosts[n], "step %d: ghost %s requested", step, n)
			} else {
				require.NotContains(t, ghosts, n, "step %d: empty ghost %s must be gone", step, n)
			}
		}
		require.Len(t, ghosts, entries-len(nodes), "step %d", step)
		require.Equal(t, entries, s.NodeCount(), "step %d", step)
	}
}

// BenchmarkNodeManyImages measures the coordinator's time to add a node
// listing images=N distinct images (two names each, one shared with a
// node already holding them all) and to remove it, each published. The
// cost must grow linearly with N: registration once took O(N^2) (1.7 s
// for 10,000 images).
func BenchmarkNodeManyImages(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("images=%d", n), func(b *testing.B) {
			imgs := make([]v1.ContainerImage, n)
			for i := range imgs {
				imgs[i] = v1.ContainerImage{Names: []string{fmt.Sprintf("img-%d", i), fmt.Sprintf("img-%d@sha", i)}, SizeBytes: int64(i)}
			}
			l := newLocal(2, 0)
			l.core.AddNode(imageNode("holder", imgs...))
			if _, err := l.Publish(); err != nil {
				b.Fatal(err)
			}
			node := imageNode("n", imgs...)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				l.core.AddNode(node)
				if _, err := l.Publish(); err != nil {
					b.Fatal(err)
				}
				if err := l.core.RemoveNode(node); err != nil {
					b.Fatal(err)
				}
				if _, err := l.Publish(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/image")
		})
	}
}

// BenchmarkZoneMove20kZones measures one zone move (UpdateNode changing
// the node's zone) plus the publication that includes it, in clusters
// with 20,000 zones: one node per zone, and the same plus one zone of
// 5,000 nodes (uneven zones: the interleaving runs 5,000 rounds). The
// move alternates a node of a one-node zone between its zone and a new
// one, so each move deletes one zone and creates one. A node-list
// rebuild of O(nodes) slots is expected; nothing may cost O(zones x
// rounds) or O(nodes x zones).
func BenchmarkZoneMove20kZones(b *testing.B) {
	for _, big := range []int{0, 5000} {
		b.Run(fmt.Sprintf("bigzone=%d", big), func(b *testing.B) {
			l := newLocal(1, 0)
			for i := range 20000 {
				l.core.AddNode(testNode(fmt.Sprint("z-", i), fmt.Sprint("zone-", i)))
			}
			for i := range big {
				l.core.AddNode(testNode(fmt.Sprint("big-", i), "zone-big"))
			}
			if _, err := l.Publish(); err != nil {
				b.Fatal(err)
			}
			a, m := testNode("z-10000", "zone-10000"), testNode("z-10000", "zone-moved")
			runtime.GC()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				l.core.UpdateNode(a, m)
				if _, err := l.Publish(); err != nil {
					b.Fatal(err)
				}
				l.core.UpdateNode(m, a)
				if _, err := l.Publish(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(2*b.N), "ns/move")
		})
	}
}

// A node entry holds at most nodeinfo.MaxPodsPerNode pods: at the bound,
// with every pod at nodeinfo.MaxPodQuantity millicores, the published
// total is exact (no wrap); one pod more, assumed, added, or confirmed
// there from another node, is refused with ErrTooManyPods and changes
// nothing; confirming an assumed pod on its own full node (a swap) and
// adding after a removal are accepted.
func TestPodsPerNodeBound(t *testing.T) {
	l := newLocal(2, 0)
	l.core.AddNode(testNode("full", "z"))
	l.core.AddNode(testNode("other", "z"))
	containers := []v1.Container{{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
		v1.ResourceCPU: *resource.NewMilliQuantity(nodeinfo.MaxPodQuantity, resource.DecimalSI)}}}}
	mk := func(uid, node string) *nodeinfo.PodInfo {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: uid, UID: types.UID(uid)}, Spec: v1.PodSpec{NodeName: node, Containers: containers}}
		pi, err := nodeinfo.NewPodInfo(p)
		require.NoError(t, err)
		return pi
	}
	assumed := mk("p0", "full")
	require.NoError(t, l.core.AssumePod(assumed))
	for i := 1; i < nodeinfo.MaxPodsPerNode; i++ {
		require.NoError(t, l.core.AddPod(mk(fmt.Sprint("p", i), "full")))
	}
	elsewhere := mk("x", "other")
	require.NoError(t, l.core.AssumePod(elsewhere))
	s, err := l.Publish()
	require.NoError(t, err)
	ni, err := s.Get("full")
	require.NoError(t, err)
	require.Equal(t, nodeinfo.MaxPodsPerNode, ni.NumPods())
	require.Equal(t, int64(nodeinfo.MaxPodsPerNode)*nodeinfo.MaxPodQuantity, ni.Requested().MilliCPU)

	for _, tc := range []struct {
		op   string
		call func() error
	}{
		{"AssumePod", func() error { return l.core.AssumePod(mk("extra", "full")) }},
		{"AddPod", func() error { return l.core.AddPod(mk("extra", "full")) }},
		{"AddPod confirming on the full node", func() error { return l.core.AddPod(mk("x", "full")) }},
	} {
		err := tc.call()
		require.ErrorIs(t, err, ErrTooManyPods, tc.op)
		require.ErrorIs(t, err, nodeinfo.ErrQuantityOverflow, tc.op)
		var pe *PodError
		require.ErrorAs(t, err, &pe, tc.op)
		require.Equal(t, "full", pe.Node, tc.op)
		require.False(t, l.core.Dirty(), "%s changed state", tc.op)
	}
	s, err = l.Publish()
	require.NoError(t, err)
	e, ok := s.Pod("x")
	require.True(t, ok)
	require.True(t, e.Assumed)
	require.Equal(t, "other", e.Pod.Spec.NodeName)
	_, ok = s.Pod("extra")
	require.False(t, ok)

	// A confirmation on the pod's own full node swaps it: accepted.
	require.NoError(t, l.core.AddPod(mk("p0", "full")))
	// After a removal there is room for one.
	require.NoError(t, l.core.RemovePod("p1", mk("p1", "full").Pod()))
	require.NoError(t, l.core.AddPod(mk("x", "full")))
	require.ErrorIs(t, l.core.AddPod(mk("extra", "full")), ErrTooManyPods)
	s, err = l.Publish()
	require.NoError(t, err)
	ni, err = s.Get("full")
	require.NoError(t, err)
	require.Equal(t, nodeinfo.MaxPodsPerNode, ni.NumPods())
	require.Equal(t, int64(nodeinfo.MaxPodsPerNode)*nodeinfo.MaxPodQuantity, ni.Requested().MilliCPU)
	ni, err = s.Get("other")
	require.NoError(t, err)
	require.Zero(t, ni.NumPods())
}

// requireShadowCounts checks the counts the core keeps per entry (pods,
// affinity, anti-affinity and non-host-scoped anti-affinity pods, PVC
// references) against the NodeState
// the entry's shard holds: the two are kept by the same ops for different
// readers (see entry), and must never disagree after a publication.
func requireShadowCounts(t *testing.T, l *local, when string) {
	t.Helper()
	for name, e := range l.core.nodes {
		if e.deleted {
			continue
		}
		ni := l.shards[e.shard].Get(e.slot)
		require.NotNil(t, ni, "%s: entry %q has no shard state", when, name)
		require.Equal(t, ni.NumPods(), e.pods, "%s: %q pods", when, name)
		require.Equal(t, ni.NumPodsWithAffinity(), e.aff, "%s: %q affinity pods", when, name)
		require.Equal(t, ni.NumPodsWithRequiredAntiAffinity(), e.anti, "%s: %q anti-affinity pods", when, name)
		require.Equal(t, ni.NumPodsWithRequiredNonHostScopedAntiAffinity(), e.nonHost, "%s: %q non-host-scoped anti-affinity pods", when, name)
		want := e.pvc
		if want == nil {
			want = map[string]int{}
		}
		got := ni.PVCRefCounts()
		if got == nil {
			got = map[string]int{}
		}
		require.Equal(t, want, got, "%s: %q PVC references", when, name)
	}
}
