package nodeinfo

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A thawed NodeInfo aggregates exactly as the NodeState it was frozen
// from, and never changes the NodeInfo.
func TestThaw(t *testing.T) {
	// Every pod has required anti-affinity; those with an even port a
	// non-host-scoped term, the others hostname terms only, so that the
	// two anti-affinity sub-lists differ.
	mk := func(uid string, cpu int64, claim string, port int32) *PodInfo {
		key := "k"
		if port%2 != 0 {
			key = v1.LabelHostname
		}
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: "ns"}, Spec: v1.PodSpec{
			Containers: []v1.Container{{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: *resource.NewMilliQuantity(cpu, resource.DecimalSI), "example.com/gpu": *resource.NewQuantity(1, resource.DecimalSI)}},
				Ports: []v1.ContainerPort{{HostPort: port}}}},
			Volumes:  []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: claim}}}},
			Affinity: &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: key}}}},
		}}
		pi, err := NewPodInfo(p)
		require.NoError(t, err)
		return pi
	}
	a, b, c := mk("a", 100, "x", 80), mk("b", 200, "y", 81), mk("c", 300, "x", 82)
	t.Run("copy on write", func(t *testing.T) { testThawCopyOnWrite(t, mk) })
	t.Run("same", func(t *testing.T) { testThawSame(t, a, b, c) })
	t.Run("into", func(t *testing.T) { testThawInto(t, mk) })
	ref := NewNodeState(nil)
	ref.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	ref.AddPod(a)
	ref.AddPod(b)
	ni := ref.Freeze()
	before := ni.String()

	th := ni.Thaw(nil)
	require.Same(t, ni, th.Freeze(), "an unchanged thaw freezes to the same NodeInfo")
	require.Equal(t, ni.Generation(), th.Generation())
	require.Equal(t, 1, th.PVCRefCount("ns/x"))
	require.Equal(t, 2, th.NumPodsWithRequiredAntiAffinity())
	require.Equal(t, 1, th.NumPodsWithRequiredNonHostScopedAntiAffinity())
	for _, s := range []*NodeState{ref, th} {
		s.AddPod(c)
		require.NoError(t, s.RemovePod("a", true, true, true))
	}
	got, want := th.Freeze(), ref.Freeze()
	require.Equal(t, want.Requested(), got.Requested())
	require.Equal(t, want.NonZeroRequested(), got.NonZeroRequested())
	require.Equal(t, want.UsedPorts(), got.UsedPorts())
	require.Equal(t, want.PVCRefCounts(), got.PVCRefCounts())
	require.Equal(t, want.Pods(), got.Pods())
	require.Equal(t, want.PodsWithRequiredAntiAffinity(), got.PodsWithRequiredAntiAffinity())
	require.Equal(t, want.PodsWithRequiredNonHostScopedAntiAffinity(), got.PodsWithRequiredNonHostScopedAntiAffinity())
	require.Equal(t, []*PodInfo{c}, got.PodsWithRequiredNonHostScopedAntiAffinity())
	require.Greater(t, got.Generation(), ni.Generation())
	require.Equal(t, before, ni.String(), "the thawed NodeInfo did not change")
	require.Equal(t, 2, ni.NumPods())
}

