package schedcache_test

// Ports of upstream's snapshot tests (k8s.io/kubernetes v1.35.4,
// pkg/scheduler/backend/cache: TestSchedulerCache_UpdateSnapshot and
// TestSchedulerCache_updateNodeInfoSnapshotList from cache_test.go, and
// snapshot_test.go), plus the snapshot-related worked examples of
// docs/upstream-semantics.md (sections 3.1, 3.5, 5.3, 6).
//
// schedcache deviations that change what is asserted (see the semantics
// doc and the package docs): snapshots are immutable, so a NodeInfo taken
// from a snapshot never changes; the node list always follows the current
// zone-tree order (upstream refreshes it only on membership changes); and
// NewSnapshot lists its entries by name (upstream: Go map order).

import (
	"fmt"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/schedcache/schedcache"
)

// upCompareSnapshotWithCache is upstream's compareCacheWithNodeInfoSnapshot:
// the snapshot holds a clone of exactly the cache entries that have a node
// object, lists each of them once, and derives the affinity lists and the
// used-PVC set from the list.
func upCompareSnapshotWithCache(t *testing.T, c *schedcache.Cache, snap *schedcache.Snapshot) {
	t.Helper()
	d, err := c.Dump()
	require.NoError(t, err)
	var withNode []string
	for name, ni := range d.Nodes {
		got, err := snap.Get(name)
		if ni.Node() == nil {
			require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound, "Get(%q) of a nodeless entry", name)
			continue
		}
		withNode = append(withNode, name)
		require.NoError(t, err, "Get(%q)", name)
		require.Equal(t, upNodeFP(ni), upNodeFP(got), "snapshot entry %q is a clone of the cache entry", name)
	}
	sort.Strings(withNode)
	names := upListNames(t, snap)
	sorted := append([]string{}, names...)
	sort.Strings(sorted)
	if withNode == nil {
		withNode = []string{}
	}
	require.Equal(t, withNode, sorted, "List() holds every node of the cache once")
	require.NoError(t, snap.Err())

	list, err := snap.List()
	require.NoError(t, err)
	wantAff, wantAnti, wantPVC := []string{}, []string{}, map[string]bool{}
	for _, ni := range list {
		if ni.NumPodsWithAffinity() > 0 {
			wantAff = append(wantAff, ni.Node().Name)
		}
		if ni.NumPodsWithRequiredAntiAffinity() > 0 {
			wantAnti = append(wantAnti, ni.Node().Name)
		}
		for k := range ni.PVCRefCounts() {
			wantPVC[k] = true
		}
	}
	aff, err := snap.HavePodsWithAffinityList()
	require.NoError(t, err)
	require.Equal(t, wantAff, upNodeNames(aff), "HavePodsWithAffinityList()")
	require.Equal(t, len(wantAff), snap.NumNodesWithAffinity())
	anti, err := snap.HavePodsWithRequiredAntiAffinityList()
	require.NoError(t, err)
	require.Equal(t, wantAnti, upNodeNames(anti), "HavePodsWithRequiredAntiAffinityList()")
	require.Equal(t, len(wantAnti), snap.NumNodesWithRequiredAntiAffinity())
	pvcs := []string{}
	for k := range wantPVC {
		pvcs = append(pvcs, k)
		require.True(t, snap.IsPVCUsedByPods(k), "IsPVCUsedByPods(%q)", k)
	}
	sort.Strings(pvcs)
	require.Equal(t, pvcs, upUsedPVCs(snap), "used-PVC set")
	require.Equal(t, len(pvcs), snap.NumUsedPVCs())
}

// ---------------------------------------------------------------------------
// TestSchedulerCache_UpdateSnapshot
// ---------------------------------------------------------------------------

type upSnapEnv struct {
	c                            *schedcache.Cache
	snap                         *schedcache.Snapshot // the caller-owned snapshot upstream keeps
	nodes, updatedNodes          []*v1.Node
	pods, updatedPods            []*v1.Pod
	podsWithAffinity, podsWithPV []*v1.Pod
}

type upSnapOp struct {
	desc string
	run  func(t *testing.T, e *upSnapEnv)
}

func upSnapEnvFixtures() *upSnapEnv {
	e := &upSnapEnv{}
	for i := 0; i < 10; i++ {
		n := upNode(fmt.Sprintf("test-node%d", i), map[v1.ResourceName]string{v1.ResourceCPU: "1000m", v1.ResourceMemory: "100m"})
		e.nodes = append(e.nodes, n)
		u := n.DeepCopy()
		u.Status.Allocatable = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2000m"), v1.ResourceMemory: resource.MustParse("500m")}
		e.updatedNodes = append(e.updatedNodes, u)
	}
	for i := 0; i < 20; i++ {
		p := upPod(fmt.Sprintf("test-pod%d", i), "test-ns", fmt.Sprintf("test-puid%d", i), fmt.Sprintf("test-node%d", i%10))
		e.pods = append(e.pods, p)
		u := p.DeepCopy()
		priority := int32(1000)
		u.Spec.Priority = &priority
		e.updatedPods = append(e.updatedPods, u)
	}
	for i := 0; i < 2; i++ {
		p := upPod(fmt.Sprintf("p-affinity-%d", i), "test-ns", fmt.Sprintf("puid-affinity-%d", i), fmt.Sprintf("test-node%d", i))
		e.podsWithAffinity = append(e.podsWithAffinity, upWithPodAffinity(p, "", upExistsSelector("foo")))
	}
	for i := 0; i < 8; i++ {
		p := upPod(fmt.Sprintf("p-pvc-%d", i), "test-ns", fmt.Sprintf("puid-pvc-%d", i), fmt.Sprintf("test-node%d", i%2))
		e.podsWithPV = append(e.podsWithPV, upWithPVC(p, fmt.Sprintf("test-pvc%d", i%4)))
	}
	return e
}

func upAddNode(i int) upSnapOp {
	return upSnapOp{fmt.Sprintf("addNode(%d)", i), func(t *testing.T, e *upSnapEnv) {
		_, err := e.c.AddNode(upLog, e.nodes[i])
		require.NoError(t, err)
	}}
}

func upRemoveNode(i int) upSnapOp {
	return upSnapOp{fmt.Sprintf("removeNode(%d)", i), func(t *testing.T, e *upSnapEnv) {
		require.NoError(t, e.c.RemoveNode(upLog, e.nodes[i]))
	}}
}

func upUpdateNode(i int) upSnapOp {
	return upSnapOp{fmt.Sprintf("updateNode(%d)", i), func(t *testing.T, e *upSnapEnv) {
		_, err := e.c.UpdateNode(upLog, e.nodes[i], e.updatedNodes[i])
		require.NoError(t, err)
	}}
}

func upPodOp(desc string, pick func(e *upSnapEnv) []*v1.Pod, i int, do func(c *schedcache.Cache, p *v1.Pod) error) upSnapOp {
	return upSnapOp{fmt.Sprintf("%s(%d)", desc, i), func(t *testing.T, e *upSnapEnv) {
		require.NoError(t, do(e.c, pick(e)[i]))
	}}
}

func upAddP(c *schedcache.Cache, p *v1.Pod) error    { return c.AddPod(upLog, p) }
func upRemoveP(c *schedcache.Cache, p *v1.Pod) error { return c.RemovePod(upLog, p) }
func upPlain(e *upSnapEnv) []*v1.Pod                 { return e.pods }
func upAff(e *upSnapEnv) []*v1.Pod                   { return e.podsWithAffinity }
func upPVC(e *upSnapEnv) []*v1.Pod                   { return e.podsWithPV }

