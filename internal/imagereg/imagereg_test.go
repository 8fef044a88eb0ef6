package imagereg

import (
	"fmt"
	"math/rand"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/schedcache/schedcache/internal/immutable"
	"github.com/schedcache/schedcache/nodeinfo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type sum = nodeinfo.ImageStateSummary

func img(size int64, names ...string) v1.ContainerImage {
	return v1.ContainerImage{Names: names, SizeBytes: size}
}

func node(name string, ims ...v1.ContainerImage) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: v1.NodeStatus{Images: ims}}
}

func contents(ed *immutable.MapEditor[sum]) map[string]sum {
	out := map[string]sum{}
	ed.Done().Range(func(k string, v sum) bool { out[k] = v; return true })
	return out
}

// A node's names count once each, a new name with the size of the first
// image listing it, whatever the duplicates; unregistering undoes it.
func TestRegisterCountsEachNameOnce(t *testing.T) {
	n1 := node("n1", img(10, "a", "b"), img(20, "b", "c", "a"), img(30, "c"), img(40, "d", "d"), img(50))
	n2 := node("n2", img(99, "c", "e"), img(7, "e", "f"))
	var ed immutable.MapEditor[sum]
	immutable.Map[sum]{}.EditInto(&ed)
	c := TableCounts{Ed: &ed}
	m1 := Register(nil, n1, c)
	require.Equal(t, []string{"a", "b", "c", "d"}, m1)
	m2 := Register(nil, n2, c)
	want := map[string]sum{
		"a": {Size: 10, NumNodes: 1}, "b": {Size: 10, NumNodes: 1}, "c": {Size: 20, NumNodes: 2},
		"d": {Size: 40, NumNodes: 1}, "e": {Size: 99, NumNodes: 1}, "f": {Size: 7, NumNodes: 1},
	}
	require.Equal(t, want, contents(&ed))
	ed.Done().EditInto(&ed)
	require.Empty(t, Unregister(m2, n2, c))
	require.Equal(t, map[string]sum{
		"a": {Size: 10, NumNodes: 1}, "b": {Size: 10, NumNodes: 1}, "c": {Size: 20, NumNodes: 1}, "d": {Size: 40, NumNodes: 1},
	}, contents(&ed))
}

// Upstream's per-image node sets: registering a member again counts
// nothing; unregistering an object that lists names the node is not a
// member of leaves those names alone (another node's count stays), and
// the names registered but not listed by the object stay registered.
func TestRegistrationIsByMembership(t *testing.T) {
	var ed immutable.MapEditor[sum]
	immutable.Map[sum]{}.EditInto(&ed)
	c := TableCounts{Ed: &ed}
	a := Register(nil, node("a", img(1, "x")), c)
	b := Register(nil, node("b", img(2, "x", "y")), c)
	b = Register(b, node("b", img(3, "x", "y")), c) // already a member of both
	require.Equal(t, map[string]sum{"x": {Size: 1, NumNodes: 2}, "y": {Size: 2, NumNodes: 1}}, contents(&ed))
	ed.Done().EditInto(&ed)
	a = Unregister(a, node("a", img(1, "y"), img(1, "z")), c) // a is not in y's set
	require.Equal(t, []string{"x"}, a)
	require.Equal(t, map[string]sum{"x": {Size: 1, NumNodes: 2}, "y": {Size: 2, NumNodes: 1}}, contents(&ed))
	ed.Done().EditInto(&ed)
	b = Unregister(b, node("b", img(2, "x")), c)
	require.Equal(t, []string{"y"}, b)
	require.Equal(t, []string{"y"}, Strays(b, nil), "y stays registered for b, whose object is gone")
	require.Nil(t, Strays(b, []string{"y"}))
	// The last node of a name leaves it; registered again it takes the
	// size its new first node lists.
	Unregister(a, node("a", img(1, "x")), c)
	Register(nil, node("c", img(9, "x")), c)
	require.Equal(t, map[string]sum{"x": {Size: 9, NumNodes: 1}, "y": {Size: 2, NumNodes: 1}}, contents(&ed))
}

// mapCounts is a plain reference registry: per name the size and the set
// of node names, as upstream keeps it.
type mapCounts struct {
	size  map[string]int64
	nodes map[string]map[string]bool
	node  string
}

func (m *mapCounts) Join(name string, size int64) {
	if m.nodes[name] == nil {
		m.nodes[name], m.size[name] = map[string]bool{}, size
	}
	m.nodes[name][m.node] = true
}

func (m *mapCounts) Leave(name string) {
	delete(m.nodes[name], m.node)
	if len(m.nodes[name]) == 0 {
		delete(m.nodes, name)
		delete(m.size, name)
	}
}

// Large registrations (maps instead of scans) count as small ones, and
// both as upstream's per-image node sets: random nodes with up to 60
// names each, registered and unregistered with other objects.
func TestLargeRegistrationsMatchSets(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	randNode := func(name string) *v1.Node {
		n := node(name)
		for i := r.Intn(30); i > 0; i-- {
			var names []string
			for j := 1 + r.Intn(3); j > 0; j-- {
				names = append(names, fmt.Sprint("i", r.Intn(40)))
			}
			n.Status.Images = append(n.Status.Images, img(int64(r.Intn(5)), names...))
		}
		return n
	}
	var ed immutable.MapEditor[sum]
	immutable.Map[sum]{}.EditInto(&ed)
	ref := &mapCounts{size: map[string]int64{}, nodes: map[string]map[string]bool{}}
	members := map[string][]string{}
	for step := 0; step < 2000; step++ {
		n := randNode(fmt.Sprint("n", r.Intn(6)))
		ref.node = n.Name
		if r.Intn(2) == 0 {
			members[n.Name] = Register(members[n.Name], n, TableCounts{Ed: &ed})
			// upstream: insert into every listed name's set
			for _, im := range n.Status.Images {
				for _, name := range im.Names {
					if ref.nodes[name] == nil || !ref.nodes[name][n.Name] {
						ref.Join(name, im.SizeBytes)
					}
				}
			}
		} else {
			members[n.Name] = Unregister(members[n.Name], n, TableCounts{Ed: &ed})
			for _, im := range n.Status.Images {
				for _, name := range im.Names {
					if ref.nodes[name][n.Name] {
						ref.Leave(name)
					}
				}
			}
		}
		want := map[string]sum{}
		for name, set := range ref.nodes {
			want[name] = sum{Size: ref.size[name], NumNodes: len(set)}
		}
		m := ed.Done()
		got := map[string]sum{}
		m.Range(func(k string, v sum) bool { got[k] = v; return true })
		require.Equal(t, want, got, "step %d", step)
		m.EditInto(&ed)
		for name, list := range members {
			var listed []string // what a node object of name listing all but two of its members would
			if len(list) > 2 {
				listed = list[2:]
				require.ElementsMatch(t, list[:2], Strays(list, listed), "step %d", step)
			}
			var want []string
			for im, set := range ref.nodes {
				if set[name] {
					want = append(want, im)
				}
			}
			require.ElementsMatch(t, want, list, "step %d: members of %s", step, name)
		}
	}
}
