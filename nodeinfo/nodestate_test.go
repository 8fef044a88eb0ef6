package nodeinfo

import (
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
)

func keysOf(ps []*PodInfo) []string {
	if ps == nil {
		return nil
	}
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Key()
	}
	return out
}

func TestNodeStateNew(t *testing.T) {
	next, last := counter()
	next() // the cache has issued 1 already
	s := NewNodeState(next)
	require.Equal(t, int64(2), s.Generation())
	require.Equal(t, int64(2), last())
	require.Nil(t, s.Node())
	require.Zero(t, s.NumPods())

	n := s.Freeze()
	require.Nil(t, n.Node())
	require.Equal(t, "", n.NodeName())
	require.Nil(t, n.Pods())
	require.Nil(t, n.PodsWithAffinity())
	require.Nil(t, n.PodsWithRequiredAntiAffinity())
	require.Nil(t, n.PodsWithRequiredNonHostScopedAntiAffinity())
	require.Zero(t, n.NumPodsWithRequiredNonHostScopedAntiAffinity())
	require.Nil(t, n.PodWithRequiredNonHostScopedAntiAffinityAt(0))
	require.Equal(t, HostPortInfo{}, n.UsedPorts())
	require.Equal(t, map[string]ImageStateSummary{}, n.ImageStates())
	require.Equal(t, map[string]int{}, n.PVCRefCounts())
	require.Equal(t, Resource{}, n.Requested())
	require.Equal(t, Resource{}, n.NonZeroRequested())
	require.Equal(t, Resource{}, n.Allocatable())
	require.Equal(t, int64(2), n.Generation())

	// A nil source falls back to the process-wide counter.
	g := NextGeneration()
	require.Greater(t, NewNodeState(nil).Generation(), g)
}

func TestNodeStateAddPodTotals(t *testing.T) {
	next, last := counter()
	s := NewNodeState(next)
	p1 := mustPodInfo(t, mkPod("p1", withContainers(ctr("a", rl("cpu", "100m", "memory", "1Gi", "example.com/foo", "2", "pods", "3")))))
	p2 := mustPodInfo(t, mkPod("p2", withContainers(ctr("a", rl("ephemeral-storage", "1Ki"))), withAffinity(requiredAntiAff)))
	s.AddPod(p1)
	require.Equal(t, last(), s.Generation())
	s.AddPod(p2)
	require.Equal(t, last(), s.Generation())
	require.Equal(t, int64(3), s.Generation())
	s.AddPod(nil) // ignored
	require.Equal(t, int64(3), s.Generation())

	n := s.Freeze()
	require.Equal(t, 2, n.NumPods())
	require.Equal(t, []string{"p1", "p2"}, keysOf(n.Pods()))
	require.Equal(t, []string{"p2"}, keysOf(n.PodsWithAffinity()))
	require.Equal(t, []string{"p2"}, keysOf(n.PodsWithRequiredAntiAffinity()))
	require.Equal(t, []string{"p2"}, keysOf(n.PodsWithRequiredNonHostScopedAntiAffinity()))
	require.Equal(t, 1, n.NumPodsWithAffinity())
	require.Equal(t, 1, n.NumPodsWithRequiredAntiAffinity())
	require.Equal(t, 1, n.NumPodsWithRequiredNonHostScopedAntiAffinity())
	require.Same(t, p1, n.PodAt(0))
	require.Same(t, p2, n.PodWithAffinityAt(0))
	require.Same(t, p2, n.PodWithRequiredAntiAffinityAt(0))
	require.Same(t, p2, n.PodWithRequiredNonHostScopedAntiAffinityAt(0))
	require.Nil(t, n.PodWithRequiredNonHostScopedAntiAffinityAt(1))
	require.Nil(t, n.PodWithRequiredNonHostScopedAntiAffinityAt(-1))
	require.Nil(t, n.PodAt(2))
	require.Nil(t, n.PodAt(-1))
	// AllowedPodNumber is never aggregated.
	require.Equal(t, Resource{MilliCPU: 100, Memory: 1024 * mi, EphemeralStorage: 1024}.WithScalar("example.com/foo", 2), n.Requested())
	require.Equal(t, Resource{MilliCPU: 200, Memory: 1024*mi + 200*mi}, n.NonZeroRequested())
}

func TestNodeStateRemoveOrder(t *testing.T) {
	next, _ := counter()
	s := NewNodeState(next)
	for i := range 3 {
		s.AddPod(mustPodInfo(t, mkPod(fmt.Sprintf("p%d", i), withAffinity(podAffinity))))
	}
	require.NoError(t, s.RemovePod("p0", true, false, false))
	n := s.Freeze()
	require.Equal(t, []string{"p2", "p1"}, keysOf(n.Pods()))
	require.Equal(t, []string{"p2", "p1"}, keysOf(n.PodsWithAffinity()))
	require.NoError(t, s.RemovePod("p1", true, false, false))
	require.Equal(t, []string{"p2"}, keysOf(s.Freeze().Pods()))
	require.NoError(t, s.RemovePod("p2", true, false, false))
	n = s.Freeze()
	require.Nil(t, n.Pods())
	require.Nil(t, n.PodsWithAffinity())
	require.Zero(t, s.NumPods())
	require.Equal(t, Resource{}, n.Requested())
	require.Equal(t, Resource{}, n.NonZeroRequested())
}

