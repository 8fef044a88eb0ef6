package nodetree

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/schedcache/schedcache/internal/zonemodel"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// allNodes is upstream's node_tree_test.go fixture.
var allNodes = []*v1.Node{
	// Node 0: a node without any region-zone label
	{ObjectMeta: metav1.ObjectMeta{Name: "node-0"}},
	// Node 1: a node with region label only
	{ObjectMeta: metav1.ObjectMeta{Name: "node-1", Labels: map[string]string{
		v1.LabelTopologyRegion: "region-1",
	}}},
	// Node 2: a node with zone label only
	{ObjectMeta: metav1.ObjectMeta{Name: "node-2", Labels: map[string]string{
		v1.LabelTopologyZone: "zone-2",
	}}},
	// Node 3: a node with proper region and zone labels
	{ObjectMeta: metav1.ObjectMeta{Name: "node-3", Labels: map[string]string{
		v1.LabelTopologyRegion: "region-1",
		v1.LabelTopologyZone:   "zone-2",
	}}},
	// Node 4: a node with proper region and zone labels
	{ObjectMeta: metav1.ObjectMeta{Name: "node-4", Labels: map[string]string{
		v1.LabelTopologyRegion: "region-1",
		v1.LabelTopologyZone:   "zone-2",
	}}},
	// Node 5: same region as above, different zone
	{ObjectMeta: metav1.ObjectMeta{Name: "node-5", Labels: map[string]string{
		v1.LabelTopologyRegion: "region-1",
		v1.LabelTopologyZone:   "zone-3",
	}}},
	// Node 6: new region and zone
	{ObjectMeta: metav1.ObjectMeta{Name: "node-6", Labels: map[string]string{
		v1.LabelTopologyRegion: "region-2",
		v1.LabelTopologyZone:   "zone-2",
	}}},
	// Node 7: same region and zone as node-6
	{ObjectMeta: metav1.ObjectMeta{Name: "node-7", Labels: map[string]string{
		v1.LabelTopologyRegion: "region-2",
		v1.LabelTopologyZone:   "zone-2",
	}}},
	// Node 8: same region and zone as node-6
	{ObjectMeta: metav1.ObjectMeta{Name: "node-8", Labels: map[string]string{
		v1.LabelTopologyRegion: "region-2",
		v1.LabelTopologyZone:   "zone-2",
	}}},
	// Node 9: GA and deprecated zone + region labels
	{ObjectMeta: metav1.ObjectMeta{Name: "node-9", Labels: map[string]string{
		v1.LabelTopologyRegion:          "region-2",
		v1.LabelTopologyZone:            "zone-2",
		v1.LabelFailureDomainBetaRegion: "region-2",
		v1.LabelFailureDomainBetaZone:   "zone-2",
	}}},
	// Node 10: only the deprecated zone + region labels
	{ObjectMeta: metav1.ObjectMeta{Name: "node-10", Labels: map[string]string{
		v1.LabelFailureDomainBetaRegion: "region-2",
		v1.LabelFailureDomainBetaZone:   "zone-3",
	}}},
}

func newTree(nodes []*v1.Node) *Tree {
	t := New()
	for _, n := range nodes {
		t.Add(n)
	}
	return t
}

// checkInvariants verifies the internal consistency of t.
func checkInvariants(t *testing.T, tr *Tree) {
	t.Helper()
	sum := 0
	require.Len(t, tr.byKey, len(tr.zones))
	for _, z := range tr.zones {
		require.Same(t, z, tr.byKey[z.key], "zone %q", z.key)
		require.NotEmpty(t, z.names, "empty zone %q", z.key)
		require.Len(t, z.members, len(z.names), "zone %q", z.key)
		for _, n := range z.names {
			_, ok := z.members[n]
			require.True(t, ok, "zone %q lacks member %q", z.key, n)
		}
		sum += len(z.names)
	}
	require.Equal(t, sum, tr.numNodes)
}