func upAddPod(i int) upSnapOp { return upPodOp("addPod", upPlain, i, upAddP) }
func upAddPodWithAffinity(i int) upSnapOp {
	return upPodOp("addPodWithAffinity", upAff, i, upAddP)
}
func upAddPodWithPVC(i int) upSnapOp { return upPodOp("addPodWithPVC", upPVC, i, upAddP) }
func upRemovePod(i int) upSnapOp     { return upPodOp("removePod", upPlain, i, upRemoveP) }
func upRemovePodWithAffinity(i int) upSnapOp {
	return upPodOp("removePodWithAffinity", upAff, i, upRemoveP)
}
func upRemovePodWithPVC(i int) upSnapOp { return upPodOp("removePodWithPVC", upPVC, i, upRemoveP) }

func upUpdatePod(i int) upSnapOp {
	return upSnapOp{fmt.Sprintf("updatePod(%d)", i), func(t *testing.T, e *upSnapEnv) {
		require.NoError(t, e.c.UpdatePod(upLog, e.pods[i], e.updatedPods[i]))
	}}
}

func upUpdateSnapshot() upSnapOp {
	return upSnapOp{"updateSnapshot()", func(t *testing.T, e *upSnapEnv) {
		require.NoError(t, e.c.UpdateSnapshot(upLog, e.snap))
		upCompareSnapshotWithCache(t, e.c, e.snap)
	}}
}

func upNodeIdx(idx ...int) []string {
	out := []string{}
	for _, i := range idx {
		out = append(out, fmt.Sprintf("test-node%d", i))
	}
	return out
}

func TestUpstreamSchedulerCacheUpdateSnapshot(t *testing.T) {
	tests := []struct {
		name       string
		operations []upSnapOp
		// Upstream's expected headNode list: cache entries, most recently
		// updated first (here: by descending Generation).
		recency []int
		// The list order after the final UpdateSnapshot: the zone tree
		// order (all nodes unlabelled: insertion order into the "" zone).
		list []int
		// The caller's snapshot as of its last update in operations.
		havePodsWithAffinity int
		usedPVCSet           []string
	}{{
		name:       "Empty cache",
		operations: []upSnapOp{},
		recency:    []int{}, list: []int{},
		usedPVCSet: []string{},
	}, {
		name:       "Single node",
		operations: []upSnapOp{upAddNode(1)},
		recency:    []int{1}, list: []int{1},
		usedPVCSet: []string{},
	}, {
		name:       "Add node, remove it, add it again",
		operations: []upSnapOp{upAddNode(1), upUpdateSnapshot(), upRemoveNode(1), upAddNode(1)},
		recency:    []int{1}, list: []int{1},
		usedPVCSet: []string{},
	}, {
		name:       "Add node and remove it in the same cycle, add it again",
		operations: []upSnapOp{upAddNode(1), upUpdateSnapshot(), upAddNode(2), upRemoveNode(1)},
		recency:    []int{2}, list: []int{2},
		usedPVCSet: []string{},
	}, {
		name: "Add a few nodes, and snapshot in the middle",
		operations: []upSnapOp{upAddNode(0), upUpdateSnapshot(), upAddNode(1), upUpdateSnapshot(), upAddNode(2),
			upUpdateSnapshot(), upAddNode(3)},
		recency: []int{3, 2, 1, 0}, list: []int{0, 1, 2, 3},
		usedPVCSet: []string{},
	}, {
		name:       "Add a few nodes, and snapshot in the end",
		operations: []upSnapOp{upAddNode(0), upAddNode(2), upAddNode(5), upAddNode(6)},
		recency:    []int{6, 5, 2, 0}, list: []int{0, 2, 5, 6},
		usedPVCSet: []string{},
	}, {
		name:       "Update some nodes",
		operations: []upSnapOp{upAddNode(0), upAddNode(1), upAddNode(5), upUpdateSnapshot(), upUpdateNode(1)},
		recency:    []int{1, 5, 0}, list: []int{0, 1, 5},
		usedPVCSet: []string{},
	}, {
		name: "Add a few nodes, and remove all of them",
		operations: []upSnapOp{upAddNode(0), upAddNode(2), upAddNode(5), upAddNode(6), upUpdateSnapshot(),
			upRemoveNode(0), upRemoveNode(2), upRemoveNode(5), upRemoveNode(6)},
		recency: []int{}, list: []int{},
		usedPVCSet: []string{},
	}, {
		name: "Add a few nodes, and remove some of them",
		operations: []upSnapOp{upAddNode(0), upAddNode(2), upAddNode(5), upAddNode(6), upUpdateSnapshot(),
			upRemoveNode(0), upRemoveNode(6)},
		recency: []int{5, 2}, list: []int{2, 5},
		usedPVCSet: []string{},
	}, {
		name: "Add a few nodes, remove all of them, and add more",
		operations: []upSnapOp{upAddNode(2), upAddNode(5), upAddNode(6), upUpdateSnapshot(),
			upRemoveNode(2), upRemoveNode(5), upRemoveNode(6), upUpdateSnapshot(),
			upAddNode(7), upAddNode(9)},
		recency: []int{9, 7}, list: []int{7, 9},
		usedPVCSet: []string{},
	}, {
		name:       "Update nodes in particular order",
		operations: []upSnapOp{upAddNode(8), upUpdateNode(2), upUpdateNode(8), upUpdateSnapshot(), upAddNode(1)},
		recency:    []int{1, 8, 2}, list: []int{8, 2, 1},
		usedPVCSet: []string{},
	}, {
		name:       "Add some nodes and some pods",
		operations: []upSnapOp{upAddNode(0), upAddNode(2), upAddNode(8), upUpdateSnapshot(), upAddPod(8), upAddPod(2)},
		recency:    []int{2, 8, 0}, list: []int{0, 2, 8},
		usedPVCSet: []string{},
	}, {
		name:       "Updating a pod moves its node to the head",
		operations: []upSnapOp{upAddNode(0), upAddPod(0), upAddNode(2), upAddNode(4), upUpdatePod(0)},
		recency:    []int{0, 4, 2}, list: []int{0, 2, 4},
		usedPVCSet: []string{},
	}, {
		name:       "Add pod before its node",
		operations: []upSnapOp{upAddNode(0), upAddPod(1), upUpdatePod(1), upAddNode(1)},
		recency:    []int{1, 0}, list: []int{0, 1},
		usedPVCSet: []string{},
	}, {
		name: "Remove node before its pods",
		operations: []upSnapOp{upAddNode(0), upAddNode(1), upAddPod(1), upAddPod(11), upUpdateSnapshot(),
			upRemoveNode(1), upUpdateSnapshot(),
			upUpdatePod(1), upUpdatePod(11), upRemovePod(1), upRemovePod(11)},
		recency: []int{0}, list: []int{0},
		usedPVCSet: []string{},
	}, {
		name:       "Add Pods with affinity",
		operations: []upSnapOp{upAddNode(0), upAddPodWithAffinity(0), upUpdateSnapshot(), upAddNode(1)},
		recency:    []int{1, 0}, list: []int{0, 1},
		havePodsWithAffinity: 1,
		usedPVCSet:           []string{},
	}, {
		name:       "Add Pods with PVC",
		operations: []upSnapOp{upAddNode(0), upAddPodWithPVC(0), upUpdateSnapshot(), upAddNode(1)},
		recency:    []int{1, 0}, list: []int{0, 1},
		usedPVCSet: []string{"test-ns/test-pvc0"},
	}, {
		name: "Add multiple nodes with pods with affinity",
		operations: []upSnapOp{upAddNode(0), upAddPodWithAffinity(0), upUpdateSnapshot(), upAddNode(1),
			upAddPodWithAffinity(1), upUpdateSnapshot()},
		recency: []int{1, 0}, list: []int{0, 1},
		havePodsWithAffinity: 2,
		usedPVCSet:           []string{},
	}, {
		name: "Add multiple nodes with pods with PVC",
		operations: []upSnapOp{upAddNode(0), upAddPodWithPVC(0), upUpdateSnapshot(), upAddNode(1),
			upAddPodWithPVC(1), upUpdateSnapshot()},
		recency: []int{1, 0}, list: []int{0, 1},
		usedPVCSet: []string{"test-ns/test-pvc0", "test-ns/test-pvc1"},
	}, {
		name: "Add then Remove pods with affinity",
		operations: []upSnapOp{upAddNode(0), upAddNode(1), upAddPodWithAffinity(0), upUpdateSnapshot(),
			upRemovePodWithAffinity(0), upUpdateSnapshot()},
		recency: []int{0, 1}, list: []int{0, 1},
		havePodsWithAffinity: 0,
		usedPVCSet:           []string{},
	}, {
		name: "Add then Remove pod with PVC",
		operations: []upSnapOp{upAddNode(0), upAddPodWithPVC(0), upUpdateSnapshot(), upRemovePodWithPVC(0),
			upAddPodWithPVC(2), upUpdateSnapshot()},
		recency: []int{0}, list: []int{0},
		usedPVCSet: []string{"test-ns/test-pvc2"},
	}, {
		name: "Add then Remove pod with PVC and add same pod again",
		operations: []upSnapOp{upAddNode(0), upAddPodWithPVC(0), upUpdateSnapshot(), upRemovePodWithPVC(0),
			upAddPodWithPVC(0), upUpdateSnapshot()},
		recency: []int{0}, list: []int{0},
		usedPVCSet: []string{"test-ns/test-pvc0"},
	}, {
		name: "Add and Remove multiple pods with PVC with same ref count length different content",
		operations: []upSnapOp{upAddNode(0), upAddNode(1), upAddPodWithPVC(0), upAddPodWithPVC(1), upUpdateSnapshot(),
			upRemovePodWithPVC(0), upRemovePodWithPVC(1), upAddPodWithPVC(2), upAddPodWithPVC(3), upUpdateSnapshot()},
		recency: []int{1, 0}, list: []int{0, 1},
		usedPVCSet: []string{"test-ns/test-pvc2", "test-ns/test-pvc3"},
	}, {
		name: "Add and Remove multiple pods with PVC",
		operations: []upSnapOp{upAddNode(0), upAddNode(1), upAddPodWithPVC(0), upAddPodWithPVC(1), upAddPodWithPVC(2), upUpdateSnapshot(),
			upRemovePodWithPVC(0), upRemovePodWithPVC(1), upUpdateSnapshot(), upAddPodWithPVC(0), upUpdateSnapshot(),
			upAddPodWithPVC(3), upAddPodWithPVC(4), upAddPodWithPVC(5), upUpdateSnapshot(),
			upRemovePodWithPVC(0), upRemovePodWithPVC(3), upRemovePodWithPVC(4), upUpdateSnapshot()},
		recency: []int{0, 1}, list: []int{0, 1},
		usedPVCSet: []string{"test-ns/test-pvc1", "test-ns/test-pvc2"},
	}}

	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := upSnapEnvFixtures()
			e.c = upNew(t, schedcache.WithTTL(0))
			e.snap = schedcache.NewEmptySnapshot()
			for _, op := range tc.operations {
				op.run(t, e)
			}

			require.Equal(t, len(tc.recency), e.c.NodeCount(), "number of cache entries")
			require.Equal(t, upNodeIdx(tc.recency...), upRecency(t, e.c), "cache entries, most recently updated first")

			// The caller's snapshot as of its last update.
			aff, err := e.snap.HavePodsWithAffinityList()
			require.NoError(t, err)
			require.Len(t, aff, tc.havePodsWithAffinity, "HavePodsWithAffinityList()")
			require.Equal(t, tc.usedPVCSet, upUsedPVCs(e.snap), "used-PVC set")
			for _, k := range tc.usedPVCSet {
				require.True(t, e.snap.IsPVCUsedByPods(k), k)
			}

			// Always update the snapshot at the end of operations and compare it.
			require.NoError(t, e.c.UpdateSnapshot(upLog, e.snap))
			upCompareSnapshotWithCache(t, e.c, e.snap)
			require.Equal(t, upNodeIdx(tc.list...), upListNames(t, e.snap), "List() in zone-tree order")
			// The published snapshot is the same view.
			require.Equal(t, upSnapFP(e.c.Snapshot()), upSnapFP(e.snap))
		})
	}
}