// RemovePodInfo finds the stored PodInfo by pointer, falls back to the key
// for a PodInfo it does not hold, and leaves the same state RemovePod would.
func TestNodeStateRemovePodInfo(t *testing.T) {
	next, _ := counter()
	byInfo, byKey := NewNodeState(next), NewNodeState(next)
	var ps []*PodInfo
	for i := range 4 {
		p := mustPodInfo(t, mkPod(fmt.Sprintf("p%d", i), withAffinity(podAffinity), withContainers(ctr("a", rl("cpu", fmt.Sprint(i+1))))))
		ps = append(ps, p)
		byInfo.AddPod(p)
		byKey.AddPod(p)
	}
	require.NoError(t, byInfo.RemovePodInfo(ps[1], true, false, false))
	require.NoError(t, byKey.RemovePod("p1", true, false, false))
	// A different PodInfo of a stored key (an equal copy): found by key.
	other := mustPodInfo(t, mkPod("p3", withAffinity(podAffinity)))
	require.NoError(t, byInfo.RemovePodInfo(other, true, false, false))
	require.NoError(t, byKey.RemovePod("p3", true, false, false))
	a, b := byInfo.Freeze(), byKey.Freeze()
	require.Equal(t, keysOf(b.Pods()), keysOf(a.Pods()))
	require.Equal(t, []string{"p0", "p2"}, keysOf(a.Pods()))
	require.Equal(t, keysOf(b.PodsWithAffinity()), keysOf(a.PodsWithAffinity()))
	require.Equal(t, b.Requested(), a.Requested())
	require.Equal(t, int64(4000), a.Requested().MilliCPU)

	require.ErrorIs(t, byInfo.RemovePodInfo(nil, false, false, false), ErrNilPod)
	require.ErrorIs(t, byInfo.RemovePodInfo(ps[1], false, false, false), ErrPodNotOnNode, "removed already")
	require.Equal(t, []string{"p0", "p2"}, keysOf(byInfo.Freeze().Pods()), "a failed removal changes nothing")
}

func TestNodeStateScalarKeyKept(t *testing.T) {
	next, _ := counter()
	s := NewNodeState(next)
	p := mustPodInfo(t, mkPod("p", withContainers(ctr("a", rl("example.com/foo", "2")))))
	plain := mustPodInfo(t, mkPod("q", withContainers(ctr("a", rl("cpu", "1")))))
	s.AddPod(plain)
	require.Nil(t, s.Freeze().Requested().ScalarResources(), "no map before the first scalar pod")
	s.AddPod(p)
	require.Equal(t, map[v1.ResourceName]int64{"example.com/foo": 2}, s.Freeze().Requested().ScalarResources())
	require.NoError(t, s.RemovePod("p", false, false, false))
	n := s.Freeze()
	require.Equal(t, map[v1.ResourceName]int64{"example.com/foo": 0}, n.Requested().ScalarResources())
	require.Equal(t, 1, n.Requested().NumScalars())
	require.Equal(t, int64(1000), n.Requested().MilliCPU)
}

func TestNodeStateRemoveNotFound(t *testing.T) {
	next, _ := counter()
	for _, withNodeObj := range []bool{false, true} {
		t.Run(fmt.Sprintf("node=%v", withNodeObj), func(t *testing.T) {
			s := NewNodeState(next)
			if withNodeObj {
				s.SetNode(mkNode("n1", nil))
			}
			s.AddPod(mustPodInfo(t, mkPod("p", withContainers(ctr("a", rl("cpu", "1", "example.com/foo", "1"))), withHostPort("", "", 80), withPVCs("c"))))
			before := s.Freeze()
			gen := s.Generation()

			err := s.RemovePod("missing", true, true, true)
			require.ErrorIs(t, err, ErrPodNotOnNode)
			require.Contains(t, err.Error(), "missing")
			require.Equal(t, gen, s.Generation())
			after := s.Freeze()
			require.Same(t, before, after, "nothing changed, so the previous freeze is returned")
			require.Equal(t, Resource{MilliCPU: 1000}.WithScalar("example.com/foo", 1), after.Requested())
			require.Equal(t, 1, after.PVCRefCount("ns/c"))
			require.True(t, after.HasHostPort("", "", 80))

			require.ErrorIs(t, s.RemovePod("", false, false, false), ErrEmptyUID)
			require.Equal(t, gen, s.Generation())
		})
	}
}