// verifyTree is upstream's verifyNodeTree.
func verifyTree(t *testing.T, tr *Tree, want map[string][]string) {
	t.Helper()
	checkInvariants(t, tr)
	got := make(map[string][]string, len(tr.zones))
	for _, z := range tr.zones {
		got[z.key] = slices.Clone(z.names)
	}
	require.Equal(t, want, got)
	n := 0
	for _, names := range want {
		n += len(names)
	}
	require.Equal(t, n, tr.NumNodes())
}

func node(name string, labels map[string]string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func TestZoneKey(t *testing.T) {
	const (
		betaZone   = v1.LabelFailureDomainBetaZone
		betaRegion = v1.LabelFailureDomainBetaRegion
		gaZone     = v1.LabelTopologyZone
		gaRegion   = v1.LabelTopologyRegion
	)
	tests := []struct {
		name   string
		node   *v1.Node
		labels map[string]string
		want   string
	}{
		// Upstream helpers_test.go.
		{name: "has no zone or region keys", labels: map[string]string{}, want: ""},
		{name: "has beta zone and region keys", labels: map[string]string{betaZone: "zone1", betaRegion: "region1"}, want: "region1:\x00:zone1"},
		{name: "has GA zone and region keys", labels: map[string]string{gaZone: "zone1", gaRegion: "region1"}, want: "region1:\x00:zone1"},
		{name: "has both beta and GA zone and region keys", labels: map[string]string{gaZone: "zone1", gaRegion: "region1", betaZone: "zone1", betaRegion: "region1"}, want: "region1:\x00:zone1"},
		{name: "beta labels take precedent", labels: map[string]string{gaZone: "zone1", gaRegion: "region1", betaZone: "zone2", betaRegion: "region2"}, want: "region2:\x00:zone2"},
		// Additional cases.
		{name: "nil labels", labels: nil, want: ""},
		{name: "region only", labels: map[string]string{gaRegion: "r1"}, want: "r1:\x00:"},
		{name: "zone only", labels: map[string]string{gaZone: "z1"}, want: ":\x00:z1"},
		{name: "beta region only", labels: map[string]string{betaRegion: "r1"}, want: "r1:\x00:"},
		{name: "empty values", labels: map[string]string{gaZone: "", gaRegion: ""}, want: ""},
		{name: "unrelated labels", labels: map[string]string{"a": "b"}, want: ""},
		{name: "empty beta zone wins over GA zone", labels: map[string]string{betaZone: "", gaZone: "z1", gaRegion: "r1"}, want: "r1:\x00:"},
		{name: "empty beta region wins over GA region", labels: map[string]string{betaRegion: "", gaRegion: "r1", gaZone: "z1"}, want: ":\x00:z1"},
		{name: "empty beta labels win over GA labels", labels: map[string]string{betaZone: "", betaRegion: "", gaZone: "z1", gaRegion: "r1"}, want: ""},
		{name: "beta zone with GA region", labels: map[string]string{betaZone: "z2", gaZone: "z1", gaRegion: "r1"}, want: "r1:\x00:z2"},
		{name: "colon in values", labels: map[string]string{gaZone: "a:b", gaRegion: "c:"}, want: "c::\x00:a:b"},
		{name: "nil node", node: nil, want: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := tc.node
			if tc.name != "nil node" {
				n = node("n", tc.labels)
			}
			require.Equal(t, tc.want, ZoneKey(n))
		})
	}
}