// ---------------------------------------------------------------------------
// TestSchedulerCache_updateNodeInfoSnapshotList (zone order)
// ---------------------------------------------------------------------------

func TestUpstreamSchedulerCacheUpdateNodeInfoSnapshotList(t *testing.T) {
	// zone 0 -> node-0, node-1; zone 1 -> node-2 ... node-7.
	var nodes []*v1.Node
	for zone, nb := range []int{2, 6} {
		for j := 0; j < nb; j++ {
			nodes = append(nodes, upZoneNode(fmt.Sprintf("node-%d", len(nodes)), fmt.Sprintf("region-%d", zone), fmt.Sprintf("zone-%d", zone)))
		}
	}
	const snap = -1 // an updateSnapshot step
	tests := []struct {
		name     string
		steps    []int // node index to add, or snap
		expected []string
	}{
		{name: "Empty cache", steps: nil, expected: []string{}},
		{name: "Single node", steps: []int{0}, expected: []string{"node-0"}},
		{name: "Two nodes", steps: []int{0, snap, 1}, expected: []string{"node-0", "node-1"}},
		{
			name:     "bug 91601, two nodes, update the snapshot and add two nodes in different zones",
			steps:    []int{2, 3, snap, 4, 0},
			expected: []string{"node-2", "node-0", "node-3", "node-4"},
		},
		{
			name:     "bug 91601, 6 nodes, one in a different zone",
			steps:    []int{2, 3, 4, 5, snap, 6, 0},
			expected: []string{"node-2", "node-0", "node-3", "node-4", "node-5", "node-6"},
		},
		{
			name:     "bug 91601, 7 nodes, two in a different zone",
			steps:    []int{2, snap, 3, 4, snap, 5, 6, 0, 1},
			expected: []string{"node-2", "node-0", "node-3", "node-1", "node-4", "node-5", "node-6"},
		},
		{
			name:     "bug 91601, 7 nodes, two in a different zone, different zone order",
			steps:    []int{2, 1, snap, 3, 4, snap, 5, 6, 0},
			expected: []string{"node-2", "node-1", "node-3", "node-0", "node-4", "node-5", "node-6"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := upNew(t)
			s := schedcache.NewEmptySnapshot()
			for _, step := range tc.steps {
				if step == snap {
					require.NoError(t, c.UpdateSnapshot(upLog, s))
					upCompareSnapshotWithCache(t, c, s)
					continue
				}
				_, err := c.AddNode(upLog, nodes[step])
				require.NoError(t, err)
			}
			require.NoError(t, c.UpdateSnapshot(upLog, s))
			upCompareSnapshotWithCache(t, c, s)
			require.Equal(t, tc.expected, upListNames(t, s))
		})
	}
}