// Thawed states share the NodeInfo's slices until their first write: any
// number of them (on any goroutines) change their copies without changing
// the NodeInfo or each other, and aggregate as a state that never froze.
func testThawCopyOnWrite(t *testing.T, mk func(uid string, cpu int64, claim string, port int32) *PodInfo) {
	ref := NewNodeState(nil)
	ref.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	var base []*PodInfo
	for i := range 5 {
		p := mk(fmt.Sprint("p", i), int64(100*(i+1)), fmt.Sprint("c", i%2), int32(80+i))
		base = append(base, p)
		ref.AddPod(p)
	}
	ni := ref.Freeze()
	before := ni.String()
	// Each script is applied to a thaw of ni and to a fresh state holding
	// the same pods; both must freeze alike.
	scripts := []func(s *NodeState){
		func(s *NodeState) { s.AddPod(mk("x", 1, "c9", 90)) },
		func(s *NodeState) { require.NoError(t, s.RemovePod("p0", true, true, true)) },
		func(s *NodeState) {
			require.NoError(t, s.RemovePod("p4", true, true, true))
			s.AddPod(mk("y", 2, "c1", 81))
		},
		func(s *NodeState) { s.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}}) },
		func(s *NodeState) {
			for _, p := range base {
				require.NoError(t, s.RemovePod(p.Key(), true, true, true))
			}
		},
	}
	var wg sync.WaitGroup
	got := make([]*NodeInfo, len(scripts))
	for i, script := range scripts {
		wg.Go(func() {
			th := ni.Thaw(nil)
			script(th)
			got[i] = th.Freeze()
		})
	}
	wg.Wait()
	require.Equal(t, before, ni.String(), "the thawed NodeInfo did not change")
	for i, script := range scripts {
		want := NewNodeState(nil)
		want.SetNode(ni.Node())
		for _, p := range base {
			want.AddPod(p)
		}
		script(want)
		w := want.Freeze()
		require.Equal(t, w.Pods(), got[i].Pods(), "script %d", i)
		require.Equal(t, w.PodsWithAffinity(), got[i].PodsWithAffinity(), "script %d", i)
		require.Equal(t, w.PodsWithRequiredAntiAffinity(), got[i].PodsWithRequiredAntiAffinity(), "script %d", i)
		require.Equal(t, w.PodsWithRequiredNonHostScopedAntiAffinity(), got[i].PodsWithRequiredNonHostScopedAntiAffinity(), "script %d", i)
		require.Equal(t, w.Requested(), got[i].Requested(), "script %d", i)
		require.Equal(t, w.UsedPorts(), got[i].UsedPorts(), "script %d", i)
		require.Equal(t, w.PVCRefCounts(), got[i].PVCRefCounts(), "script %d", i)
		require.Equal(t, w.Node(), got[i].Node(), "script %d", i)
	}
}

// ThawInto reuses a state: the result aggregates as a Thaw's, and neither
// what the state froze before nor the NodeInfos it was thawed from change,
// including a NodeInfo whose pod list the state still shared.
func testThawInto(t *testing.T, mk func(uid string, cpu int64, claim string, port int32) *PodInfo) {
	build := func(name string, n int) *NodeInfo {
		s := NewNodeState(nil)
		s.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
		for i := range n {
			s.AddPod(mk(fmt.Sprint(name, i), int64(10*(i+1)), fmt.Sprint("c", i%3), int32(100+i)))
		}
		return s.Freeze()
	}
	a, b, c := build("a", 6), build("b", 3), build("c", 9)
	fa, fb, fc := a.String(), b.String(), c.String()
	st := a.Thaw(nil)
	st.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a2"}}) // pods still a's
	a2 := st.Freeze()
	fa2 := a2.String()
	var prev []*NodeInfo
	var prevFP []string
	for i, ni := range []*NodeInfo{b, c, b, a} {
		st = ni.ThawInto(st, nil)
		ref := ni.Thaw(nil)
		for _, s := range []*NodeState{st, ref} {
			s.AddPod(mk(fmt.Sprint("new", i), 5, "cx", 7))
			require.NoError(t, s.RemovePod(ni.PodAt(0).Key(), true, true, true))
		}
		got, want := st.Freeze(), ref.Freeze()
		require.Equal(t, want.Requested(), got.Requested(), "round %d", i)
		require.Equal(t, want.UsedPorts(), got.UsedPorts(), "round %d", i)
		require.Equal(t, want.PVCRefCounts(), got.PVCRefCounts(), "round %d", i)
		require.Equal(t, want.Pods(), got.Pods(), "round %d", i)
		require.Equal(t, want.PodsWithRequiredAntiAffinity(), got.PodsWithRequiredAntiAffinity(), "round %d", i)
		require.Equal(t, want.PodsWithRequiredNonHostScopedAntiAffinity(), got.PodsWithRequiredNonHostScopedAntiAffinity(), "round %d", i)
		prev, prevFP = append(prev, got), append(prevFP, got.String())
		if i == 0 {
			require.Equal(t, fa, a.String(), "a's shared pod list was not written")
		}
	}
	require.Equal(t, fa, a.String())
	require.Equal(t, fb, b.String())
	require.Equal(t, fc, c.String())
	require.Equal(t, fa2, a2.String())
	for i, p := range prev {
		require.Equal(t, prevFP[i], p.String(), "what round %d froze did not change", i)
	}
}