// The three sub-lists, each filled in pod order with the pods that qualify
// for it (a pod whose required anti-affinity terms are all hostname-scoped
// is in the anti-affinity list only; one with a hostname term and a zone
// term is in both), each removal moving the list's last element into the
// removed one's slot, as upstream's removeFromSlice.
func TestNodeStateSubListsOrder(t *testing.T) {
	next, _ := counter()
	s := NewNodeState(next)
	affs := []*v1.Affinity{requiredAntiAff, hostnameAntiAff, mixedAntiAff, podAffinity, mixedAntiAff, hostnameAntiAff, requiredAntiAff, nil}
	for i, a := range affs {
		s.AddPod(mustPodInfo(t, mkPod(fmt.Sprintf("p%d", i), withAffinity(a))))
	}
	n := s.Freeze()
	require.Equal(t, []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6", "p7"}, keysOf(n.Pods()))
	require.Equal(t, []string{"p0", "p1", "p2", "p3", "p4", "p5", "p6"}, keysOf(n.PodsWithAffinity()))
	require.Equal(t, []string{"p0", "p1", "p2", "p4", "p5", "p6"}, keysOf(n.PodsWithRequiredAntiAffinity()))
	require.Equal(t, []string{"p0", "p2", "p4", "p6"}, keysOf(n.PodsWithRequiredNonHostScopedAntiAffinity()))
	require.Equal(t, 4, s.NumPodsWithRequiredNonHostScopedAntiAffinity())
	for i, k := range []string{"p0", "p2", "p4", "p6"} {
		require.Equal(t, k, n.PodWithRequiredNonHostScopedAntiAffinityAt(i).Key())
	}

	remove := func(k string) {
		t.Helper()
		p := mustPodInfo(t, mkPod(k, withAffinity(affs[k[1]-'0'])))
		require.NoError(t, s.RemovePod(k, p.HasAffinity(), p.HasRequiredAntiAffinity(), p.HasRequiredNonHostScopedAntiAffinity()))
	}
	remove("p2")
	n2 := s.Freeze()
	require.Equal(t, []string{"p0", "p1", "p7", "p3", "p4", "p5", "p6"}, keysOf(n2.Pods()))
	require.Equal(t, []string{"p0", "p1", "p6", "p3", "p4", "p5"}, keysOf(n2.PodsWithAffinity()))
	require.Equal(t, []string{"p0", "p1", "p6", "p4", "p5"}, keysOf(n2.PodsWithRequiredAntiAffinity()))
	require.Equal(t, []string{"p0", "p6", "p4"}, keysOf(n2.PodsWithRequiredNonHostScopedAntiAffinity()))
	remove("p0")
	remove("p5") // hostname-only: the non-host-scoped list is not searched
	n3 := s.Freeze()
	require.Equal(t, []string{"p4", "p6"}, keysOf(n3.PodsWithRequiredNonHostScopedAntiAffinity()))
	require.Equal(t, []string{"p4", "p1", "p6"}, keysOf(n3.PodsWithRequiredAntiAffinity()))
	remove("p4")
	remove("p6")
	n4 := s.Freeze()
	require.Nil(t, n4.PodsWithRequiredNonHostScopedAntiAffinity())
	require.Zero(t, n4.NumPodsWithRequiredNonHostScopedAntiAffinity())
	require.Equal(t, []string{"p1"}, keysOf(n4.PodsWithRequiredAntiAffinity()))
	require.Equal(t, []string{"p0", "p2", "p4", "p6"}, keysOf(n.PodsWithRequiredNonHostScopedAntiAffinity()), "earlier freeze unchanged")
	require.Equal(t, []string{"p0", "p6", "p4"}, keysOf(n2.PodsWithRequiredNonHostScopedAntiAffinity()), "earlier freeze unchanged")
}

func TestNodeStateAffinityQuirk(t *testing.T) {
	next, _ := counter()
	s := NewNodeState(next)
	p := mustPodInfo(t, mkPod("p", withAffinity(requiredAntiAff)))
	s.AddPod(p)
	// The removal pod object had no affinity: the sub-lists are not searched.
	require.NoError(t, s.RemovePod("p", false, false, false))
	n := s.Freeze()
	require.Nil(t, n.Pods())
	require.Equal(t, []string{"p"}, keysOf(n.PodsWithAffinity()))
	require.Equal(t, []string{"p"}, keysOf(n.PodsWithRequiredAntiAffinity()))
	require.Equal(t, []string{"p"}, keysOf(n.PodsWithRequiredNonHostScopedAntiAffinity()))

	// A later removal with flags cleans the sub-lists but still fails
	// (no bump), as upstream.
	gen := s.Generation()
	err := s.RemovePod("p", true, true, true)
	require.True(t, errors.Is(err, ErrPodNotOnNode))
	require.Equal(t, gen, s.Generation())
	n2 := s.Freeze()
	require.Nil(t, n2.PodsWithAffinity())
	require.Nil(t, n2.PodsWithRequiredAntiAffinity())
	require.Nil(t, n2.PodsWithRequiredNonHostScopedAntiAffinity())
	require.Equal(t, []string{"p"}, keysOf(n.PodsWithAffinity()), "earlier freeze unchanged")

	// A removal object whose anti-affinity is hostname-scoped leaves the
	// pod in the non-host-scoped list (upstream asks the removal object).
	s.AddPod(p)
	require.NoError(t, s.RemovePod("p", true, true, false))
	n3 := s.Freeze()
	require.Nil(t, n3.Pods())
	require.Nil(t, n3.PodsWithAffinity())
	require.Nil(t, n3.PodsWithRequiredAntiAffinity())
	require.Equal(t, []string{"p"}, keysOf(n3.PodsWithRequiredNonHostScopedAntiAffinity()))
}

func TestNodeStateHostPorts(t *testing.T) {
	next, _ := counter()
	s := NewNodeState(next)
	a := mustPodInfo(t, mkPod("a", withHostPort("", "", 80), withHostPort("127.0.0.1", v1.ProtocolUDP, 53)))
	b := mustPodInfo(t, mkPod("b", withHostPort("0.0.0.0", v1.ProtocolTCP, 80)))
	s.AddPod(a)
	s.AddPod(b)
	n := s.Freeze()
	require.Equal(t, HostPortInfo{
		"0.0.0.0":   {{Protocol: "TCP", Port: 80}: {}},
		"127.0.0.1": {{Protocol: "UDP", Port: 53}: {}},
	}, n.UsedPorts())
	require.Equal(t, 2, n.NumUsedPorts())
	require.True(t, n.HasHostPort("0.0.0.0", "TCP", 80))
	require.True(t, n.HasHostPort("", "", 80))
	require.False(t, n.HasHostPort("10.0.0.1", "TCP", 80))
	require.True(t, n.HostPortConflict("10.0.0.1", "TCP", 80))
	require.True(t, n.HostPortConflict("", "UDP", 53))
	require.False(t, n.HostPortConflict("10.0.0.1", "UDP", 53))

	// A set, not a multiset: removing b forgets the port a still uses.
	require.NoError(t, s.RemovePod("b", false, false, false))
	n = s.Freeze()
	require.Equal(t, HostPortInfo{"127.0.0.1": {{Protocol: "UDP", Port: 53}: {}}}, n.UsedPorts())
	require.NoError(t, s.RemovePod("a", false, false, false))
	require.Equal(t, HostPortInfo{}, s.Freeze().UsedPorts())
}

func TestNodeStatePVCRefCounts(t *testing.T) {
	next, _ := counter()
	s := NewNodeState(next)
	a := mustPodInfo(t, mkPod("a", withPVCs("x", "x", "y"), withEphemeralVolume()))
	b := mustPodInfo(t, mkPod("b", withPVCs("y")))
	s.AddPod(a)
	s.AddPod(b)
	n := s.Freeze()
	require.Equal(t, map[string]int{"ns/x": 2, "ns/y": 2}, n.PVCRefCounts())
	require.Equal(t, 2, n.NumPVCRefCounts())
	require.Equal(t, 2, n.PVCRefCount("ns/x"))
	require.Equal(t, 0, n.PVCRefCount("ns/eph"))
	var seen []string
	n.RangePVCRefCounts(func(k string, c int) bool { seen = append(seen, fmt.Sprint(k, "=", c)); return true })
	require.Equal(t, []string{"ns/x=2", "ns/y=2"}, seen)
	seen = nil
	n.RangePVCRefCounts(func(k string, c int) bool { seen = append(seen, k); return false })
	require.Equal(t, []string{"ns/x"}, seen)

	require.NoError(t, s.RemovePod("a", false, false, false))
	require.Equal(t, map[string]int{"ns/y": 1}, s.Freeze().PVCRefCounts())
	require.NoError(t, s.RemovePod("b", false, false, false))
	require.Equal(t, map[string]int{}, s.Freeze().PVCRefCounts())
}

func TestNodeStateNodeAndImages(t *testing.T) {
	next, last := counter()
	s := NewNodeState(next)
	node := mkNode("n1", rl("cpu", "4", "memory", "8Gi", "pods", "110", "example.com/foo", "3"))
	s.SetNode(node)
	require.Equal(t, last(), s.Generation())
	n := s.Freeze()
	require.Same(t, node, n.Node())
	require.Equal(t, "n1", n.NodeName())
	require.Equal(t, Resource{MilliCPU: 4000, Memory: 8 * 1024 * mi, AllowedPodNumber: 110}.WithScalar("example.com/foo", 3), n.Allocatable())

	// Allocatable is recomputed from scratch.
	node2 := mkNode("n1", rl("cpu", "2"))
	s.SetNode(node2)
	require.Equal(t, Resource{MilliCPU: 2000}, s.Freeze().Allocatable())
	require.Equal(t, Resource{MilliCPU: 4000, Memory: 8 * 1024 * mi, AllowedPodNumber: 110}.WithScalar("example.com/foo", 3), n.Allocatable(), "earlier freeze unchanged")

	// Images: no generation bump, but a new freeze.
	gen := s.Generation()
	before := s.Freeze()
	imgs := map[string]ImageStateSummary{"nginx:1": {Size: 100, NumNodes: 2}}
	s.SetImageStates(imgs)
	require.Equal(t, gen, s.Generation())
	after := s.Freeze()
	require.NotSame(t, before, after)
	require.Equal(t, gen, after.Generation())
	require.Equal(t, imgs, after.ImageStates())
	st, ok := after.ImageState("nginx:1")
	require.True(t, ok)
	require.Equal(t, ImageStateSummary{Size: 100, NumNodes: 2}, st)
	_, ok = after.ImageState("redis")
	require.False(t, ok)
	require.Equal(t, 1, after.NumImageStates())
	require.Equal(t, map[string]ImageStateSummary{}, before.ImageStates())

	// ClearNode: node gone, allocatable and images kept, generation bumped.
	s.ClearNode()
	require.Equal(t, last(), s.Generation())
	c := s.Freeze()
	require.Nil(t, c.Node())
	require.Nil(t, s.Node())
	require.Equal(t, Resource{MilliCPU: 2000}, c.Allocatable())
	require.Equal(t, imgs, c.ImageStates())

	// SetNode(nil) does not panic.
	s.SetNode(nil)
	require.Equal(t, Resource{}, s.Freeze().Allocatable())
}

func TestNodeStateGenerations(t *testing.T) {
	next, last := counter()
	s := NewNodeState(next)
	seen := []int64{s.Generation()}
	step := func(f func()) {
		f()
		require.Equal(t, last(), s.Generation())
		require.Greater(t, s.Generation(), seen[len(seen)-1])
		seen = append(seen, s.Generation())
	}
	p := mustPodInfo(t, mkPod("p"))
	step(func() { s.SetNode(mkNode("n", nil)) })
	step(func() { s.AddPod(p) })
	step(func() { require.NoError(t, s.RemovePod("p", false, false, false)) })
	step(func() { s.ClearNode() })
	require.Len(t, seen, 5)
}

func TestFreezeSharingAndIdentity(t *testing.T) {
	next, _ := counter()
	s := NewNodeState(next)
	s.SetNode(mkNode("n", nil))
	a := mustPodInfo(t, mkPod("a", withHostPort("", "", 80), withPVCs("x"), withContainers(ctr("c", rl("example.com/foo", "1")))))
	s.AddPod(a)
	f1 := s.Freeze()
	require.Same(t, f1, s.Freeze(), "unchanged state returns the same NodeInfo")
	require.Same(t, f1, s.Clone())

	// A plain pod changes only the pod lists and totals: ports, PVCs and
	// scalars are shared with the previous freeze.
	s.AddPod(mustPodInfo(t, mkPod("b")))
	f2 := s.Freeze()
	require.NotSame(t, f1, f2)
	require.Equal(t, 1, f1.NumPods())
	require.Equal(t, 2, f2.NumPods())
	require.True(t, &f1.usedPorts[0] == &f2.usedPorts[0], "ports shared")
	require.True(t, &f1.pvcRefs[0] == &f2.pvcRefs[0], "pvcs shared")
	require.True(t, &f1.requested.scalars[0] == &f2.requested.scalars[0], "scalars shared")

	// Never shared with the mutable state.
	require.False(t, &s.usedPorts[0] == &f2.usedPorts[0])
	require.False(t, &s.pvcRefs[0] == &f2.pvcRefs[0])
	require.False(t, &s.reqScalars[0] == &f2.requested.scalars[0])
	require.False(t, &s.pods[0] == &f2.podBuf[0])

	// Freeze shares them from what the state kept of its last result, not
	// by reading that NodeInfo: through further freezes, and from a thawed
	// copy (whose last result is the NodeInfo it was thawed from).
	s.AddPod(mustPodInfo(t, mkPod("c")))
	f3 := s.Freeze()
	require.True(t, &f1.usedPorts[0] == &f3.usedPorts[0], "ports still shared")
	require.True(t, &f1.pvcRefs[0] == &f3.pvcRefs[0], "pvcs still shared")
	require.True(t, &f1.requested.scalars[0] == &f3.requested.scalars[0], "scalars still shared")
	th := f3.Thaw(next)
	th.AddPod(mustPodInfo(t, mkPod("d")))
	f4 := th.Freeze()
	require.Equal(t, 4, f4.NumPods())
	require.True(t, &f3.usedPorts[0] == &f4.usedPorts[0], "thawed: ports shared")
	require.True(t, &f3.pvcRefs[0] == &f4.pvcRefs[0], "thawed: pvcs shared")
	require.True(t, &f3.requested.scalars[0] == &f4.requested.scalars[0], "thawed: scalars shared")
	// A change of the ports is copied, and the next freeze shares the copy.
	th.AddPod(mustPodInfo(t, mkPod("e", withHostPort("", "", 81))))
	f5 := th.Freeze()
	require.False(t, &f4.usedPorts[0] == &f5.usedPorts[0])
	require.Len(t, f5.usedPorts, 2)
	require.Len(t, f4.usedPorts, 1, "the earlier copy is unchanged")
	th.AddPod(mustPodInfo(t, mkPod("f")))
	require.True(t, &f5.usedPorts[0] == &th.Freeze().usedPorts[0])
}

// nodeInfoView is everything observable about a NodeInfo, as plain values.
type nodeInfoView struct {
	Node                                 *v1.Node
	Name                                 string
	Pods, Aff, Anti, NonHost             []*PodInfo
	NumPods, NumAff, NumAnti, NumNonHost int
	Requested, NonZero, Alloc            Resource
	Scalars                              []ScalarQuantity
	Ports                                HostPortInfo
	Images                               map[string]ImageStateSummary
	PVCs                                 map[string]int
	Generation                           int64
	String                               string
}

func viewOf(n *NodeInfo) nodeInfoView {
	return nodeInfoView{
		Node: n.Node(), Name: n.NodeName(),
		Pods: n.Pods(), Aff: n.PodsWithAffinity(), Anti: n.PodsWithRequiredAntiAffinity(), NonHost: n.PodsWithRequiredNonHostScopedAntiAffinity(),
		NumPods: n.NumPods(), NumAff: n.NumPodsWithAffinity(), NumAnti: n.NumPodsWithRequiredAntiAffinity(),
		NumNonHost: n.NumPodsWithRequiredNonHostScopedAntiAffinity(),
		Requested:  n.Requested(), NonZero: n.NonZeroRequested(), Alloc: n.Allocatable(),
		Scalars: n.Requested().Scalars(),
		Ports:   n.UsedPorts(), Images: n.ImageStates(), PVCs: n.PVCRefCounts(),
		Generation: n.Generation(), String: n.String(),
	}
}

// deepCopyNodeInfo copies every slice of n into new backing arrays (maps
// handed to SetImageStates are immutable by contract and copied too).
func deepCopyNodeInfo(n *NodeInfo) *NodeInfo {
	c := n.copyFields() // every field but the extension
	c.podBuf = slices.Clone(n.podBuf)
	c.requested.scalars = slices.Clone(n.requested.scalars)
	c.allocatable.scalars = slices.Clone(n.allocatable.scalars)
	c.usedPorts = slices.Clone(n.usedPorts)
	c.pvcRefs = slices.Clone(n.pvcRefs)
	c.imageNames = slices.Clone(n.imageNames)
	if n.imageStates != nil {
		c.imageStates = make(map[string]ImageStateSummary, len(n.imageStates))
		for k, v := range n.imageStates {
			c.imageStates[k] = v
		}
	}
	return c
}

func TestFreezeImmutableUnderMutation(t *testing.T) {
	next, _ := counter()
	s := NewNodeState(next)
	s.SetNode(mkNode("n", rl("cpu", "8", "hugepages-2Mi", "10Mi")))
	s.SetImageStates(map[string]ImageStateSummary{"img": {Size: 1, NumNodes: 1}})
	mk := func(uid string, muts ...func(*v1.Pod)) *PodInfo { return mustPodInfo(t, mkPod(uid, muts...)) }
	s.AddPod(mk("a", withContainers(ctr("c", rl("cpu", "1", "example.com/foo", "2"))), withHostPort("", "", 80), withPVCs("x", "y"), withAffinity(requiredAntiAff)))
	s.AddPod(mk("b", withHostPort("10.0.0.1", v1.ProtocolUDP, 53), withPVCs("x"), withAffinity(podAffinity)))
	s.AddPod(mk("c"))

	frozen := s.Freeze()
	wantView := viewOf(frozen)
	wantDeep := deepCopyNodeInfo(frozen)

	// Heavy mutation: removals, adds with new scalars/ports/PVCs, node and
	// image replacement, repeated freezes.
	require.NoError(t, s.RemovePod("a", true, true, true))
	for i := range 20 {
		s.AddPod(mk(fmt.Sprintf("n%d", i),
			withContainers(ctr("c", rl("cpu", "1", "example.com/foo", "1", "example.com/bar", "1"))),
			withHostPort("", "", int32(1000+i)), withPVCs("x", fmt.Sprintf("z%d", i)), withAffinity(requiredAntiAff)))
		if i%3 == 0 {
			_ = s.Freeze()
		}
	}
	require.NoError(t, s.RemovePod("b", true, false, false))
	require.NoError(t, s.RemovePod("c", false, false, false))
	for i := range 10 {
		require.NoError(t, s.RemovePod(fmt.Sprintf("n%d", i), true, true, true))
	}
	s.SetNode(mkNode("n", rl("cpu", "1")))
	s.SetImageStates(map[string]ImageStateSummary{"other": {Size: 2, NumNodes: 3}})
	_ = s.Freeze()
	s.ClearNode()
	_ = s.Freeze()

	require.Equal(t, wantView, viewOf(frozen))
	require.Equal(t, wantDeep, frozen)
}

func TestNodeInfoAccessorsReturnCopies(t *testing.T) {
	next, _ := counter()
	s := NewNodeState(next)
	s.SetNode(mkNode("n", rl("example.com/foo", "4")))
	s.SetImageStates(map[string]ImageStateSummary{"img": {Size: 1, NumNodes: 1}})
	s.AddPod(mustPodInfo(t, mkPod("a", withContainers(ctr("c", rl("example.com/foo", "2"))), withHostPort("", "", 80), withPVCs("x"), withAffinity(requiredAntiAff))))
	s.AddPod(mustPodInfo(t, mkPod("b")))
	n := s.Freeze()
	want := deepCopyNodeInfo(n)
	wantView := viewOf(n)

	pods := n.Pods()
	pods[0], pods[1] = pods[1], nil
	aff := n.PodsWithAffinity()
	aff[0] = nil
	_ = append(n.PodsWithRequiredAntiAffinity()[:0], nil)
	nonHost := n.PodsWithRequiredNonHostScopedAntiAffinity()
	nonHost[0] = nil
	n.Requested().Scalars()[0].Value = 100
	n.Requested().ScalarResources()["example.com/foo"] = 100
	n.Allocatable().Scalars()[0].Value = 100
	ports := n.UsedPorts()
	ports["0.0.0.0"][ProtocolPort{Protocol: "UDP", Port: 1}] = struct{}{}
	ports["1.2.3.4"] = nil
	n.ImageStates()["img"] = ImageStateSummary{Size: 9}
	n.PVCRefCounts()["ns/x"] = 9

	require.Equal(t, want, n)
	require.Equal(t, wantView, viewOf(n))
}

func TestNodeInfoNilSafe(t *testing.T) {
	var n *NodeInfo
	require.Nil(t, n.Node())
	require.Equal(t, "", n.NodeName())
	require.Zero(t, n.NumPods())
	require.Nil(t, n.PodAt(0))
	require.Nil(t, n.Pods())
	require.Nil(t, n.PodsWithAffinity())
	require.Nil(t, n.PodsWithRequiredAntiAffinity())
	require.Nil(t, n.PodsWithRequiredNonHostScopedAntiAffinity())
	require.Zero(t, n.NumPodsWithRequiredNonHostScopedAntiAffinity())
	require.Nil(t, n.PodWithRequiredNonHostScopedAntiAffinityAt(0))
	require.Equal(t, HostPortInfo{}, n.UsedPorts())
	require.False(t, n.HasHostPort("", "", 1))
	require.Equal(t, map[string]ImageStateSummary{}, n.ImageStates())
	require.Equal(t, map[string]int{}, n.PVCRefCounts())
	require.Zero(t, n.PVCRefCount("x"))
	require.Zero(t, n.Generation())
	require.Equal(t, "<nil>", n.String())
}

// newNodeInfoForTest returns the frozen aggregate of node with pods added
// in order, drawing generations from NextGeneration.
func newNodeInfoForTest(node *v1.Node, pods ...*PodInfo) *NodeInfo {
	s := NewNodeState(NextGeneration)
	if node != nil {
		s.SetNode(node)
	}
	for _, p := range pods {
		s.AddPod(p)
	}
	return s.Freeze()
}

func TestNewNodeInfoForTest(t *testing.T) {
	node := mkNode("n", rl("cpu", "2"))
	p := mustPodInfo(t, mkPod("p", withContainers(ctr("c", rl("cpu", "500m")))))
	n := newNodeInfoForTest(node, p)
	require.Equal(t, "n", n.NodeName())
	require.Equal(t, int64(500), n.Requested().MilliCPU)
	require.Equal(t, int64(2000), n.Allocatable().MilliCPU)
	require.Contains(t, n.String(), "pod-p")
}

// TestFrozenReadersRace reads published NodeInfos and shared PodInfos from
// other goroutines while the owner keeps mutating and freezing; under -race
// any write to published memory is reported.
func TestFrozenReadersRace(t *testing.T) {
	s := NewNodeState(NextGeneration)
	s.SetNode(mkNode("n", rl("cpu", "8", "example.com/foo", "4")))
	mk := func(i int) *PodInfo {
		return mustPodInfo(t, mkPod(fmt.Sprintf("p%d", i),
			withContainers(ctr("c", rl("cpu", "100m", "example.com/foo", "1"))),
			withHostPort("", "", int32(1000+i%5)), withPVCs(fmt.Sprintf("c%d", i%3)), withAffinity(requiredAntiAff)))
	}
	for i := range 5 {
		s.AddPod(mk(i))
	}
	published := make(chan *NodeInfo, 64)
	done := make(chan struct{})
	for range 2 {
		go func() {
			defer func() { done <- struct{}{} }()
			for n := range published {
				v := viewOf(n)
				for i := range n.NumPods() {
					p := n.PodAt(i)
					_, _, _ = p.Requests().Scalars(), p.HostPorts(), p.PVCKeys()
				}
				_ = n.HasHostPort("", "", 1000)
				_ = n.PVCRefCount("ns/c0")
				if v2 := viewOf(n); v2.Generation != v.Generation || v2.NumPods != v.NumPods {
					panic("frozen NodeInfo changed")
				}
			}
		}()
	}
	for i := 5; i < 400; i++ {
		s.AddPod(mk(i))
		require.NoError(t, s.RemovePod(fmt.Sprintf("p%d", i-5), true, true, true))
		if i%7 == 0 {
			s.SetImageStates(map[string]ImageStateSummary{"img": {Size: int64(i), NumNodes: 1}})
		}
		published <- s.Freeze()
	}
	close(published)
	<-done
	<-done
}

// A Freeze after a pod change allocates the NodeInfo and its pod slices
// together, one object, for every pod count up to 64; past that, two. The
// frozen copies stay independent of later changes.
func TestFreezeAllocations(t *testing.T) {
	for _, pods := range []int{1, 7, 8, 9, 16, 31, 32, 33, 63, 64, 65, 91, 92, 100} {
		next, _ := counter()
		s := NewNodeState(next)
		var infos []*PodInfo
		for i := range pods {
			pi, err := NewPodInfo(mkPod(fmt.Sprint("p", i), withContainers(ctr("c", rl("cpu", "100m")))))
			require.NoError(t, err)
			s.AddPod(pi)
			infos = append(infos, pi)
		}
		s.Freeze()
		extra, err := NewPodInfo(mkPod("extra", withContainers(ctr("c", rl("cpu", "100m")))))
		require.NoError(t, err)
		var frozen *NodeInfo
		allocs := testing.AllocsPerRun(50, func() {
			s.AddPod(extra)
			frozen = s.Freeze()
			require.NoError(t, s.RemovePodInfo(extra, false, false, false))
		})
		want := 1.0
		if pods+1 > maxFrozenPods {
			want = 2
		}
		require.Equal(t, want, allocs, "%d pods", pods+1)
		require.Len(t, frozen.Pods(), pods+1)
		require.Equal(t, pods, len(s.Freeze().Pods()))
		require.Len(t, frozen.Pods(), pods+1, "a later Freeze leaves the earlier one alone")
		require.Same(t, infos[0], frozen.Pods()[0])
	}
}

// Every pod count up to maxFrozenPods gets a buffer of its own length from a
// block that holds it (frozenWith panics otherwise), and the buffers of two
// NodeInfos never overlap.
func TestNewFrozenSizes(t *testing.T) {
	for total := 0; total <= 130; total++ {
		a, abuf := newFrozen(total)
		b, bbuf := newFrozen(total)
		require.Len(t, abuf, total)
		require.NotSame(t, a, b)
		for i := range abuf {
			abuf[i], bbuf[i] = &PodInfo{}, nil
		}
		for i := range abuf {
			require.NotNil(t, abuf[i], "total %d index %d", total, i)
		}
	}
	require.Panics(t, func() { frozenWith[[8]*PodInfo](9) })
}

// goSizeClasses are the Go allocator's small size classes up to 1024 bytes
// (runtime/sizeclasses.go).
var goSizeClasses = []uintptr{8, 16, 24, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240, 256,
	288, 320, 352, 384, 416, 448, 480, 512, 576, 640, 704, 768, 896, 1024}

// Each single allocation of a frozen NodeInfo fills a size class exactly
// (the 8-byte header of a pointerful object over 512 bytes counted), in
// increasing order, and the last one holds maxFrozenPods: no byte of a
// class is wasted, so a frozen NodeInfo of a usual node (30-40 pods) costs
// 576 or 640 bytes. It fails when a field is added to NodeInfo without
// retuning frozenAllocs; the NodeInfo is 288 bytes.
func TestFrozenAllocsFillSizeClasses(t *testing.T) {
	require.Equal(t, uintptr(288), unsafe.Sizeof(NodeInfo{}), "NodeInfo size: retune frozenAllocs")
	prev := 0
	for _, fa := range frozenAllocs {
		require.Greater(t, fa.pods, prev)
		prev = fa.pods
		size := unsafe.Sizeof(NodeInfo{}) + uintptr(fa.pods)*unsafe.Sizeof((*PodInfo)(nil))
		if size > 512 {
			size += 8 // malloc header
		}
		require.Contains(t, goSizeClasses, size, "%d pods: %d bytes is not a size class", fa.pods, size)
		n, buf := fa.alloc(fa.pods)
		require.NotNil(t, n)
		require.Len(t, buf, fa.pods)
	}
	require.Equal(t, maxFrozenPods, prev)
	for total := 1; total <= maxFrozenPods; total++ {
		k := frozenClass[total]
		require.GreaterOrEqual(t, frozenAllocs[k].pods, total)
		if k > 0 {
			require.Less(t, frozenAllocs[k-1].pods, total, "total %d: a smaller one holds it", total)
		}
	}
}

// The Prefetch methods only read: after them the state freezes to the very
// NodeInfo it froze to before (nothing marked dirty), its lists are those
// it had, and a later change freezes exactly as on a state never
// prefetched. Lists longer than one cache line and a state never frozen
// (no previous copy) are covered.
func TestNodeStatePrefetchOnlyReads(t *testing.T) {
	next, _ := counter()
	fresh := NewNodeState(next)
	require.NotPanics(t, func() { _ = fresh.PrefetchHead() + fresh.PrefetchLists() })

	build := func() *NodeState {
		next, _ := counter()
		s := NewNodeState(next)
		s.SetNode(mkNode("n", nil))
		for i := range 20 { // 20 pods: three cache lines of pointers
			var muts []func(*v1.Pod)
			switch i % 4 {
			case 1:
				muts = append(muts, withAffinity(podAffinity))
			case 2:
				muts = append(muts, withAffinity(requiredAntiAff))
			case 3:
				muts = append(muts, withAffinity(hostnameAntiAff))
			}
			s.AddPod(mustPodInfo(t, mkPod(fmt.Sprint("p", i), muts...)))
		}
		return s
	}
	s, plain := build(), build()
	require.NotPanics(t, func() { _ = s.PrefetchHead() + s.PrefetchLists() }, "never frozen: no previous copy")
	f := s.Freeze()
	before := viewOf(f)
	_ = s.PrefetchHead() + s.PrefetchLists()
	require.Same(t, f, s.Freeze(), "prefetching marks nothing dirty")
	require.Equal(t, before, viewOf(s.Freeze()))

	extra := mustPodInfo(t, mkPod("x", withAffinity(podAffinity)))
	s.AddPod(extra)
	plain.Freeze()
	plain.AddPod(extra)
	got, want := viewOf(s.Freeze()), viewOf(plain.Freeze())
	require.Equal(t, want.Requested, got.Requested)
	require.Equal(t, len(want.Pods), len(got.Pods))
	require.Equal(t, len(want.Aff), len(got.Aff))
	require.Equal(t, len(want.Anti), len(got.Anti))
	require.Equal(t, len(want.NonHost), len(got.NonHost))
}

// DiffPVCKeys reports, in key order, exactly the claim keys one entry
// references and the other does not (checked against sets built from
// RangePVCKeys, over random add and remove sequences), and nothing for an
// entry and a later freeze that changed no claim.
func TestDiffPVCKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	keys := func(n *NodeInfo) map[string]bool {
		m := map[string]bool{}
		n.RangePVCKeys(func(k string) { m[k] = true })
		return m
	}
	for round := range 200 {
		s := NewNodeState(nil)
		s.SetNode(mkNode("n", rl("cpu", "8", "pods", "110")))
		var live []*PodInfo
		step := func() {
			if len(live) > 0 && r.IntN(3) == 0 {
				i := r.IntN(len(live))
				require.NoError(t, s.RemovePodInfo(live[i], false, false, false))
				live = append(live[:i], live[i+1:]...)
				return
			}
			var claims []string
			for range r.IntN(3) {
				claims = append(claims, fmt.Sprint("c", r.IntN(6)))
			}
			p := mustPodInfo(t, mkPod(fmt.Sprint("p", round, "-", len(live), "-", r.Int()), withNode("n"), withPVCs(claims...)))
			s.AddPod(p)
			live = append(live, p)
		}
		for range r.IntN(5) {
			step()
		}
		a := s.Freeze()
		for range r.IntN(5) {
			step()
		}
		b := s.Freeze()
		ka, kb := keys(a), keys(b)
		var want, got []string
		for _, k := range slices.Sorted(maps.Keys(ka)) {
			if !kb[k] {
				want = append(want, "-"+k)
			}
		}
		for _, k := range slices.Sorted(maps.Keys(kb)) {
			if !ka[k] {
				want = append(want, "+"+k)
			}
		}
		DiffPVCKeys(a, b, func(k string, added bool) {
			if added {
				got = append(got, "+"+k)
			} else {
				got = append(got, "-"+k)
			}
		})
		slices.Sort(want)
		require.Equal(t, want, sortedCopy(got), "round %d", round)
		var order []string
		DiffPVCKeys(a, b, func(k string, _ bool) { order = append(order, k) })
		require.True(t, slices.IsSorted(order), "round %d: %v", round, order)
		require.Equal(t, len(want) == 0, SamePVCKeys(a, b), "round %d", round)
	}
	// Nil entries reference nothing; a freeze with no claim change shares
	// the list and reports nothing.
	s := NewNodeState(nil)
	s.AddPod(mustPodInfo(t, mkPod("x", withNode("n"), withPVCs("a", "b"))))
	a := s.Freeze()
	var got []string
	DiffPVCKeys(nil, a, func(k string, added bool) { got = append(got, fmt.Sprintf("%s %v", k, added)) })
	require.Equal(t, []string{"ns/a true", "ns/b true"}, got)
	s.AddPod(mustPodInfo(t, mkPod("y", withNode("n"))))
	b := s.Freeze()
	DiffPVCKeys(a, b, func(k string, _ bool) { t.Fatalf("reported %s", k) })
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// RemoveHostPorts takes ports out of the set whatever pod uses them,
// bumps the generation only when something went, and never writes the
// ports of the NodeInfo the state was thawed from.
func TestNodeStateRemoveHostPorts(t *testing.T) {
	next, _ := counter()
	s := NewNodeState(next)
	p := mkPod("p1", withContainers(v1.Container{Name: "c", Ports: []v1.ContainerPort{{HostPort: 81, ContainerPort: 80}, {HostPort: 82, ContainerPort: 80}}}))
	s.AddPod(mustPodInfo(t, p))
	frozen := s.Freeze()
	st := frozen.ThawInto(nil, next)
	gen := st.Generation()
	require.False(t, st.RemoveHostPorts([]HostPort{NewHostPort("", "TCP", 99)}))
	require.Equal(t, gen, st.Generation())
	require.True(t, st.RemoveHostPorts([]HostPort{NewHostPort("", "TCP", 81)}))
	require.Greater(t, st.Generation(), gen)
	after := st.Freeze()
	require.False(t, after.HasHostPort("0.0.0.0", "TCP", 81))
	require.True(t, after.HasHostPort("0.0.0.0", "TCP", 82))
	require.Equal(t, 1, after.NumPods())
	require.True(t, frozen.HasHostPort("0.0.0.0", "TCP", 81), "the frozen NodeInfo changed")
}