// TestUpstreamZoneOrderWorkedExample is the worked example of semantics
// section 6, driven through the cache. schedcache lists the current tree
// order at once (upstream keeps the stale order in a reused snapshot until
// the membership changes); snapshots taken earlier keep their order.
func TestUpstreamZoneOrderWorkedExample(t *testing.T) {
	nodes := map[string]*v1.Node{}
	zoned := func(name, zone string) *v1.Node {
		n := upZoneNode(name, "", zone)
		nodes[name] = n
		return n
	}
	add := func(name, zone string) func(t *testing.T, c *schedcache.Cache) {
		return func(t *testing.T, c *schedcache.Cache) {
			_, err := c.AddNode(upLog, zoned(name, zone))
			require.NoError(t, err)
		}
	}
	move := func(name, zone string) func(t *testing.T, c *schedcache.Cache) {
		return func(t *testing.T, c *schedcache.Cache) {
			old := nodes[name]
			_, err := c.UpdateNode(upLog, old, zoned(name, zone))
			require.NoError(t, err)
		}
	}
	remove := func(name string) func(t *testing.T, c *schedcache.Cache) {
		return func(t *testing.T, c *schedcache.Cache) {
			require.NoError(t, c.RemoveNode(upLog, nodes[name]))
		}
	}
	steps := []struct {
		desc       string
		do         []func(t *testing.T, c *schedcache.Cache)
		want       []string
		wantReused []string // a long-lived snapshot's list, if it differs (5.2: the order is rebuilt only when nodes join or leave)
	}{{
		desc: "add a1(A) b1(B) a2(A) c1(C) a3(A) c2(C) a4(A)",
		do:   []func(*testing.T, *schedcache.Cache){add("a1", "A"), add("b1", "B"), add("a2", "A"), add("c1", "C"), add("a3", "A"), add("c2", "C"), add("a4", "A")},
		want: []string{"a1", "b1", "c1", "a2", "c2", "a3", "a4"},
	}, {
		desc: "move a1 to zone C with UpdateNode",
		do:   []func(*testing.T, *schedcache.Cache){move("a1", "C")},
		want: []string{"a2", "b1", "c1", "a3", "c2", "a4", "a1"},
		// Upstream's reused snapshot keeps its order (verified upstream):
		// no node joined or left.
		wantReused: []string{"a1", "b1", "c1", "a2", "c2", "a3", "a4"},
	}, {
		desc: "add z1(Z)",
		do:   []func(*testing.T, *schedcache.Cache){add("z1", "Z")},
		want: []string{"a2", "b1", "c1", "z1", "a3", "c2", "a4", "a1"},
	}, {
		desc: "remove b1: zone B disappears",
		do:   []func(*testing.T, *schedcache.Cache){remove("b1")},
		want: []string{"a2", "c1", "z1", "a3", "c2", "a4", "a1"},
	}, {
		desc: "add b1(B) back: zone B is now last",
		do:   []func(*testing.T, *schedcache.Cache){add("b1", "B")},
		want: []string{"a2", "c1", "z1", "b1", "a3", "c2", "a4", "a1"},
	}}

	c := upNew(t)
	reused := schedcache.NewEmptySnapshot()
	type kept struct {
		snap *schedcache.Snapshot
		want []string
	}
	var history []kept
	for _, s := range steps {
		for _, do := range s.do {
			do(t, c)
		}
		require.Equal(t, s.want, upListNames(t, c.Snapshot()), "%s: published snapshot", s.desc)
		require.NoError(t, c.UpdateSnapshot(upLog, reused), s.desc)
		wantReused := s.want
		if s.wantReused != nil {
			wantReused = s.wantReused
		}
		require.Equal(t, wantReused, upListNames(t, reused), "%s: reused snapshot", s.desc)
		fresh := schedcache.NewEmptySnapshot()
		require.NoError(t, c.UpdateSnapshot(upLog, fresh), s.desc)
		require.Equal(t, s.want, upListNames(t, fresh), "%s: fresh snapshot", s.desc)
		upCompareSnapshotWithCache(t, c, fresh)
		history = append(history, kept{c.Snapshot(), s.want})
	}
	for i, h := range history {
		require.Equal(t, h.want, upListNames(t, h.snap), "snapshot of step %d changed afterwards", i)
	}
}

// TestUpstreamAddNodeTwiceInDifferentZones: AddNode inserts into the tree
// (semantics 3.1 step 2); the same name under another zone key ends up in
// the tree twice (verified upstream: list [d d]).
func TestUpstreamAddNodeTwiceInDifferentZones(t *testing.T) {
	c := upNew(t)
	first := upZoneNode("d", "", "A")
	second := upZoneNode("d", "", "B")
	_, err := c.AddNode(upLog, first)
	require.NoError(t, err)
	_, err = c.AddNode(upLog, first) // same zone: no-op in the tree
	require.NoError(t, err)
	require.Equal(t, []string{"d"}, upListNames(t, c.Snapshot()))

	ni, err := c.AddNode(upLog, second)
	require.NoError(t, err)
	require.Same(t, second, ni.Node())
	s := schedcache.NewEmptySnapshot()
	require.NoError(t, c.UpdateSnapshot(upLog, s))
	require.Equal(t, []string{"d", "d"}, upListNames(t, s))
	require.Same(t, s.At(0), s.At(1), "both list positions are the one entry")
	require.Equal(t, 1, c.NodeCount())
}

// ---------------------------------------------------------------------------
// TestGetNodeImageStates, TestCreateImageExistenceMap
// ---------------------------------------------------------------------------

// upImageNode returns a node listing each image (one name each) with its size.
func upImageNode(name string, images ...v1.ContainerImage) *v1.Node {
	n := upNode(name, nil)
	n.Status.Images = images
	return n
}

func upImage(name string, size int64) v1.ContainerImage {
	return v1.ContainerImage{Names: []string{name}, SizeBytes: size}
}

// TestUpstreamGetNodeImageStates: the image states of node-0 given which
// nodes report each image (upstream's imageExistenceMap, realised here by
// the images the other nodes list). Checked through NewSnapshot and through
// the cache (node-0 added last, so its clone sees every other node).
func TestUpstreamGetNodeImageStates(t *testing.T) {
	tests := []struct {
		node     *v1.Node
		others   []*v1.Node
		expected map[string]schedcache.ImageStateSummary
	}{{
		node: upImageNode("node-0", upImage("gcr.io/10:v1", 10*upMB), upImage("gcr.io/200:v1", 200*upMB)),
		// imageExistenceMap: gcr.io/10:v1 -> {node-0, node-1}, gcr.io/200:v1 -> {node-0}
		others: []*v1.Node{upImageNode("node-1", upImage("gcr.io/10:v1", 10*upMB))},
		expected: map[string]schedcache.ImageStateSummary{
			"gcr.io/10:v1":  {Size: 10 * upMB, NumNodes: 2},
			"gcr.io/200:v1": {Size: 200 * upMB, NumNodes: 1},
		},
	}, {
		node: upImageNode("node-0"),
		// imageExistenceMap: gcr.io/10:v1 -> {node-1}, gcr.io/200:v1 -> {}
		others:   []*v1.Node{upImageNode("node-1", upImage("gcr.io/10:v1", 10*upMB))},
		expected: map[string]schedcache.ImageStateSummary{},
	}}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("case_%d", i), func(t *testing.T) {
			all := append(append([]*v1.Node(nil), tc.others...), tc.node)
			got, err := schedcache.NewSnapshot(nil, all).Get(tc.node.Name)
			require.NoError(t, err)
			require.Equal(t, tc.expected, got.ImageStates(), "NewSnapshot")
			require.Equal(t, len(tc.expected), got.NumImageStates())

			c := upNew(t)
			for _, n := range tc.others {
				_, err := c.AddNode(upLog, n)
				require.NoError(t, err)
			}
			ni, err := c.AddNode(upLog, tc.node)
			require.NoError(t, err)
			require.Equal(t, tc.expected, ni.ImageStates(), "AddNode result")
			got, err = c.Snapshot().Get(tc.node.Name)
			require.NoError(t, err)
			require.Equal(t, tc.expected, got.ImageStates(), "cache snapshot")
		})
	}
}