func TestAdd(t *testing.T) {
	tests := []struct {
		name       string
		nodesToAdd []*v1.Node
		want       map[string][]string
	}{
		{
			name:       "single node no labels",
			nodesToAdd: allNodes[:1],
			want:       map[string][]string{"": {"node-0"}},
		},
		{
			name:       "same node specified twice",
			nodesToAdd: []*v1.Node{allNodes[0], allNodes[0]},
			want:       map[string][]string{"": {"node-0"}},
		},
		{
			name:       "mix of nodes with and without proper labels",
			nodesToAdd: allNodes[:4],
			want: map[string][]string{
				"":                     {"node-0"},
				"region-1:\x00:":       {"node-1"},
				":\x00:zone-2":         {"node-2"},
				"region-1:\x00:zone-2": {"node-3"},
			},
		},
		{
			name:       "mix of nodes with and without proper labels and some zones with multiple nodes",
			nodesToAdd: allNodes[:7],
			want: map[string][]string{
				"":                     {"node-0"},
				"region-1:\x00:":       {"node-1"},
				":\x00:zone-2":         {"node-2"},
				"region-1:\x00:zone-2": {"node-3", "node-4"},
				"region-1:\x00:zone-3": {"node-5"},
				"region-2:\x00:zone-2": {"node-6"},
			},
		},
		{
			name:       "nodes also using deprecated zone/region label",
			nodesToAdd: allNodes[9:],
			want: map[string][]string{
				"region-2:\x00:zone-2": {"node-9"},
				"region-2:\x00:zone-3": {"node-10"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			verifyTree(t, newTree(tc.nodesToAdd), tc.want)
		})
	}
}

func TestRemove(t *testing.T) {
	tests := []struct {
		name          string
		existingNodes []*v1.Node
		nodesToRemove []*v1.Node
		want          map[string][]string
		wantErr       bool
	}{
		{
			name:          "remove a single node with no labels",
			existingNodes: allNodes[:7],
			nodesToRemove: allNodes[:1],
			want: map[string][]string{
				"region-1:\x00:":       {"node-1"},
				":\x00:zone-2":         {"node-2"},
				"region-1:\x00:zone-2": {"node-3", "node-4"},
				"region-1:\x00:zone-3": {"node-5"},
				"region-2:\x00:zone-2": {"node-6"},
			},
		},
		{
			name:          "remove a few nodes including one from a zone with multiple nodes",
			existingNodes: allNodes[:7],
			nodesToRemove: allNodes[1:4],
			want: map[string][]string{
				"":                     {"node-0"},
				"region-1:\x00:zone-2": {"node-4"},
				"region-1:\x00:zone-3": {"node-5"},
				"region-2:\x00:zone-2": {"node-6"},
			},
		},
		{
			name:          "remove all nodes",
			existingNodes: allNodes[:7],
			nodesToRemove: allNodes[:7],
			want:          map[string][]string{},
		},
		{
			name:          "remove non-existing node",
			existingNodes: nil,
			nodesToRemove: allNodes[:5],
			want:          map[string][]string{},
			wantErr:       true,
		},
		{
			name:          "remove node from a zone it is not in",
			existingNodes: allNodes[:4],
			nodesToRemove: []*v1.Node{node("node-3", map[string]string{v1.LabelTopologyRegion: "region-1"})},
			want: map[string][]string{
				"":                     {"node-0"},
				"region-1:\x00:":       {"node-1"},
				":\x00:zone-2":         {"node-2"},
				"region-1:\x00:zone-2": {"node-3"},
			},
			wantErr: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(tc.existingNodes)
			for _, n := range tc.nodesToRemove {
				err := tr.Remove(n)
				if !tc.wantErr {
					require.NoError(t, err)
					continue
				}
				require.ErrorIs(t, err, ErrNodeNotInZone)
				require.Equal(t, fmt.Sprintf("node %q in group %q was not found", n.Name, ZoneKey(n)), err.Error(), "upstream node tree's text")
			}
			verifyTree(t, tr, tc.want)
		})
	}
}

func TestUpdate(t *testing.T) {
	tests := []struct {
		name          string
		existingNodes []*v1.Node
		nodeToUpdate  *v1.Node
		want          map[string][]string
	}{
		{
			name:          "update a node without label",
			existingNodes: allNodes[:7],
			nodeToUpdate: node("node-0", map[string]string{
				v1.LabelTopologyRegion: "region-1",
				v1.LabelTopologyZone:   "zone-2",
			}),
			want: map[string][]string{
				"region-1:\x00:":       {"node-1"},
				":\x00:zone-2":         {"node-2"},
				"region-1:\x00:zone-2": {"node-3", "node-4", "node-0"},
				"region-1:\x00:zone-3": {"node-5"},
				"region-2:\x00:zone-2": {"node-6"},
			},
		},
		{
			name:          "update the only existing node",
			existingNodes: allNodes[:1],
			nodeToUpdate: node("node-0", map[string]string{
				v1.LabelTopologyRegion: "region-1",
				v1.LabelTopologyZone:   "zone-2",
			}),
			want: map[string][]string{
				"region-1:\x00:zone-2": {"node-0"},
			},
		},
		{
			name:          "update non-existing node",
			existingNodes: allNodes[:1],
			nodeToUpdate: node("node-new", map[string]string{
				v1.LabelTopologyRegion: "region-1",
				v1.LabelTopologyZone:   "zone-2",
			}),
			want: map[string][]string{
				"":                     {"node-0"},
				"region-1:\x00:zone-2": {"node-new"},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(tc.existingNodes)
			var oldNode *v1.Node
			for _, n := range allNodes {
				if n.Name == tc.nodeToUpdate.Name {
					oldNode = n
					break
				}
			}
			if oldNode == nil {
				oldNode = node("nonexisting-node", nil)
			}
			tr.Update(oldNode, tc.nodeToUpdate)
			verifyTree(t, tr, tc.want)
		})
	}
}