// NewNodeStateInto gives an empty state as NewNodeState does, whatever the
// reused state held (its own pod lists, or lists still a NodeInfo's), and
// never changes what that state froze before.
func TestNewNodeStateInto(t *testing.T) {
	mk := func(uid string) *PodInfo {
		p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), Namespace: "ns"}, Spec: v1.PodSpec{
			Containers: []v1.Container{{Resources: v1.ResourceRequirements{Requests: v1.ResourceList{
				v1.ResourceCPU: *resource.NewMilliQuantity(10, resource.DecimalSI), "example.com/gpu": *resource.NewQuantity(1, resource.DecimalSI)}},
				Ports: []v1.ContainerPort{{HostPort: 80}}}},
			Volumes:  []v1.Volume{{Name: "v", VolumeSource: v1.VolumeSource{PersistentVolumeClaim: &v1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}}},
			Affinity: &v1.Affinity{PodAntiAffinity: &v1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []v1.PodAffinityTerm{{TopologyKey: "k"}}}},
		}}
		pi, err := NewPodInfo(p)
		require.NoError(t, err)
		return pi
	}
	own := NewNodeState(nil)
	own.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
	own.AddPod(mk("a1"))
	own.AddPod(mk("a2"))
	frozen := own.Freeze()
	thawed := frozen.Thaw(nil) // shares frozen's lists
	fp := frozen.String()
	for i, st := range []*NodeState{own, thawed, nil} {
		st = NewNodeStateInto(st, nil)
		ref := NewNodeState(nil)
		for _, s := range []*NodeState{st, ref} {
			require.Zero(t, s.NumPods())
			s.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}})
			s.AddPod(mk(fmt.Sprint("b", i)))
		}
		got, want := st.Freeze(), ref.Freeze()
		require.Equal(t, want.Pods(), got.Pods(), "state %d", i)
		require.Equal(t, want.PodsWithRequiredAntiAffinity(), got.PodsWithRequiredAntiAffinity(), "state %d", i)
		require.Equal(t, want.PodsWithRequiredNonHostScopedAntiAffinity(), got.PodsWithRequiredNonHostScopedAntiAffinity(), "state %d", i)
		require.Equal(t, want.Requested(), got.Requested(), "state %d", i)
		require.Equal(t, want.UsedPorts(), got.UsedPorts(), "state %d", i)
		require.Equal(t, want.PVCRefCounts(), got.PVCRefCounts(), "state %d", i)
		require.Equal(t, fp, frozen.String(), "state %d: what was frozen before changed", i)
	}
}

// Same holds exactly while the thawed state's aggregate equals the frozen
// entry's: after changes undone in reverse, not after a reorder, a node
// change or a pod with other requests.
func testThawSame(t *testing.T, a, b, c *PodInfo) {
	ref := NewNodeState(nil)
	ref.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	ref.AddPod(a)
	ref.AddPod(b)
	ni := ref.Freeze()
	st := ni.ThawInto(NewNodeState(nil), nil)
	require.True(t, st.Same(ni), "fresh thaw")
	require.False(t, st.Same(nil))
	st.AddPod(c)
	require.False(t, st.Same(ni), "one pod more")
	require.NoError(t, st.RemovePod("c", true, true, true))
	require.True(t, st.Same(ni), "the pod added and removed")
	require.NoError(t, st.RemovePod("a", true, true, true))
	st.AddPod(a)
	require.False(t, st.Same(ni), "the same pods in another order")
	require.True(t, ni.Thaw(nil).Same(ni))
	moved := ni.Thaw(nil)
	moved.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	require.False(t, moved.Same(ni), "another node object")
	// Equal lists but other totals: a state whose requests were changed
	// behind the lists (not reachable through the API) must not pass.
	tweaked := ni.Thaw(nil)
	tweaked.requested.MilliCPU++
	require.False(t, tweaked.Same(ni), "other requested cpu")
	tweaked = ni.Thaw(nil)
	tweaked.nonZeroRequested.Memory++
	require.False(t, tweaked.Same(ni), "other non-zero memory")
	tweaked = ni.Thaw(nil)
	tweaked.podsWithRequiredNonHostScopedAntiAffinity = nil
	require.False(t, tweaked.Same(ni), "other non-host-scoped anti-affinity sub-list")
	tweaked = ni.Thaw(nil)
	tweaked.pvcRefs = nil
	require.False(t, tweaked.Same(ni), "other claims")
	tweaked = ni.Thaw(nil)
	tweaked.usedPorts = nil
	require.False(t, tweaked.Same(ni), "other ports")
	tweaked = ni.Thaw(nil)
	tweaked.SetImageStates(map[string]ImageStateSummary{})
	require.False(t, tweaked.Same(ni), "other image summaries")
}