// TestUpstreamCreateImageExistenceMap: the set of nodes reporting each image
// determines NumNodes in every node's image states (NewSnapshot).
func TestUpstreamCreateImageExistenceMap(t *testing.T) {
	tests := []struct {
		nodes    []*v1.Node
		expected map[string][]string // image -> nodes reporting it
	}{{
		nodes: []*v1.Node{
			upImageNode("node-0", upImage("gcr.io/10:v1", 10*upMB)),
			upImageNode("node-1", upImage("gcr.io/10:v1", 10*upMB), upImage("gcr.io/200:v1", 200*upMB)),
		},
		expected: map[string][]string{
			"gcr.io/10:v1":  {"node-0", "node-1"},
			"gcr.io/200:v1": {"node-1"},
		},
	}, {
		nodes: []*v1.Node{
			upImageNode("node-0"),
			upImageNode("node-1", upImage("gcr.io/10:v1", 10*upMB), upImage("gcr.io/200:v1", 200*upMB)),
		},
		expected: map[string][]string{
			"gcr.io/10:v1":  {"node-1"},
			"gcr.io/200:v1": {"node-1"},
		},
	}}
	for i, tc := range tests {
		t.Run(fmt.Sprintf("case_%d", i), func(t *testing.T) {
			s := schedcache.NewSnapshot(nil, tc.nodes)
			for _, n := range tc.nodes {
				want := map[string]schedcache.ImageStateSummary{}
				for image, holders := range tc.expected {
					for _, h := range holders {
						if h != n.Name {
							continue
						}
						for _, img := range n.Status.Images {
							if img.Names[0] == image {
								want[image] = schedcache.ImageStateSummary{Size: img.SizeBytes, NumNodes: len(holders)}
							}
						}
					}
				}
				require.Len(t, want, len(n.Status.Images), "fixture: %s lists exactly the images the map gives it", n.Name)
				got, err := s.Get(n.Name)
				require.NoError(t, err)
				require.Equal(t, want, got.ImageStates(), n.Name)
			}
		})
	}
}

// ---------------------------------------------------------------------------
// TestCreateUsedPVCSet, TestNewSnapshot
// ---------------------------------------------------------------------------

// upMakePod is st.MakePod().Name(name).Namespace(ns).UID(uid).Node(node).
// Upstream's snapshot fixtures have no UID; schedcache keys pods by UID, so
// the ports give each pod one (TestUpstreamNewSnapshotPodsWithoutUID keeps
// upstream's UID-less objects).
func upMakePod(name, ns, node string) *v1.Pod {
	return upPod(name, ns, ns+"/"+name+"@"+node, node)
}

func TestUpstreamCreateUsedPVCSet(t *testing.T) {
	tests := []struct {
		name     string
		pods     []*v1.Pod
		expected []string
	}{{
		name:     "empty pods list",
		pods:     []*v1.Pod{},
		expected: []string{},
	}, {
		name:     "pods not scheduled",
		pods:     []*v1.Pod{upMakePod("foo", "foo", ""), upMakePod("bar", "bar", "")},
		expected: []string{},
	}, {
		name:     "scheduled pods that do not use any PVC",
		pods:     []*v1.Pod{upMakePod("foo", "foo", "node-1"), upMakePod("bar", "bar", "node-2")},
		expected: []string{},
	}, {
		name: "scheduled pods that use PVC",
		pods: []*v1.Pod{
			upWithPVC(upMakePod("foo", "foo", "node-1"), "pvc1"),
			upWithPVC(upMakePod("bar", "bar", "node-2"), "pvc2"),
		},
		expected: []string{"bar/pvc2", "foo/pvc1"},
	}, {
		name: "unscheduled pods with PVC are not counted",
		pods: []*v1.Pod{
			upWithPVC(upMakePod("foo", "foo", ""), "pvc1"),
			upWithPVC(upMakePod("bar", "bar", "node-2"), "pvc2"),
		},
		expected: []string{"bar/pvc2"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := schedcache.NewSnapshot(tc.pods, nil)
			require.Equal(t, tc.expected, upUsedPVCs(s))
			require.Equal(t, len(tc.expected), s.NumUsedPVCs())
			for _, k := range tc.expected {
				require.True(t, s.IsPVCUsedByPods(k), k)
			}
			require.False(t, s.IsPVCUsedByPods("foo/unused"))
		})
	}
}

// upNewSnapshotFixtures are TestNewSnapshot's pods.
type upNewSnapshotFixtures struct {
	podWithAnnotations, podWithPort, podWithAntiAffinity *v1.Pod
	podsWithAffinity, podsWithPVCs                       []*v1.Pod
}

func upNewSnapshotPods(mk func(name, ns, node string) *v1.Pod) upNewSnapshotFixtures {
	f := upNewSnapshotFixtures{}
	f.podWithAnnotations = mk("foo", "ns", "node-1")
	f.podWithAnnotations.Annotations = map[string]string{"custom": "annotation"}
	f.podWithPort = mk("foo", "foo", "node-0")
	f.podWithPort.Spec.Containers = []v1.Container{{Ports: []v1.ContainerPort{{HostPort: 8080}}}}
	f.podWithAntiAffinity = upWithPodAntiAffinity(mk("baz", "ns", "node-0"), "another",
		&metav1.LabelSelector{MatchLabels: map[string]string{"another": "label"}})
	f.podsWithAffinity = []*v1.Pod{
		upWithPodAffinity(mk("bar", "ns", "node-2"), "baz", &metav1.LabelSelector{MatchLabels: map[string]string{"baz": "qux"}}),
		upWithPodAffinity(mk("bar", "ns", "node-0"), "key", &metav1.LabelSelector{MatchLabels: map[string]string{"key": "value"}}),
	}
	f.podsWithPVCs = []*v1.Pod{
		upWithPVC(mk("foo", "foo", "node-0"), "pvc0"),
		upWithPVC(mk("bar", "bar", "node-1"), "pvc1"),
		upWithPVC(mk("baz", "baz", "node-2"), "pvc2"),
	}
	return f
}

type upNewSnapshotCase struct {
	name                         string
	pods                         []*v1.Pod
	nodes                        []*v1.Node
	expectedPods                 [][]*v1.Pod // per node, in Pods() order
	expectedNumNodes             int
	expectedPodsWithAffinity     int // nodes in HavePodsWithAffinityList
	expectedPodsWithAntiAffinity int // nodes in HavePodsWithRequiredAntiAffinityList
	expectedUsedPVCSet           []string
}