func TestUpdateSameZoneKeepsPosition(t *testing.T) {
	tr := newTree(allNodes[:7])
	v := tr.Version()
	// Different labels, same key (beta label equal to the GA one).
	tr.Update(allNodes[3], node("node-3", map[string]string{
		v1.LabelFailureDomainBetaRegion: "region-1",
		v1.LabelTopologyZone:            "zone-2",
	}))
	require.Equal(t, v, tr.Version())
	verifyTree(t, tr, map[string][]string{
		"":                     {"node-0"},
		"region-1:\x00:":       {"node-1"},
		":\x00:zone-2":         {"node-2"},
		"region-1:\x00:zone-2": {"node-3", "node-4"},
		"region-1:\x00:zone-3": {"node-5"},
		"region-2:\x00:zone-2": {"node-6"},
	})
}

func TestUpdateNilOld(t *testing.T) {
	// nil old with an empty new key: nothing happens.
	tr := newTree(allNodes[:1])
	tr.Update(nil, node("node-0", nil))
	verifyTree(t, tr, map[string][]string{"": {"node-0"}})
	require.Equal(t, uint64(1), tr.Version())

	// nil old with a non-empty new key (upstream panics): the name leaves
	// zone "" and joins the new zone.
	tr.Update(nil, allNodes[2])
	verifyTree(t, tr, map[string][]string{"": {"node-0"}, ":\x00:zone-2": {"node-2"}})
	tr.Update(nil, node("node-0", map[string]string{v1.LabelTopologyZone: "zone-2"}))
	verifyTree(t, tr, map[string][]string{":\x00:zone-2": {"node-2", "node-0"}})
}

func TestList(t *testing.T) {
	tests := []struct {
		name       string
		nodesToAdd []*v1.Node
		want       []string
	}{
		{
			name:       "empty tree",
			nodesToAdd: nil,
			want:       nil,
		},
		{
			name:       "one node",
			nodesToAdd: allNodes[:1],
			want:       []string{"node-0"},
		},
		{
			name:       "four nodes",
			nodesToAdd: allNodes[:4],
			want:       []string{"node-0", "node-1", "node-2", "node-3"},
		},
		{
			name:       "all nodes",
			nodesToAdd: allNodes[:9],
			want:       []string{"node-0", "node-1", "node-2", "node-3", "node-5", "node-6", "node-4", "node-7", "node-8"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := newTree(tc.nodesToAdd)
			got, err := tr.List()
			require.NoError(t, err)
			require.Equal(t, tc.want, got)

			prefix := []string{"x"}
			got, err = tr.AppendList(prefix)
			require.NoError(t, err)
			require.Equal(t, append([]string{"x"}, tc.want...), got)
		})
	}
}

func TestListExhausted(t *testing.T) {
	tr := newTree(allNodes[:9])
	tr.numNodes++
	got, err := tr.List()
	require.ErrorIs(t, err, ErrZonesExhausted)
	require.Equal(t, []string{"node-0", "node-1", "node-2", "node-3", "node-5", "node-6", "node-4", "node-7", "node-8"}, got)
}