func upNewSnapshotCases(f upNewSnapshotFixtures) []upNewSnapshotCase {
	named := func(name string, labels map[string]string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	return []upNewSnapshotCase{{
		name:               "no pods no nodes",
		expectedUsedPVCSet: []string{},
	}, {
		name:               "single pod single node",
		pods:               []*v1.Pod{f.podWithPort},
		nodes:              []*v1.Node{named("node-0", nil)},
		expectedPods:       [][]*v1.Pod{{f.podWithPort}},
		expectedNumNodes:   1,
		expectedUsedPVCSet: []string{},
	}, {
		name:               "multiple nodes, pods with PVCs",
		pods:               f.podsWithPVCs,
		nodes:              []*v1.Node{named("node-0", nil), named("node-1", nil), named("node-2", nil)},
		expectedPods:       [][]*v1.Pod{{f.podsWithPVCs[0]}, {f.podsWithPVCs[1]}, {f.podsWithPVCs[2]}},
		expectedNumNodes:   3,
		expectedUsedPVCSet: []string{"bar/pvc1", "baz/pvc2", "foo/pvc0"},
	}, {
		name:                     "multiple nodes, pod with affinity",
		pods:                     []*v1.Pod{f.podWithAnnotations, f.podsWithAffinity[0]},
		nodes:                    []*v1.Node{named("node-0", nil), named("node-1", nil), named("node-2", map[string]string{"baz": "qux"})},
		expectedPods:             [][]*v1.Pod{{}, {f.podWithAnnotations}, {f.podsWithAffinity[0]}},
		expectedNumNodes:         3,
		expectedPodsWithAffinity: 1,
		expectedUsedPVCSet:       []string{},
	}, {
		name:                         "multiple nodes, pod with affinity, pod with anti-affinity",
		pods:                         []*v1.Pod{f.podsWithAffinity[1], f.podWithAntiAffinity},
		nodes:                        []*v1.Node{named("node-0", map[string]string{"key": "value"}), named("node-1", map[string]string{"another": "label"})},
		expectedPods:                 [][]*v1.Pod{{f.podsWithAffinity[1], f.podWithAntiAffinity}, {}},
		expectedNumNodes:             2,
		expectedPodsWithAffinity:     1,
		expectedPodsWithAntiAffinity: 1,
		expectedUsedPVCSet:           []string{},
	}}
}

func upCheckNewSnapshot(t *testing.T, tc upNewSnapshotCase) {
	t.Helper()
	s := schedcache.NewSnapshot(tc.pods, tc.nodes)
	require.Equal(t, tc.expectedNumNodes, s.NumNodes())
	for i, node := range tc.nodes {
		info, err := s.Get(node.Name)
		require.NoError(t, err)
		require.NotNil(t, info)
		require.Same(t, node, info.Node())
		require.Equal(t, upPodNames(tc.expectedPods[i]), upInfoNames(info.Pods()), "pods of %s", node.Name)
		for j, p := range tc.expectedPods[i] {
			require.Same(t, p, info.PodAt(j).Pod(), "pod %d of %s", j, node.Name)
		}
	}
	affinityList, err := s.HavePodsWithAffinityList()
	require.NoError(t, err)
	require.Len(t, affinityList, tc.expectedPodsWithAffinity)
	antiAffinityList, err := s.HavePodsWithRequiredAntiAffinityList()
	require.NoError(t, err)
	require.Len(t, antiAffinityList, tc.expectedPodsWithAntiAffinity)
	for _, key := range tc.expectedUsedPVCSet {
		require.True(t, s.IsPVCUsedByPods(key), key)
	}
	require.Equal(t, tc.expectedUsedPVCSet, upUsedPVCs(s))
}

func TestUpstreamNewSnapshot(t *testing.T) {
	for _, tc := range upNewSnapshotCases(upNewSnapshotPods(upMakePod)) {
		t.Run(tc.name, func(t *testing.T) { upCheckNewSnapshot(t, tc) })
	}
}

// TestUpstreamNewSnapshotPodsWithoutUID runs TestNewSnapshot with
// upstream's own fixtures, whose pods have no UID. Semantics 5.3: NewSnapshot
// adds every pod to the entry for its node name; it is not a key-using
// method (1.1), so an empty UID must not drop a pod.
func TestUpstreamNewSnapshotPodsWithoutUID(t *testing.T) {
	noUID := func(name, ns, node string) *v1.Pod { return upPod(name, ns, "", node) }
	for _, tc := range upNewSnapshotCases(upNewSnapshotPods(noUID)) {
		t.Run(tc.name, func(t *testing.T) { upCheckNewSnapshot(t, tc) })
	}
	t.Run("used PVC set", func(t *testing.T) {
		s := schedcache.NewSnapshot([]*v1.Pod{
			upWithPVC(noUID("foo", "foo", "node-1"), "pvc1"),
			upWithPVC(noUID("bar", "bar", "node-2"), "pvc2"),
		}, nil)
		require.Equal(t, []string{"bar/pvc2", "foo/pvc1"}, upUsedPVCs(s))
	})
}

// TestUpstreamNewSnapshotEntries pins the rest of semantics 5.3: entries for
// unknown node names and for "" are created and listed (NumNodes counts
// them, Get fails for them, the affinity lists include them), the used-PVC
// set counts pods on unknown nodes but not unscheduled ones, image sizes are
// per node, and a later node object with the same name wins.
func TestUpstreamNewSnapshotEntries(t *testing.T) {
	onReal := upMakePod("a", "ns", "node-1")
	onUnknown := upWithPodAffinity(upWithPVC(upMakePod("b", "ns", "ghost"), "claim-b"), "zone", upExistsSelector("x"))
	unscheduled := upWithPVC(upMakePod("c", "ns", ""), "claim-c")
	node1old := upImageNode("node-1", upImage("img", 10))
	node1 := upImageNode("node-1", upImage("img", 11))
	node1.Labels = map[string]string{"version": "new"}
	node2 := upImageNode("node-2", upImage("img", 20), upImage("only-2", 5))

	s := schedcache.NewSnapshot([]*v1.Pod{onReal, onUnknown, unscheduled}, []*v1.Node{node1old, node2, node1})

	require.Equal(t, 4, s.NumNodes(), "node-1, node-2, ghost and \"\"")
	list, err := s.List()
	require.NoError(t, err)
	listed := map[string][]string{} // node name or "<nil>:<first pod>" -> pods
	for _, ni := range list {
		key := ni.NodeName()
		if ni.Node() == nil {
			key = "<nil>:" + ni.PodAt(0).Pod().Name
		}
		listed[key] = upInfoNames(ni.Pods())
	}
	require.Equal(t, map[string][]string{
		"node-1":  {"a"},
		"node-2":  {},
		"<nil>:b": {"b"},
		"<nil>:c": {"c"},
	}, listed)
	for _, name := range []string{"ghost", ""} {
		_, err := s.Get(name)
		require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound, "Get(%q)", name)
	}
	aff, err := s.HavePodsWithAffinityList()
	require.NoError(t, err)
	require.Len(t, aff, 1)
	require.Nil(t, aff[0].Node(), "the nodeless entry of ghost is in the affinity list")
	require.Equal(t, []string{"ns/claim-b"}, upUsedPVCs(s))

	got1, err := s.Get("node-1")
	require.NoError(t, err)
	require.Same(t, node1, got1.Node(), "the later object wins")
	require.Equal(t, map[string]schedcache.ImageStateSummary{"img": {Size: 11, NumNodes: 2}}, got1.ImageStates())
	got2, err := s.Get("node-2")
	require.NoError(t, err)
	require.Equal(t, map[string]schedcache.ImageStateSummary{
		"img":    {Size: 20, NumNodes: 2},
		"only-2": {Size: 5, NumNodes: 1},
	}, got2.ImageStates())
}

// TestUpstreamEmptySnapshot: NewEmptySnapshot has no nodes, nil lists and no
// used PVCs; Get reports the quoted name.
func TestUpstreamEmptySnapshot(t *testing.T) {
	s := schedcache.NewEmptySnapshot()
	require.Equal(t, 0, s.NumNodes())
	list, err := s.List()
	require.NoError(t, err)
	require.Nil(t, list)
	aff, err := s.HavePodsWithAffinityList()
	require.NoError(t, err)
	require.Nil(t, aff)
	anti, err := s.HavePodsWithRequiredAntiAffinityList()
	require.NoError(t, err)
	require.Nil(t, anti)
	require.False(t, s.IsPVCUsedByPods("ns/claim"))
	_, err = s.Get("node-x")
	require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound)
	require.Contains(t, err.Error(), `"node-x"`)
	require.Same(t, s, s.NodeInfos())
	require.Same(t, s, s.StorageInfos())
}

// ---------------------------------------------------------------------------
// Semantics 3.5: image summaries in clones
// ---------------------------------------------------------------------------

// TestUpstreamImageNumNodesStaleness: a node's image summaries are cloned
// when the node changes; image changes on other nodes do not bump its
// generation, so its NumNodes goes stale (n1 keeps NumNodes=1 after n2 with
// the same image is added, while n2 shows 2). Size is fixed by the first
// node reporting the name, until the name's global entry dies.
func TestUpstreamImageNumNodesStaleness(t *testing.T) {
	const image = "registry/app:v1"
	nodes := map[string]*v1.Node{
		"n1": upImageNode("n1", upImage(image, 100)),
		"n2": upImageNode("n2", upImage(image, 200)),
		"n3": upImageNode("n3", upImage(image, 300)),
	}
	steps := []struct {
		desc string
		do   func(t *testing.T, c *schedcache.Cache)
		want map[string]schedcache.ImageStateSummary // per listed node, the summary of image
	}{{
		desc: "add n1",
		do:   func(t *testing.T, c *schedcache.Cache) { upMustAddNode(t, c, nodes["n1"]) },
		want: map[string]schedcache.ImageStateSummary{"n1": {Size: 100, NumNodes: 1}},
	}, {
		desc: "add n2 with the same image (another size)",
		do:   func(t *testing.T, c *schedcache.Cache) { upMustAddNode(t, c, nodes["n2"]) },
		want: map[string]schedcache.ImageStateSummary{"n1": {Size: 100, NumNodes: 1}, "n2": {Size: 100, NumNodes: 2}},
	}, {
		desc: "a pod on n1 re-clones n1",
		do: func(t *testing.T, c *schedcache.Cache) {
			require.NoError(t, c.AddPod(upLog, upBasePod("n1", "p1", "100m", "1Ki", "", nil)))
		},
		want: map[string]schedcache.ImageStateSummary{"n1": {Size: 100, NumNodes: 2}, "n2": {Size: 100, NumNodes: 2}},
	}, {
		desc: "remove n1 (a ghost: it keeps p1)",
		do:   func(t *testing.T, c *schedcache.Cache) { require.NoError(t, c.RemoveNode(upLog, nodes["n1"])) },
		want: map[string]schedcache.ImageStateSummary{"n2": {Size: 100, NumNodes: 2}},
	}, {
		desc: "a pod on n2 re-clones n2",
		do: func(t *testing.T, c *schedcache.Cache) {
			require.NoError(t, c.AddPod(upLog, upBasePod("n2", "p2", "100m", "1Ki", "", nil)))
		},
		want: map[string]schedcache.ImageStateSummary{"n2": {Size: 100, NumNodes: 1}},
	}, {
		desc: "remove n2: the image's global entry dies",
		do:   func(t *testing.T, c *schedcache.Cache) { require.NoError(t, c.RemoveNode(upLog, nodes["n2"])) },
		want: map[string]schedcache.ImageStateSummary{},
	}, {
		desc: "add n3: a new first writer fixes the size",
		do:   func(t *testing.T, c *schedcache.Cache) { upMustAddNode(t, c, nodes["n3"]) },
		want: map[string]schedcache.ImageStateSummary{"n3": {Size: 300, NumNodes: 1}},
	}}

	c := upNew(t)
	reused := schedcache.NewEmptySnapshot()
	type kept struct {
		snap *schedcache.Snapshot
		fp   string
	}
	var history []kept
	for _, s := range steps {
		s.do(t, c)
		require.NoError(t, c.UpdateSnapshot(upLog, reused), s.desc)
		got := map[string]schedcache.ImageStateSummary{}
		list, err := reused.List()
		require.NoError(t, err)
		for _, ni := range list {
			sum, ok := ni.ImageState(image)
			require.True(t, ok, "%s: %s lists the image", s.desc, ni.NodeName())
			got[ni.NodeName()] = sum
		}
		require.Equal(t, s.want, got, s.desc)
		history = append(history, kept{c.Snapshot(), upSnapFP(c.Snapshot())})
	}
	for i, h := range history {
		require.Equal(t, h.fp, upSnapFP(h.snap), "snapshot of step %d changed afterwards", i)
	}
}

// TestUpstreamImageNumNodesRefreshSkippingEpochs: a refresh after several
// operations clones each node changed since the previous refresh with the
// image counts of the moment it clones (semantics 3.5, 5.2 step 1), not
// those of the node's last change that the published snapshot shows: n1
// changes, then n2 joins with the same image, then one refresh shows
// NumNodes 2 on n1 (the published snapshot still shows 1 there). Nodes
// the refresh does not clone keep their counts; a new snapshot shows the
// counts now everywhere.
func TestUpstreamImageNumNodesRefreshSkippingEpochs(t *testing.T) {
	const image = "registry/app:v1"
	nodes := map[string]*v1.Node{
		"n1": upImageNode("n1", upImage(image, 100)),
		"n2": upImageNode("n2", upImage(image, 200)),
		"n3": upImageNode("n3", upImage(image, 300)),
	}
	type counts = map[string]int // per listed node, NumNodes of image
	numNodes := func(t *testing.T, s *schedcache.Snapshot) counts {
		t.Helper()
		got := counts{}
		list, err := s.List()
		require.NoError(t, err)
		for _, ni := range list {
			sum, ok := ni.ImageState(image)
			require.True(t, ok, "%s lists the image", ni.NodeName())
			require.Equal(t, int64(100), sum.Size, "the first reporter's size")
			got[ni.NodeName()] = sum.NumNodes
		}
		return got
	}
	steps := []struct {
		desc                     string
		do                       func(t *testing.T, c *schedcache.Cache)
		reused, fresh, published counts
	}{{
		desc:      "add n1",
		do:        func(t *testing.T, c *schedcache.Cache) { upMustAddNode(t, c, nodes["n1"]) },
		reused:    counts{"n1": 1},
		fresh:     counts{"n1": 1},
		published: counts{"n1": 1},
	}, {
		desc: "a pod on n1, then n2 joins with the image: one refresh clones n1 now",
		do: func(t *testing.T, c *schedcache.Cache) {
			require.NoError(t, c.AddPod(upLog, upBasePod("n1", "p1", "100m", "1Ki", "", nil)))
			upMustAddNode(t, c, nodes["n2"])
		},
		reused:    counts{"n1": 2, "n2": 2},
		fresh:     counts{"n1": 2, "n2": 2},
		published: counts{"n1": 1, "n2": 2},
	}, {
		desc:      "n3 joins: n1 and n2 are not cloned and keep 2",
		do:        func(t *testing.T, c *schedcache.Cache) { upMustAddNode(t, c, nodes["n3"]) },
		reused:    counts{"n1": 2, "n2": 2, "n3": 3},
		fresh:     counts{"n1": 3, "n2": 3, "n3": 3},
		published: counts{"n1": 1, "n2": 2, "n3": 3},
	}, {
		desc: "a pod on n2, then n3 leaves: n2 is cloned now, n1 keeps 2",
		do: func(t *testing.T, c *schedcache.Cache) {
			require.NoError(t, c.AddPod(upLog, upBasePod("n2", "p2", "100m", "1Ki", "", nil)))
			require.NoError(t, c.RemoveNode(upLog, nodes["n3"]))
		},
		reused:    counts{"n1": 2, "n2": 2},
		fresh:     counts{"n1": 2, "n2": 2},
		published: counts{"n1": 1, "n2": 3},
	}, {
		desc: "n3 joins again, then a pod on n1 and one on n3: n1 and n3 cloned now",
		do: func(t *testing.T, c *schedcache.Cache) {
			upMustAddNode(t, c, nodes["n3"])
			require.NoError(t, c.AddPod(upLog, upBasePod("n1", "p3", "100m", "1Ki", "", nil)))
			require.NoError(t, c.AddPod(upLog, upBasePod("n3", "p4", "100m", "1Ki", "", nil)))
		},
		reused:    counts{"n1": 3, "n2": 2, "n3": 3},
		fresh:     counts{"n1": 3, "n2": 3, "n3": 3},
		published: counts{"n1": 3, "n2": 3, "n3": 3},
	}}
	c := upNew(t)
	reused := schedcache.NewEmptySnapshot()
	for _, s := range steps {
		s.do(t, c)
		require.NoError(t, c.UpdateSnapshot(upLog, reused), s.desc)
		require.Equal(t, s.reused, numNodes(t, reused), "%s: the reused snapshot", s.desc)
		fresh := schedcache.NewEmptySnapshot()
		require.NoError(t, c.UpdateSnapshot(upLog, fresh), s.desc)
		require.Equal(t, s.fresh, numNodes(t, fresh), "%s: a new snapshot", s.desc)
		require.Equal(t, s.published, numNodes(t, c.Snapshot()), "%s: the published snapshot", s.desc)
	}
}