func TestListCountTooSmall(t *testing.T) {
	// Upstream completes the round in progress even past numNodes.
	tr := newTree(allNodes[:9])
	tr.numNodes = 1
	got, err := tr.List()
	require.NoError(t, err)
	require.Equal(t, []string{"node-0", "node-1", "node-2", "node-3", "node-5", "node-6"}, got)
}

func TestMultiOperations(t *testing.T) {
	tests := []struct {
		name          string
		nodesToAdd    []*v1.Node
		nodesToRemove []*v1.Node
		operations    []string
		want          []string
	}{
		{
			name:          "add and remove all nodes",
			nodesToAdd:    allNodes[2:9],
			nodesToRemove: allNodes[2:9],
			operations:    []string{"add", "add", "add", "remove", "remove", "remove"},
			want:          nil,
		},
		{
			name:          "add and remove some nodes",
			nodesToAdd:    allNodes[2:9],
			nodesToRemove: allNodes[2:9],
			operations:    []string{"add", "add", "add", "remove"},
			want:          []string{"node-3", "node-4"},
		},
		{
			name:          "remove three nodes",
			nodesToAdd:    allNodes[2:9],
			nodesToRemove: allNodes[2:9],
			operations:    []string{"add", "add", "add", "remove", "remove", "remove", "add"},
			want:          []string{"node-5"},
		},
		{
			name:          "add more nodes to an exhausted zone",
			nodesToAdd:    append(allNodes[4:9:9], allNodes[3]),
			nodesToRemove: nil,
			operations:    []string{"add", "add", "add", "add", "add", "add"},
			want:          []string{"node-4", "node-5", "node-6", "node-3", "node-7", "node-8"},
		},
		{
			name:          "remove zone and add new",
			nodesToAdd:    append(allNodes[3:5:5], allNodes[6:8]...),
			nodesToRemove: allNodes[3:5],
			operations:    []string{"add", "add", "remove", "add", "add", "remove"},
			want:          []string{"node-6", "node-7"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tr := New()
			addIndex, removeIndex := 0, 0
			for _, op := range tc.operations {
				switch op {
				case "add":
					require.Less(t, addIndex, len(tc.nodesToAdd), "more add operations than nodesToAdd")
					tr.Add(tc.nodesToAdd[addIndex])
					addIndex++
				case "remove":
					require.Less(t, removeIndex, len(tc.nodesToRemove), "more remove operations than nodesToRemove")
					_ = tr.Remove(tc.nodesToRemove[removeIndex])
					removeIndex++
				default:
					t.Fatalf("unknown operation: %v", op)
				}
			}
			checkInvariants(t, tr)
			got, err := tr.List()
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

// TestWorkedExample is the example of section 6 of docs/upstream-semantics.md.
func TestWorkedExample(t *testing.T) {
	inZone := func(name, z string) *v1.Node {
		return node(name, map[string]string{v1.LabelTopologyZone: z})
	}
	key := func(z string) string { return ":\x00:" + z }
	list := func(tr *Tree) []string {
		t.Helper()
		l, err := tr.List()
		require.NoError(t, err)
		checkInvariants(t, tr)
		return l
	}

	tr := New()
	for _, n := range []*v1.Node{
		inZone("a1", "A"), inZone("b1", "B"), inZone("a2", "A"), inZone("c1", "C"),
		inZone("a3", "A"), inZone("c2", "C"), inZone("a4", "A"),
	} {
		tr.Add(n)
	}
	verifyTree(t, tr, map[string][]string{
		key("A"): {"a1", "a2", "a3", "a4"},
		key("B"): {"b1"},
		key("C"): {"c1", "c2"},
	})
	require.Equal(t, []string{key("A"), key("B"), key("C")}, tr.Zones())
	require.Equal(t, []string{"a1", "b1", "c1", "a2", "c2", "a3", "a4"}, list(tr))

	tr.Update(inZone("a1", "A"), inZone("a1", "C"))
	verifyTree(t, tr, map[string][]string{
		key("A"): {"a2", "a3", "a4"},
		key("B"): {"b1"},
		key("C"): {"c1", "c2", "a1"},
	})
	tr.Add(inZone("z1", "Z"))
	require.Equal(t, []string{"a2", "b1", "c1", "z1", "a3", "c2", "a4", "a1"}, list(tr))

	require.NoError(t, tr.Remove(inZone("b1", "B")))
	require.Equal(t, []string{key("A"), key("C"), key("Z")}, tr.Zones())
	tr.Add(inZone("b1", "B"))
	require.Equal(t, []string{key("A"), key("C"), key("Z"), key("B")}, tr.Zones())
	require.Equal(t, []string{"a2", "c1", "z1", "b1", "a3", "c2", "a4", "a1"}, list(tr))
}

// TestDuplicateUnderTwoZones checks that duplicate detection is per zone.
func TestDuplicateUnderTwoZones(t *testing.T) {
	tr := New()
	tr.AddName("d", "A")
	tr.AddName("d", "B")
	tr.AddName("d", "A")
	require.Equal(t, 2, tr.NumNodes())
	l, err := tr.List()
	require.NoError(t, err)
	require.Equal(t, []string{"d", "d"}, l)

	require.NoError(t, tr.RemoveName("d", "A"))
	l, err = tr.List()
	require.NoError(t, err)
	require.Equal(t, []string{"d"}, l)
	require.Equal(t, []string{"B"}, tr.Zones())
}

func TestVersion(t *testing.T) {
	tr := New()
	require.Equal(t, uint64(0), tr.Version())
	steps := []struct {
		name    string
		op      func()
		changed bool
	}{
		{"add", func() { tr.AddName("a", "A") }, true},
		{"duplicate add", func() { tr.AddName("a", "A") }, false},
		{"add to other zone", func() { tr.AddName("b", "B") }, true},
		{"failed remove", func() { require.Error(t, tr.RemoveName("a", "B")) }, false},
		{"same-key update", func() { tr.UpdateName("a", "A", "A") }, false},
		{"update of unknown into existing", func() { tr.UpdateName("b", "C", "B") }, false},
		{"move", func() { tr.UpdateName("a", "A", "B") }, true},
		{"update of unknown", func() { tr.UpdateName("c", "X", "C") }, true},
		{"remove", func() { require.NoError(t, tr.RemoveName("c", "C")) }, true},
		{"node update same key", func() { tr.Update(node("x", nil), node("x", map[string]string{"k": "v"})) }, false},
	}
	for _, s := range steps {
		before := tr.Version()
		s.op()
		if s.changed {
			require.Greater(t, tr.Version(), before, s.name)
		} else {
			require.Equal(t, before, tr.Version(), s.name)
		}
	}
}

func TestAppendListNoAlloc(t *testing.T) {
	tr := New()
	for i := range 1000 {
		tr.AddName(fmt.Sprintf("n%d", i), fmt.Sprintf("z%d", i%7))
	}
	buf := make([]string, 0, tr.NumNodes())
	allocs := testing.AllocsPerRun(100, func() {
		var err error
		buf, err = tr.AppendList(buf[:0])
		if err != nil {
			panic(err)
		}
	})
	require.Zero(t, allocs)
	require.Len(t, buf, 1000)
}

func TestZeroTree(t *testing.T) {
	var tr Tree
	require.Zero(t, tr.NumNodes())
	l, err := tr.List()
	require.NoError(t, err)
	require.Nil(t, l)
	require.ErrorIs(t, tr.RemoveName("a", ""), ErrNodeNotInZone)
	tr.UpdateName("a", "", "Z")
	tr.AddName("b", "")
	l, err = tr.List()
	require.NoError(t, err)
	require.Equal(t, []string{"a", "b"}, l)
	checkInvariants(t, &tr)
}

func TestZonesIsCopy(t *testing.T) {
	tr := New()
	tr.AddName("a", "A")
	z := tr.Zones()
	z[0] = "mutated"
	require.Equal(t, []string{"A"}, tr.Zones())
	require.Equal(t, []string{}, New().Zones())
}

func TestRandomAgainstModel(t *testing.T) {
	for seed := range uint64(20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
			nNames := 2 + rng.IntN(30)
			nZones := 1 + rng.IntN(6)
			name := func() string { return fmt.Sprintf("n%d", rng.IntN(nNames)) }
			idOf := func(n string) int32 { // every name has one id: its number
				var id int32
				fmt.Sscanf(n, "n%d", &id)
				return id
			}
			zoneKey := func() string {
				z := rng.IntN(nZones + 1)
				if z == nZones {
					return ""
				}
				return fmt.Sprintf("r:\x00:z%d", z)
			}
			tr := New()
			m := zonemodel.New() // a deliberately naive zone tree
			for step := range 2000 {
				before := tr.Version()
				var changed bool
				var desc string
				switch op := rng.IntN(10); {
				case op < 5:
					n, z := name(), zoneKey()
					desc = fmt.Sprintf("add %s %q", n, z)
					changed = m.Add(n, z)
					tr.AddNameID(n, z, idOf(n))
				case op < 8:
					n, z := name(), zoneKey()
					desc = fmt.Sprintf("remove %s %q", n, z)
					changed = m.Remove(n, z)
					err := tr.RemoveName(n, z)
					if changed {
						require.NoError(t, err, desc)
					} else {
						require.True(t, errors.Is(err, ErrNodeNotInZone), desc)
					}
				default:
					n, oz, nz := name(), zoneKey(), zoneKey()
					desc = fmt.Sprintf("update %s %q -> %q", n, oz, nz)
					if oz != nz {
						r := m.Remove(n, oz)
						a := m.Add(n, nz)
						changed = r || a
					}
					tr.UpdateNameID(n, oz, nz, idOf(n))
				}
				desc = fmt.Sprintf("step %d: %s", step, desc)
				want := m.List()
				got, err := tr.List()
				require.NoError(t, err, desc)
				require.Equal(t, want, got, desc)
				ids, err := tr.AppendIDs(nil)
				require.NoError(t, err, desc)
				require.Len(t, ids, len(got), desc)
				for i, n := range got {
					require.Equal(t, idOf(n), ids[i], "%s: id of %s at %d", desc, n, i)
				}
				require.Equal(t, m.Count(), tr.NumNodes(), desc)
				require.True(t, slices.Equal(m.Zones(), tr.Zones()), "%s: zones %q, want %q", desc, tr.Zones(), m.Zones())
				if changed {
					require.Greater(t, tr.Version(), before, desc)
				} else {
					require.Equal(t, before, tr.Version(), desc)
				}
				if step%97 == 0 {
					checkInvariants(t, tr)
				}
			}
		})
	}
}

func BenchmarkList5000(b *testing.B) {
	tr := New()
	for i := range 5000 {
		var z string
		switch p := i % 10; {
		case p < 5:
			z = "r:\x00:a"
		case p < 8:
			z = "r:\x00:b"
		default:
			z = "r:\x00:c"
		}
		tr.AddName(fmt.Sprintf("node-%05d", i), z)
	}
	b.Run("List", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := tr.List(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AppendList", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]string, 0, tr.NumNodes())
		for b.Loop() {
			var err error
			if buf, err = tr.AppendList(buf[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func TestInZone(t *testing.T) {
	tr := newTree(allNodes[:5])
	require.True(t, tr.InZone("node-0", ""))
	require.True(t, tr.InZone("node-3", ZoneKey(allNodes[3])))
	require.False(t, tr.InZone("node-3", ""), "listed in another zone")
	require.False(t, tr.InZone("node-9", ZoneKey(allNodes[3])), "not listed")
	require.False(t, tr.InZone("node-0", "no such zone"))
	require.NoError(t, tr.Remove(allNodes[3]))
	require.False(t, tr.InZone("node-3", ZoneKey(allNodes[3])), "removed")
	require.True(t, tr.InZone("node-4", ZoneKey(allNodes[3])))
}

// upstreamList is upstream's list() loop verbatim over zones: every zone
// is visited in every round (O(zones x longest zone)).
func upstreamList(zones [][]string, count int) ([]string, error) {
	if len(zones) == 0 {
		return nil, nil
	}
	var out []string
	exhausted := 0
	for idx := 0; len(out) < count; idx++ {
		if exhausted >= len(zones) {
			return out, ErrZonesExhausted
		}
		for _, z := range zones {
			if idx >= len(z) {
				if idx == len(z) {
					exhausted++
				}
				continue
			}
			out = append(out, z[idx])
		}
	}
	return out, nil
}

// Uneven zones (many short zones beside long ones): the list, which walks
// only the zones still active in each round, is upstream's loop's, with
// consistent counts and with counts one too large and too small.
func TestListUnevenZones(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 9))
	for round := range 50 {
		tr := New()
		nz := 1 + r.IntN(40)
		for i := range 200 {
			z := r.IntN(nz)
			if r.IntN(4) == 0 {
				z = 0 // one long zone
			}
			tr.AddNameID(fmt.Sprint("n", round, "-", i), fmt.Sprint("z", z), int32(i))
		}
		if round%3 == 0 { // empty some zones out
			for _, name := range slices.Clone(tr.zones[len(tr.zones)/2].names) {
				require.NoError(t, tr.RemoveName(name, tr.zones[len(tr.zones)/2].key))
			}
		}
		zones := make([][]string, len(tr.zones))
		for i, z := range tr.zones {
			zones[i] = z.names
		}
		for _, delta := range []int{0, 1, -tr.numNodes / 2} {
			want, wantErr := upstreamList(zones, tr.numNodes+delta)
			tr.numNodes += delta
			got, err := tr.List()
			ids, idErr := tr.AppendIDs(nil)
			tr.numNodes -= delta
			require.Equal(t, wantErr, err)
			require.Equal(t, wantErr, idErr)
			require.Equal(t, want, got)
			require.Len(t, ids, len(want))
		}
	}
}

// A clone lists what the tree lists, and the two change independently.
func TestClone(t *testing.T) {
	tr := New()
	for i, n := range allNodes {
		tr.AddID(n, int32(i))
	}
	c := tr.Clone()
	want, _ := tr.List()
	got, _ := c.List()
	if !slices.Equal(want, got) || c.NumNodes() != tr.NumNodes() || c.Version() != tr.Version() || !slices.Equal(c.Zones(), tr.Zones()) {
		t.Fatalf("clone lists %v, tree %v", got, want)
	}
	wantIDs, _ := tr.AppendIDs(nil)
	gotIDs, _ := c.AppendIDs(nil)
	if !slices.Equal(wantIDs, gotIDs) {
		t.Fatalf("clone ids %v, tree %v", gotIDs, wantIDs)
	}
	if err := c.Remove(allNodes[0]); err != nil {
		t.Fatal(err)
	}
	c.AddID(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "extra"}}, 99)
	if l, _ := tr.List(); !slices.Equal(l, want) || !tr.Has(allNodes[0].Name) || tr.Has("extra") {
		t.Fatalf("changing the clone changed the tree: %v", l)
	}
}

// SetID gives every place a name is listed at the new id, in any zone,
// without moving it; names and the other ids stay; Version moves only when
// an id changed.
func TestSetID(t *testing.T) {
	z := func(k string) map[string]string { return map[string]string{v1.LabelTopologyZone: k} }
	tr := New()
	tr.AddID(node("a", z("1")), 0)
	tr.AddID(node("b", z("1")), 1)
	tr.AddID(node("c", z("2")), 2)
	tr.AddID(node("a", z("2")), 3) // a in two zones
	names, _ := tr.List()
	v := tr.Version()
	require.True(t, tr.SetID("a", 9))
	ids, err := tr.AppendIDs(nil)
	require.NoError(t, err)
	require.Equal(t, []int32{9, 2, 1, 9}, ids)
	after, _ := tr.List()
	require.Equal(t, names, after)
	require.Greater(t, tr.Version(), v)
	v = tr.Version()
	require.False(t, tr.SetID("a", 9), "no id changes")
	require.False(t, tr.SetID("x", 5), "a name not listed")
	require.Equal(t, v, tr.Version())
	// A name added again to a zone listing it keeps the id SetID gave.
	tr.AddID(node("a", z("1")), 4)
	ids, _ = tr.AppendIDs(nil)
	require.Equal(t, []int32{9, 2, 1, 9}, ids)
}