// TestUpstreamRefreshDropsStaleEntries: nodes removed and others added
// between two refreshes of one snapshot. The refresh deletes the entries
// whose node left (as many as the snapshot has more than the tree: all of
// them for a consistent tree, semantics 5.2 step 3), clones the new ones
// and, membership having changed, rebuilds the list in the tree's current
// order: the snapshot then shows exactly what a new snapshot shows
// (the same list, NumNodes, map, entries and lists). A node removed and
// added again meanwhile is no membership change: the list keeps its order.
func TestUpstreamRefreshDropsStaleEntries(t *testing.T) {
	start := []*v1.Node{upZoneNode("a1", "", "A"), upZoneNode("b1", "", "B"), upZoneNode("a2", "", "A"),
		upZoneNode("c1", "", "C"), upZoneNode("b2", "", "B")} // listed a1 b1 c1 a2 b2
	byName := map[string]*v1.Node{}
	for _, n := range start {
		byName[n.Name] = n
	}
	add := func(name, zone string) func(*testing.T, *schedcache.Cache) {
		return func(t *testing.T, c *schedcache.Cache) { upMustAddNode(t, c, upZoneNode(name, "", zone)) }
	}
	remove := func(name string) func(*testing.T, *schedcache.Cache) {
		return func(t *testing.T, c *schedcache.Cache) { require.NoError(t, c.RemoveNode(upLog, byName[name])) }
	}
	removeAdded := func(name, zone string) func(*testing.T, *schedcache.Cache) {
		return func(t *testing.T, c *schedcache.Cache) {
			require.NoError(t, c.RemoveNode(upLog, upZoneNode(name, "", zone)))
		}
	}
	for _, tc := range []struct {
		desc string
		ops  []func(*testing.T, *schedcache.Cache)
		list []string // the refreshed snapshot's list (upstream)
		gone []string // names Get must not find
		new  bool     // the refreshed snapshot equals a new one
	}{{
		desc: "remove one, add one",
		ops:  []func(*testing.T, *schedcache.Cache){remove("b1"), add("d1", "D")},
		list: []string{"a1", "b2", "c1", "d1", "a2"}, gone: []string{"b1"}, new: true,
	}, {
		desc: "remove two, add one",
		ops:  []func(*testing.T, *schedcache.Cache){remove("b1"), remove("c1"), add("d1", "D")},
		list: []string{"a1", "b2", "d1", "a2"}, gone: []string{"b1", "c1"}, new: true,
	}, {
		desc: "remove one, add two",
		ops:  []func(*testing.T, *schedcache.Cache){remove("a2"), add("d1", "D"), add("a3", "A")},
		list: []string{"a1", "b1", "c1", "d1", "a3", "b2"}, gone: []string{"a2"}, new: true,
	}, {
		desc: "remove one holding a pod (its entry stays, nodeless), add one",
		ops: []func(*testing.T, *schedcache.Cache){
			func(t *testing.T, c *schedcache.Cache) {
				require.NoError(t, c.AddPod(upLog, upBasePod("b1", "p1", "100m", "1Ki", "", nil)))
			},
			remove("b1"), add("d1", "D")},
		list: []string{"a1", "b2", "c1", "d1", "a2"}, gone: []string{"b1"}, new: true,
	}, {
		desc: "remove three, add one",
		ops:  []func(*testing.T, *schedcache.Cache){remove("a1"), remove("b1"), remove("c1"), add("d1", "D")},
		list: []string{"a2", "b2", "d1"}, gone: []string{"a1", "b1", "c1"}, new: true,
	}, {
		desc: "add one, remove it and another",
		ops:  []func(*testing.T, *schedcache.Cache){add("d1", "D"), remove("b2"), removeAdded("d1", "D")},
		list: []string{"a1", "b1", "c1", "a2"}, gone: []string{"b2", "d1"}, new: true,
	}, {
		desc: "remove c1, add it again in zone A: not a membership change, the order stays",
		ops:  []func(*testing.T, *schedcache.Cache){remove("c1"), add("c1", "A")},
		list: []string{"a1", "b1", "c1", "a2", "b2"}, // the tree lists a1 b1 a2 b2 c1
	}} {
		t.Run(tc.desc, func(t *testing.T) {
			c := upNew(t)
			for _, n := range start {
				upMustAddNode(t, c, n)
			}
			reused := schedcache.NewEmptySnapshot()
			require.NoError(t, c.UpdateSnapshot(upLog, reused))
			require.Equal(t, []string{"a1", "b1", "c1", "a2", "b2"}, upListNames(t, reused))
			for _, op := range tc.ops {
				op(t, c)
			}
			require.NoError(t, c.UpdateSnapshot(upLog, reused))
			require.Equal(t, tc.list, upListNames(t, reused), "list")
			require.Equal(t, len(tc.list), reused.NumNodes())
			for _, name := range tc.gone {
				_, err := reused.Get(name)
				require.ErrorIs(t, err, schedcache.ErrNodeInfoNotFound, "Get(%q) of a removed node", name)
			}
			fresh := schedcache.NewEmptySnapshot()
			require.NoError(t, c.UpdateSnapshot(upLog, fresh))
			for _, name := range upListNames(t, fresh) {
				want, _ := fresh.Get(name)
				got, err := reused.Get(name)
				require.NoError(t, err, "Get(%q)", name)
				require.Equal(t, upNodeFP(want), upNodeFP(got), "entry %q", name)
			}
			if tc.new {
				require.Equal(t, upSnapFP(fresh), upSnapFP(reused), "the refreshed snapshot shows what a new one shows")
			} else {
				require.ElementsMatch(t, upListNames(t, fresh), upListNames(t, reused))
			}
			upCompareSnapshotWithCache(t, c, reused)
		})
	}
}

func upMustAddNode(t *testing.T, c *schedcache.Cache, n *v1.Node) *schedcache.NodeInfo {
	t.Helper()
	ni, err := c.AddNode(upLog, n)
	require.NoError(t, err)
	require.Same(t, n, ni.Node())
	return ni
}

// TestUpstreamSnapshotPodKeys: the published snapshot records the pods the
// cache holds by UID (the key, semantics 1.1), with their assumed state.
func TestUpstreamSnapshotPodKeys(t *testing.T) {
	c := upNew(t)
	assumed := upBasePod("n1", "assumed", "100m", "1Ki", "", nil)
	added := upBasePod("n1", "added", "100m", "1Ki", "", nil)
	added.UID = types.UID("uid-added")
	require.NoError(t, c.AssumePod(upLog, assumed))
	require.NoError(t, c.AddPod(upLog, added))
	s := c.Snapshot()
	require.Equal(t, 2, s.PodCount())
	e, ok := s.Pod("assumed")
	require.True(t, ok)
	require.Same(t, assumed, e.Pod)
	require.True(t, e.Assumed)
	e, ok = s.Pod("uid-added")
	require.True(t, ok)
	require.Same(t, added, e.Pod)
	require.False(t, e.Assumed)
	_, ok = s.Pod("added")
	require.False(t, ok, "the key is the UID, not the name")
}
